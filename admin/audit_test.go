package admin

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/airgap"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// logLines returns the JSON log lines of b whose msg is msg.
func logLines(t *testing.T, b *logbuf.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func jsonLogger(b *logbuf.Buffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// TestAuthorize: the admin API takes callers running as the server's
// user or root, and nobody else.
func TestAuthorize(t *testing.T) {
	for _, tc := range []struct {
		name      string
		peer      Peer
		serverUID int
		ok        bool
	}{
		{"the server's user", Peer{UID: 1000, PID: 42}, 1000, true},
		{"root, server not root", Peer{UID: 0, PID: 42}, 1000, true},
		{"root, server root", Peer{UID: 0, PID: 42}, 0, true},
		{"another user", Peer{UID: 1001, PID: 42}, 1000, false},
		{"another user, server root", Peer{UID: 65534, PID: 42}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := authorize(tc.peer, tc.serverUID)
			if (err == nil) != tc.ok {
				t.Fatalf("authorize(%+v, %d) = %v, want ok %v", tc.peer, tc.serverUID, err, tc.ok)
			}
			if err != nil {
				for _, want := range []string{fmt.Sprintf("uid %d", tc.peer.UID), "pid 42", fmt.Sprintf("(uid %d)", tc.serverUID), "nor root"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("refusal %q does not say %q", err, want)
					}
				}
			}
		})
	}
}

// A request whose caller's credentials were not read (the handler served
// over TCP, not through NewServer on a unix socket) is refused.
func TestAdminRefusesUnknownCaller(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	var logs logbuf.Buffer
	srv := httptest.NewServer(h.newAPI(t, jsonLogger(&logs), nil, Options{}).Handler())
	defer srv.Close()
	for _, req := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/versions", `{"provider":"registry.terraform.io/hashicorp/random"}`},
		{http.MethodGet, "/v1/ping", ""}, // Dial's question, behind the same guard
	} {
		hreq, err := http.NewRequest(req.method, srv.URL+req.path, strings.NewReader(req.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(hreq)
		if err != nil {
			t.Fatal(err)
		}
		var body ErrorBody
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body.Error, "credentials") {
			t.Errorf("%s %s: %d %q, want 403 about the caller's credentials", req.method, req.path, resp.StatusCode, body.Error)
		}
	}
	if n := h.origin.TotalHits(); n != 0 {
		t.Errorf("the refused request reached the origin %d times", n)
	}
	if n := len(logLines(t, &logs, "admin request refused")); n != 2 {
		t.Errorf("%d refusals logged, want 2", n)
	}
}

// TestAdminAudit: what sync (ensure), export and import change through
// the admin socket is logged at info level with what changed and the
// caller's uid and pid, refusals included.
func TestAdminAudit(t *testing.T) {
	from := newHarness(t, harnessOptions{})
	from.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	to := newHarness(t, harnessOptions{})
	key, trusted := exportKeyPair(t)
	var logs logbuf.Buffer
	_, postFrom := socket(t, from.newAPI(t, jsonLogger(&logs), nil, Options{ExportKey: func() (*airgap.ExportKey, error) { return key, nil }}))
	size := float64(len(from.origin.Archive("hashicorp", "random", "3.6.0", "linux_amd64")))
	caller := func(t *testing.T, line map[string]any) {
		t.Helper()
		if line["caller_uid"] != float64(os.Getuid()) || line["caller_pid"] != float64(os.Getpid()) || line["level"] != "INFO" {
			t.Errorf("log line %v: want level INFO, caller_uid %d, caller_pid %d", line, os.Getuid(), os.Getpid())
		}
	}

	if status, body := postFrom("/v1/ensure", `{"provider":"registry.terraform.io/hashicorp/random","version":"3.6.0","platform":"linux_amd64"}`); status != 200 {
		t.Fatalf("ensure: %d %s", status, body)
	}
	ensured := logLines(t, &logs, "admin sync: package ensured")
	if len(ensured) != 1 {
		t.Fatalf("%d lines for one ensure", len(ensured))
	}
	caller(t, ensured[0])
	if e := ensured[0]; e["provider"] != "registry.terraform.io/hashicorp/random" || e["version"] != "3.6.0" || e["platform"] != "linux_amd64" ||
		e["fetched"] != true || e["bytes"] != size {
		t.Errorf("ensure line %v", e)
	}

	out := filepath.Join(t.TempDir(), "export")
	if status, body := postFrom("/v1/export", `{"out":`+jsonString(out)+`}`); status != 200 {
		t.Fatalf("export: %d %s", status, body)
	}
	exported := logLines(t, &logs, "admin export")
	if len(exported) != 1 {
		t.Fatalf("%d lines for one export", len(exported))
	}
	caller(t, exported[0])
	if e := exported[0]; e["out"] != out || e["packages_written"] != float64(1) || e["bytes"] != size || e["failed"] != float64(0) ||
		!slices.Equal(anyStrings(e["versions"]), []string{"registry.terraform.io/hashicorp/random 3.6.0"}) ||
		!slices.Equal(anyStrings(e["providers"]), []string{"registry.terraform.io/hashicorp/random"}) {
		t.Errorf("export line %v", e)
	}

	// An import that trusts no key refuses the version; one that trusts
	// the exporter's imports it.
	for _, trust := range []airgap.Trust{{}, {ExportKeys: trusted}} {
		_, postTo := socket(t, to.newAPI(t, jsonLogger(&logs), nil, Options{ScratchDir: t.TempDir(), Trust: trust}))
		if status, body := postTo("/v1/import", `{"in":`+jsonString(out)+`}`); status != 200 {
			t.Fatalf("import: %d %s", status, body)
		}
	}
	imported := logLines(t, &logs, "admin import")
	if len(imported) != 2 {
		t.Fatalf("%d lines for two imports", len(imported))
	}
	refused, taken := imported[0], imported[1]
	caller(t, refused)
	caller(t, taken)
	if refused["refused"] != float64(1) || refused["packages_imported"] != float64(0) || len(anyStrings(refused["refusals"])) != 1 ||
		!strings.Contains(anyStrings(refused["refusals"])[0], "registry.terraform.io/hashicorp/random 3.6.0 refused") {
		t.Errorf("refused import line %v", refused)
	}
	if taken["refused"] != float64(0) || taken["packages_imported"] != float64(1) || taken["bytes"] != size || taken["in"] != out ||
		!slices.Equal(anyStrings(taken["versions"]), []string{"registry.terraform.io/hashicorp/random 3.6.0"}) ||
		!slices.Equal(anyStrings(taken["providers"]), []string{"registry.terraform.io/hashicorp/random"}) {
		t.Errorf("import line %v", taken)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// anyStrings is a JSON array of strings as decoded into any.
func anyStrings(v any) []string {
	list, _ := v.([]any)
	out := []string{}
	for _, e := range list {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}
