package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// runProcess runs the tfmirror binary with args in dir and returns its
// stdout, stderr and exit status.
func runProcess(t *testing.T, bin, dir string, args ...string) (string, string, int) {
	t.Helper()
	return runProcessEnv(t, bin, dir, nil, args...)
}

// runProcessEnv is runProcess with the environment env (nil: this
// process's).
func runProcessEnv(t *testing.T, bin, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("tfmirror %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	t.Logf("tfmirror %v: exit %d\nstdout:\n%sstderr:\n%s", args, code, stdout.String(), stderr.String())
	return stdout.String(), stderr.String(), code
}

// metricValue returns the value of the series (name and labels as
// exposed) in p's /metrics, failing the test when it is not there.
func metricValue(t *testing.T, p *proc, series string) float64 {
	t.Helper()
	body, _, err := p.get(context.Background(), "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("metrics lack %s", series)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestExportImportThroughRunningServe: with tfmirror serve running on
// the data directory, export and import (separate processes, given
// relative paths) work through its admin socket: the running engine does
// the work, its metrics count it, and what an import adds is served at
// once, sealed, to terraform init with the origin down.
func TestExportImportThroughRunningServe(t *testing.T) {
	t.Parallel()
	tf := terraformBinary(t)
	bin := buildBinary(t)
	origin := syncOrigin(t)
	caFile := originCAFile(t, origin)
	from := filepath.Join(t.TempDir(), "from")
	if _, _, code := syncInProcess(t, origin, from, syncManifest(t, tfRegistry, "")); code != 0 {
		t.Fatalf("sync exited %d", code)
	}
	origin.SetDown(503)
	hits := origin.TotalHits()
	work := t.TempDir() // the commands' working directory

	p := startProcess(t, bin, from, origin, caFile, "--offline", "--allowed-origins", tfRegistry)
	p.waitLog("admin API listening", 10*time.Second)
	stdout, stderr, code := runProcess(t, bin, work, "export", "--data-dir", from, "export.tar.gz")
	if code != 0 || !strings.Contains(stdout, "exported 9 packages") {
		t.Fatalf("export through the running serve: exit %d, want 0 and 9 packages exported", code)
	}
	if !strings.Contains(stderr, "working through the running tfmirror's admin socket") {
		t.Error("export did not say it worked through the running tfmirror")
	}
	if _, err := os.Stat(filepath.Join(work, "export.tar.gz")); err != nil {
		t.Fatalf("the export is not where its relative path names: %v", err)
	}
	if got := metricValue(t, p, `tfmirror_export_packages_total{outcome="exported"}`); got != 9 {
		t.Errorf("exported packages counted: %v, want 9", got)
	}
	if got := metricValue(t, p, `tfmirror_export_bytes_total`); got <= 0 {
		t.Errorf("exported bytes counted: %v, want > 0", got)
	}

	// The exporting mirror's key, which the importing serve trusts.
	key, _, code := runProcess(t, bin, work, "export-key", "--data-dir", from)
	if code != 0 || !strings.Contains(stdout, "signed the manifest with export key") {
		t.Fatalf("export-key: exit %d; export said %q", code, stdout)
	}
	if err := os.WriteFile(filepath.Join(work, "EXPORTER.asc"), []byte(key), 0o644); err != nil {
		t.Fatal(err)
	}

	to := filepath.Join(t.TempDir(), "to")
	q := startProcess(t, bin, to, origin, caFile, "--offline", "--allowed-origins", tfRegistry, "--trusted-export-keys", filepath.Join(work, "EXPORTER.asc"))
	q.waitLog("admin API listening", 10*time.Second)
	if _, stderr, code := runProcess(t, bin, work, "import", "--data-dir", to, "--trusted-export-keys", "EXPORTER.asc", "export.tar.gz"); code != 2 ||
		!strings.Contains(stderr, "give them to tfmirror serve") {
		t.Errorf("import with trust flags through the running serve: exit %d, want 2 and why", code)
	}
	stdout, stderr, code = runProcess(t, bin, work, "import", "--data-dir", to, "export.tar.gz")
	if code != 0 || !strings.Contains(stdout, "imported 9 packages") {
		t.Fatalf("import through the running serve: exit %d, want 0 and 9 packages imported", code)
	}
	if !strings.Contains(stderr, "working through the running tfmirror's admin socket") {
		t.Error("import did not say it worked through the running tfmirror")
	}
	if got := metricValue(t, q, `tfmirror_import_packages_total{outcome="imported"}`); got != 9 {
		t.Errorf("imported packages counted: %v, want 9", got)
	}
	// The serve's audit log says what the import changed, and who asked.
	audit := q.waitLog("admin import", 10*time.Second)
	if audit["packages_imported"] != float64(9) || audit["refused"] != float64(0) || audit["caller_uid"] != float64(os.Getuid()) ||
		audit["caller_pid"] == nil || audit["caller_pid"] == float64(q.cmd.Process.Pid) || audit["caller_pid"] == float64(0) {
		t.Errorf("audit log line of the import: %v", audit)
	}
	imported := metricValue(t, q, `tfmirror_import_bytes_total`)
	if imported <= 0 {
		t.Errorf("imported bytes counted: %v, want > 0", imported)
	}
	if got := len(q.status(t).cachedPlatforms()); got != 9 {
		t.Errorf("the running serve's status page lists %d cached archives, want 9", got)
	}
	terraformInitOffline(t, tf, q, to)

	stdout, _, code = runProcess(t, bin, work, "import", "--data-dir", to, "export.tar.gz")
	if code != 0 || !strings.Contains(stdout, "imported 0 packages (0 bytes), 9 already present") {
		t.Errorf("second import: exit %d, want 0 and 9 already present", code)
	}
	if got := metricValue(t, q, `tfmirror_import_packages_total{outcome="present"}`); got != 9 {
		t.Errorf("present packages counted: %v, want 9", got)
	}
	if got := metricValue(t, q, `tfmirror_import_bytes_total`); got != imported {
		t.Errorf("imported bytes after a second import: %v, want still %v", got, imported)
	}
	if n := origin.TotalHits(); n != hits {
		t.Errorf("the sealed mirrors made %d origin requests", n-hits)
	}
}
