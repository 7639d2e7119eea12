package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/manifest"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
)

// errSignal is the cause signal.NotifyContext gives sync's context when
// the operator presses Ctrl-C.
var errSignal = errors.New("interrupt signal received")

// signalServeOps is sync's engine through a running serve's admin
// socket, interrupted: the provider's version and package are answered
// at once, and its archive is being fetched, through a real admin client
// and socket, when the operator presses Ctrl-C (interrupt).
type signalServeOps struct {
	engineOps
	client *admin.Client
}

func (o *signalServeOps) Versions(context.Context, addrs.Provider) ([]admin.Version, error) {
	return []admin.Version{{Version: "1.0.0", Platforms: []string{"linux_amd64", "darwin_arm64"}}}, nil
}

func (o *signalServeOps) Package(context.Context, addrs.Provider, string, []string) ([]admin.Archive, error) {
	return []admin.Archive{{Platform: "linux_amd64", Filename: "a.zip"}, {Platform: "darwin_arm64", Filename: "b.zip"}}, nil
}

func (o *signalServeOps) Held(context.Context, admin.PolicyRequest) ([]unsigned.Version, error) {
	return nil, nil
}

func (o *signalServeOps) Ensure(ctx context.Context, p addrs.Provider, version, platform string) (admin.Ensured, error) {
	return o.client.Ensure(ctx, p, version, platform)
}

// TestSyncThroughServeInterruptedBySignal: a sync through a running
// serve, interrupted by SIGINT or SIGTERM (whose context's cause names
// the signal, which the HTTP client of the admin socket answers with),
// counts the archives under way as not fetched, not failed, as a sync
// of its own does: no "failed:" line naming the signal.
func TestSyncThroughServeInterruptedBySignal(t *testing.T) {
	dir := t.TempDir()
	ctx, interrupt := context.WithCancelCause(context.Background())
	defer interrupt(nil)
	ln, err := admin.Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Each call waits until its client has gone, or the test ends.
	ended := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/ping" { // Dial's question, answered
			io.WriteString(w, "{}")
			return
		}
		interrupt(errSignal) // as signal.NotifyContext does
		select {
		case <-r.Context().Done():
		case <-ended:
		}
	})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	defer func() {
		close(ended)
		srv.Close()
		<-served
	}()
	client, err := admin.Dial(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	path := filepath.Join(dir, "sync.hcl")
	src := "platforms = [\"linux_amd64\", \"darwin_arm64\"]\nprovider \"registry.terraform.io/acme/a\" {\n  versions = [\"1.0.0\"]\n}\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := manifest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := resolvePlatforms(spec, nil); err != nil {
		t.Fatal(err)
	}
	var out, status bytes.Buffer
	r := &syncRun{cfg: syncConfig{Config: settings.Config{DataDir: dir}, Parallel: 2}, ops: &signalServeOps{client: client},
		out: &out, status: &status, now: time.Now}
	if r.runProviders(ctx, spec) {
		t.Errorf("an interrupted sync succeeded")
	}
	printed := out.String() + status.String()
	t.Logf("printed:\n%s", printed)
	if strings.Contains(printed, "failed:") || strings.Contains(printed, "signal received") {
		t.Errorf("an interrupt was reported as failed archives")
	}
	if !strings.Contains(printed, "0 failed, 2 not fetched (interrupted)") {
		t.Errorf("the summary does not count the 2 archives as not fetched")
	}
}
