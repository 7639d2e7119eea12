package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// writeInHouse lays out an in-house build of HOST/NS/TYPE version for
// linux_amd64 under root as `terraform providers mirror` would (no
// evidence), and returns root.
func writeInHouse(t *testing.T, root, host, ns, typ, version string) string {
	t.Helper()
	dir := filepath.Join(root, host, ns, typ)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	h := &zip.FileHeader{Name: "terraform-provider-" + typ + "_v" + version, Method: zip.Deflate}
	h.SetMode(0o755)
	f, err := zw.CreateHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "#!/bin/sh\necho in-house build\nexit 1\n")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	name := "terraform-provider-" + typ + "_" + version + "_linux_amd64.zip"
	if err := os.WriteFile(filepath.Join(dir, name), zbuf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestImportUnsignedUnderOriginHost: `tfmirror import --allow-unsigned`
// of a provider under an allowed origin host adds nothing unless
// --allow-unsigned-hosts names the host, and says which flag; a host that
// is not an allowed origin cannot be named.
func TestImportUnsignedUnderOriginHost(t *testing.T) {
	in := writeInHouse(t, t.TempDir(), "registry.terraform.io", "acme", "alpha", "1.0.0")
	data := filepath.Join(t.TempDir(), "data")

	code, stdout, stderr := runCommand("import", "--data-dir", data, "--allow-unsigned", in)
	if code != 1 {
		t.Errorf("import --allow-unsigned: exit %d, want 1\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"registry.terraform.io/acme/alpha 1.0.0 refused", "registry.terraform.io is an allowed origin", "--allow-unsigned-hosts"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, stderr)
		}
	}
	if got := cachedVersions(t, data); len(got) != 0 {
		t.Errorf("the refused import cached %v", got)
	}

	code, stdout, stderr = runCommand("import", "--data-dir", data, "--allow-unsigned", "--allow-unsigned-hosts", "tf.corp.example", in)
	if code != 2 || !strings.Contains(stderr, "tf.corp.example is not among --allowed-origins") {
		t.Errorf("--allow-unsigned-hosts of a host that is no origin: exit %d, want 2\n%s%s", code, stdout, stderr)
	}

	code, stdout, stderr = runCommand("import", "--data-dir", data, "--allow-unsigned", "--allow-unsigned-hosts", "registry.terraform.io", in)
	if code != 0 || !strings.Contains(stdout, "imported 1 packages") {
		t.Fatalf("import --allow-unsigned-hosts registry.terraform.io: exit %d\n%s%s", code, stdout, stderr)
	}
	if got := cachedVersions(t, data); !slices.Equal(got, []string{"registry.terraform.io/acme/alpha 1.0.0"}) {
		t.Errorf("after the allowed import, the cache holds %v", got)
	}
}

// watchedLog collects a serve's JSON log lines and says when one with a
// given message was written.
type watchedLog struct {
	mu    sync.Mutex
	lines []map[string]any
	seen  chan struct{} // closed at the first line with message want
	want  string
}

func newWatchedLog(want string) *watchedLog {
	return &watchedLog{seen: make(chan struct{}), want: want}
}

func (w *watchedLog) Write(p []byte) (int, error) {
	var m map[string]any
	if json.Unmarshal(p, &m) == nil {
		w.mu.Lock()
		w.lines = append(w.lines, m)
		if m["msg"] == w.want && w.want != "" {
			close(w.seen)
			w.want = ""
		}
		w.mu.Unlock()
	}
	return len(p), nil
}

// logged returns the lines with message msg.
func (w *watchedLog) logged(msg string) []map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []map[string]any
	for _, l := range w.lines {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// startSealed starts a sealed serve on data with args and waits until its
// admin socket listens.
func startSealed(t *testing.T, data string, args ...string) (*testMirror, *watchedLog) {
	t.Helper()
	logs := newWatchedLog("admin API listening")
	m := startMirror(t, newOrigin(t, fakeorigin.Options{}), data, logs, append([]string{"--offline"}, args...)...)
	select {
	case <-logs.seen:
	case <-time.After(time.Minute): // as waitLog's
		t.Fatal("the admin socket did not listen within a minute")
	}
	return m, logs
}

// TestImportUnsignedThroughRunningServe: through a running serve, the
// serve's --allow-unsigned-hosts decides, never the import's; the
// serve's audit log records the refusal; and versions imported so are
// withheld by a serve started without the host (logged, on the status
// page, 404), and served again by one that names it.
func TestImportUnsignedThroughRunningServe(t *testing.T) {
	in := writeInHouse(t, t.TempDir(), tfRegistry, "acme", "alpha", "1.0.0")
	data := filepath.Join(t.TempDir(), "data")
	const versionJSON = tfRegistry + "/acme/alpha/1.0.0.json"

	m, logs := startSealed(t, data)
	code, stdout, stderr := runCommand("import", "--data-dir", data, "--allow-unsigned", in)
	if code != 1 || !strings.Contains(stderr, "working through the running tfmirror's admin socket") ||
		!strings.Contains(stderr, tfRegistry+"/acme/alpha 1.0.0 refused") || !strings.Contains(stderr, "--allow-unsigned-hosts") {
		t.Errorf("import --allow-unsigned through a serve without the host: exit %d\n%s%s", code, stdout, stderr)
	}
	audit := logs.logged("admin import")
	if len(audit) != 1 || audit[0]["refused"] != float64(1) || audit[0]["packages_imported"] != float64(0) ||
		audit[0]["allow_unsigned"] != true || audit[0]["caller_uid"] != float64(os.Getuid()) || audit[0]["caller_pid"] != float64(os.Getpid()) {
		t.Errorf("audit log of the refused import: %v", audit)
	}
	code, stdout, stderr = runCommand("import", "--data-dir", data, "--allow-unsigned", "--allow-unsigned-hosts", tfRegistry, in)
	if code != 2 || !strings.Contains(stderr, "--allow-unsigned-hosts given, but the tfmirror serving this data directory does the import") {
		t.Errorf("import --allow-unsigned-hosts through a serve: exit %d, want 2 and why\n%s%s", code, stdout, stderr)
	}
	// Nothing of it is cached: the sealed mirror's answer for what it
	// does not have.
	if resp, body, err := m.get(versionJSON); err != nil || resp.StatusCode != 503 {
		t.Errorf("%s after the refused imports: %v %s, want 503", versionJSON, err, body)
	}
	m.stop()

	m, _ = startSealed(t, data, "--allow-unsigned-hosts", tfRegistry)
	if code, stdout, stderr := runCommand("import", "--data-dir", data, "--allow-unsigned", in); code != 0 || !strings.Contains(stdout, "imported 1 packages") {
		t.Fatalf("import --allow-unsigned through a serve with the host: exit %d\n%s%s", code, stdout, stderr)
	}
	if resp, body, err := m.get(versionJSON); err != nil || resp.StatusCode != 200 {
		t.Errorf("%s once imported: %v %s", versionJSON, err, body)
	}
	m.stop()

	m, logs = startSealed(t, data)
	if w := logs.logged("withholding a version imported without signature under an allowed origin host, which would shadow the origin's provider; to serve it, name the host in --allow-unsigned-hosts"); len(w) != 1 ||
		w[0]["provider"] != tfRegistry+"/acme/alpha" || w[0]["version"] != "1.0.0" {
		t.Errorf("start-up log of the withheld version: %v", w)
	}
	for _, path := range []string{versionJSON, tfRegistry + "/acme/alpha/terraform-provider-alpha_1.0.0_linux_amd64.zip"} {
		if resp, body, err := m.get(path); err != nil || resp.StatusCode != 404 {
			t.Errorf("%s withheld: %v %s, want 404", path, err, body)
		}
	}
	_, body, err := m.get("?format=json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Withheld []struct {
			Provider, Version string
			Platforms         []string
		}
	}
	if err := json.Unmarshal(body, &st); err != nil || len(st.Withheld) != 1 || st.Withheld[0].Provider != tfRegistry+"/acme/alpha" || st.Withheld[0].Version != "1.0.0" {
		t.Errorf("status JSON withheld: %v %s", err, body)
	}
}

// TestWithheldImportDoesNotHideOriginVersion: a version imported without
// signature under an allowed origin (while the host was named), then
// withheld by a serve that does not name the host, does not hide the
// origin's own version of that number: terraform init through the
// mirror's host block installs the origin's package, and its lock file
// equals a direct install's; the import is kept and still listed.
func TestWithheldImportDoesNotHideOriginVersion(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	e.origin.AddProvider("acme", "alpha", []string{"1.0.0"}, registryPlatforms())
	providers := map[string]string{"alpha": "acme/alpha@1.0.0"}
	wantLock, _ := direct(t, e).init(t, providers)
	e.origin.ResetHits()

	e.stop()
	in := writeInHouse(t, t.TempDir(), tfRegistry, "acme", "alpha", "1.0.0")
	code, stdout, stderr := runCommand("import", "--data-dir", e.dataDir,
		"--allow-unsigned", "--allow-unsigned-hosts", tfRegistry, in)
	if code != 0 || !strings.Contains(stdout, "imported 1 packages") {
		t.Fatalf("import --allow-unsigned-hosts: exit %d\n%s%s", code, stdout, stderr)
	}
	e.startMirror(e.dataDir)
	if w := e.mirror.engine.Withheld(); len(w) != 1 || w[0].Version != "1.0.0" {
		t.Fatalf("the import is not withheld at start: %+v", w)
	}

	lock, out := throughMirror(t, e, "").init(t, providers)
	if !bytes.Equal(lock, wantLock) {
		t.Errorf("lock file through the mirror:\n%s\nwant the direct install's:\n%s\n%s", lock, wantLock, out)
	}
	if n := e.origin.Hits(fakeorigin.Archive); n != 1 {
		t.Errorf("origin archive fetches = %d, want 1 (the origin's package pulled through)", n)
	}
	if w := e.mirror.engine.Withheld(); len(w) != 1 || w[0].Version != "1.0.0" || !slices.Equal(w[0].Platforms, []string{"linux_amd64"}) {
		t.Errorf("the import is no longer listed as withheld: %+v", w)
	}

	// The operator's view, through the running serve: a check of the
	// cache reads the import set aside against its sha256; a prune naming
	// the version removes it with the origin's package, and it is no
	// longer withheld. The pulled-through archive is committed once its
	// download ends, which may be after terraform has its last byte.
	waitIdle(e.mirror.engine)
	code, stdout, stderr = runCommand("cache", "verify", "--data-dir", e.dataDir)
	if code != 0 || !strings.Contains(stdout, "checked 2 packages") || !strings.Contains(stdout, "(1 against stored evidence, 1 against their sha256): 0 failed") {
		t.Errorf("cache verify: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCommand("cache", "prune", "--data-dir", e.dataDir, tfRegistry+"/acme/alpha", "1.0.0")
	if code != 0 || !strings.Contains(stdout, "2 archives") || !strings.Contains(stdout, "with the withheld import set aside in it") {
		t.Errorf("cache prune of 1.0.0: exit %d\n%s%s", code, stdout, stderr)
	}
	if w := e.mirror.engine.Withheld(); len(w) != 0 {
		t.Errorf("after the prune, withheld: %+v", w)
	}
}
