package admin

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// TestReload: POST /v1/reload runs Options.Reload and answers what it
// put in force, through the socket and the Client; a refusal answers its
// status and reason; without Options.Reload (a command that opened the
// data directory itself) a reload is refused with 409.
func TestReload(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	var refuse error
	a := h.newAPI(t, nil, nil, Options{Reload: func(context.Context) (Reloaded, error) {
		if refuse != nil {
			return Reloaded{File: "/etc/tfmirror/tfmirror.hcl"}, refuse
		}
		return Reloaded{File: "/etc/tfmirror/tfmirror.hcl",
			Settings: []SettingChange{{Name: "log-level", Attribute: "log_level", Old: "info", New: "debug"}},
			Parts:    []PartChange{{Name: "policy", Added: []string{`deny "h/acme/*"`}}}}, nil
	}})
	dataDir, _ := socket(t, a)
	c, err := Dial(context.Background(), dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Reload(context.Background())
	if err != nil || res.File != "/etc/tfmirror/tfmirror.hcl" || len(res.Settings) != 1 || res.Settings[0].New != "debug" ||
		len(res.Parts) != 1 || res.Parts[0].Added[0] != `deny "h/acme/*"` {
		t.Fatalf("reload: %+v, %v", res, err)
	}
	refuse = &httperr.RequestError{Status: http.StatusUnprocessableEntity, Msg: "configuration file /etc/tfmirror/tfmirror.hcl refused: tfmirror.hcl:3: bad"}
	_, err = c.Reload(context.Background())
	var ce *CallError
	if !errors.As(err, &ce) || ce.Status != http.StatusUnprocessableEntity || !strings.Contains(ce.Msg, "tfmirror.hcl:3") {
		t.Errorf("refused reload: %v", err)
	}

	_, post := socket(t, h.newAPI(t, nil, nil, Options{}))
	if status, body := post("/v1/reload", "{}"); status != http.StatusConflict || !strings.Contains(string(body), "no configuration to reload") {
		t.Errorf("reload without Options.Reload: %d %s", status, body)
	}
}

// TestReloadAndExportKeyClientOfAnEarlierServe: `tfmirror export-key`
// of this release asking a serve of 2.0.0 (the binary replaced, the
// serve not yet restarted), which has no such route, and `tfmirror
// reload` asking one of 1.0.0, are told what the 404 means, as policy
// explain is, not "404 page not found".
func TestReloadAndExportKeyClientOfAnEarlierServe(t *testing.T) {
	c := dialEarlierServe(t)
	if _, err := c.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "does not reload through the admin socket (is it of an earlier release? restart it)") {
		t.Errorf("reload from an earlier serve: %v", err)
	}
	if _, err := c.ExportKey(context.Background()); err == nil || !strings.Contains(err.Error(), "does not tell its export key (is it of an earlier release? restart it)") {
		t.Errorf("export key from an earlier serve: %v", err)
	}
}
