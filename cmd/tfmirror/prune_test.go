package main

import (
	"bytes"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// cacheInProcess runs `tfmirror cache NAME` (run) on dataDir in this
// process, with no TFMIRROR_ variables, and returns its stdout, stderr
// and exit status. Its outputs take the writes of the command's own
// goroutines too (retention's log), as os.Stderr does.
func cacheInProcess(t *testing.T, name string, run func([]string, func(string) (string, bool), io.Writer, io.Writer) int, dataDir string, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr logbuf.Buffer
	code := run(append([]string{"--data-dir", dataDir}, args...), func(string) (string, bool) { return "", false }, &stdout, &stderr)
	t.Logf("tfmirror cache %s %v: exit %d\nstdout:\n%sstderr:\n%s", name, args, code, stdout.String(), stderr.String())
	return stdout.String(), stderr.String(), code
}

func pruneInProcess(t *testing.T, dataDir string, args ...string) (string, string, int) {
	t.Helper()
	return cacheInProcess(t, "prune", runPrune, dataDir, args...)
}

// syncedDataDir is a data directory into which tfmirror sync cached
// syncManifest's providers from syncOrigin (random 3.5.0 and 3.6.0,
// widget 0.2.0).
func syncedDataDir(t *testing.T) string {
	t.Helper()
	origin := syncOrigin(t)
	dataDir := t.TempDir()
	if _, _, code := syncInProcess(t, origin, dataDir, syncManifest(t, tfRegistry, "")); code != 0 {
		t.Fatalf("sync exit %d", code)
	}
	return dataDir
}

// syncedWithPin is syncedDataDir's, with a pins directory whose lock file
// pins random 3.5.0.
func syncedWithPin(t *testing.T) (dataDir, pins string) {
	t.Helper()
	dataDir = syncedDataDir(t)
	pins = t.TempDir()
	lock := `provider "` + tfRegistry + `/hashicorp/random" {
  version = "3.5.0"
}
`
	if err := os.WriteFile(filepath.Join(pins, ".terraform.lock.hcl"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	return dataDir, pins
}

// cache prune on a data directory: --dry-run lists exactly what the real
// prune then removes, with sizes; pins keep a version from every rule;
// named versions are removed whatever the rules say.
func TestCachePrune(t *testing.T) {
	dataDir, pins := syncedWithPin(t)
	if out, _, code := pruneInProcess(t, dataDir, "--dry-run", "--keep-versions", "1", "--pins-dir", pins); code != 0 || !strings.Contains(out, "would remove the packages of 0 versions") {
		t.Errorf("with 3.5.0 pinned: exit %d, %q; want nothing to remove", code, out)
	}
	dry, _, code := pruneInProcess(t, dataDir, "--dry-run", "--keep-versions", "1")
	if code != 0 || !strings.Contains(dry, "keep-versions  provider  "+tfRegistry+"/hashicorp/random  3.5.0  3 archives") ||
		!strings.Contains(dry, "would remove the packages of 1 versions") {
		t.Fatalf("dry run: exit %d\n%s", code, dry)
	}
	real, _, code := pruneInProcess(t, dataDir, "--keep-versions", "1")
	if code != 0 || strings.Replace(dry, "would remove", "removed", 1) != real {
		t.Errorf("prune: exit %d\n%s\nthe dry run listed:\n%s", code, real, dry)
	}
	if out, _, code := pruneInProcess(t, dataDir, "--dry-run", "--keep-versions", "1"); code != 0 || !strings.Contains(out, "would remove the packages of 0 versions") {
		t.Errorf("after the prune: exit %d, %q; want nothing left to remove", code, out)
	}
	out, _, code := pruneInProcess(t, dataDir, tfRegistry+"/acme/widget", "0.2.0")
	if code != 0 || !strings.Contains(out, "named  provider  "+tfRegistry+"/acme/widget  0.2.0  3 archives") {
		t.Errorf("named prune: exit %d\n%s", code, out)
	}
	if _, stderr, code := pruneInProcess(t, dataDir, tfRegistry+"/acme/widget", "0.9.0"); code != 1 || !strings.Contains(stderr, "no version 0.9.0") {
		t.Errorf("named prune of a version not held: exit %d, %q", code, stderr)
	}
	if _, _, code := pruneInProcess(t, dataDir, tfRegistry+"/acme/widget"); code != 2 {
		t.Errorf("a provider without versions: exit %d, want 2", code)
	}
}

// A prune through a serve whose answer does not come back whole (the
// serve failed, or the answer was lost) prints no total: the versions
// removed are not known, and "removed the packages of 0 versions" would
// say what is not so.
func TestCachePruneFailedPrintsNoTotal(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	fakeServeSocket(t, dataDir, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/prune" {
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, "{}")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":"the prune failed"}`)
	})
	out, errOut, code := pruneInProcess(t, dataDir, tfRegistry+"/acme/widget", "0.2.0")
	if code != 1 || strings.Contains(out, "removed the packages of") {
		t.Errorf("exit %d, stdout %q (stderr %q); want 1 and no total", code, out, errOut)
	}
}

// fakeServeSocket makes the data directory dataDir and answers its admin
// socket with h, as a running serve would answer there, until the test
// ends.
func fakeServeSocket(t *testing.T, dataDir string, h http.HandlerFunc) {
	t.Helper()
	emptyCacheIn(t, dataDir) // as a serve's data directory holds its cache
	ln, err := net.Listen("unix", admin.SocketPath(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// cache prune with no serve running takes its rules and pins as serve
// takes them: from its flags, the TFMIRROR_ variables and the --config
// file, flags first. Before, it read its rule flags alone: the pins
// directory the configuration file (or TFMIRROR_PINS_DIR) named was
// ignored, and `cache prune --config F --keep-versions 1` removed the
// version F's pins keep; and a sealed mirror's `offline` there was taken
// as false, so that the rules removed what cannot be fetched again.
func TestCachePruneTakesRulesAndPinsAsServeDoes(t *testing.T) {
	dataDir, pins := syncedWithPin(t)
	conf := func(body string) string {
		p := filepath.Join(t.TempDir(), "tfmirror.hcl")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	prune := func(env map[string]string, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		code := runPrune(append([]string{"--data-dir", dataDir, "--dry-run"}, args...), lookup, &stdout, &stderr)
		t.Logf("tfmirror cache prune %v %v: exit %d\n%s%s", env, args, code, stdout.String(), stderr.String())
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		return stdout.String()
	}
	const none, one = "would remove the packages of 0 versions", "would remove the packages of 1 versions"
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"pins in the configuration file", nil, []string{"--config", conf(`pins_dir = "` + pins + `"`), "--keep-versions", "1"}, none},
		{"pins in TFMIRROR_PINS_DIR", map[string]string{"TFMIRROR_PINS_DIR": pins}, []string{"--keep-versions", "1"}, none},
		{"rule and pins in the configuration file", nil, []string{"--config", conf("keep_versions = 1\npins_dir = \"" + pins + "\"\n")}, none},
		{"the rule in the configuration file", nil, []string{"--config", conf("keep_versions = 1\n")}, one},
		{"the rule in TFMIRROR_KEEP_VERSIONS", map[string]string{"TFMIRROR_KEEP_VERSIONS": "1"}, nil, one},
		{"a flag over the configuration file", nil, []string{"--config", conf("keep_versions = 1\n"), "--keep-versions", "0"}, none},
		// A sealed mirror's data directory: nothing in it can be fetched
		// again, so no rule removes anything.
		{"offline in the configuration file", nil, []string{"--config", conf("offline = true\n"), "--keep-versions", "1"}, none},
		{"offline in TFMIRROR_OFFLINE", map[string]string{"TFMIRROR_OFFLINE": "true"}, []string{"--keep-versions", "1"}, none},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out := prune(tc.env, tc.args...); !strings.Contains(out, tc.want) {
				t.Errorf("got\n%swant %q", out, tc.want)
			}
		})
	}
}

// A command that opens the data directory itself (no serve running)
// applies no retention rule in the background: serve's
// --retention-interval (10 minutes by default) is serve's. Before, a
// cache prune --dry-run given the rules by the configuration file, a
// TFMIRROR_ variable or its flags applied them in the background as it
// opened the cache, removing what it only listed, when the pass began
// before the command closed the cache.
func TestDataDirCommandAppliesNoRules(t *testing.T) {
	dataDir := syncedDataDir(t)
	env := map[string]string{"TFMIRROR_KEEP_VERSIONS": "1"}
	cfg, _, err := parseCacheCommandFlags("cache prune", []string{"--data-dir", dataDir}, func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		io.Discard, pruneUsage, func(*flag.FlagSet) {})
	if err != nil {
		t.Fatal(err)
	}
	logger, err := newLogger("text", "info", &testLogWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	// The engine as a command opens it, left open long enough for the
	// pass serve would apply at start.
	dd, err := openDataDir(t.Context(), "cache prune", cfg, logger, overrides{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	closeDataDir(dd, "test", io.Discard)
	out, _, code := pruneInProcess(t, dataDir, "--dry-run", "--keep-versions", "1")
	if code != 0 || !strings.Contains(out, "provider  "+tfRegistry+"/hashicorp/random  3.5.0") {
		t.Fatalf("dry run: exit %d\n%swant 3.5.0 still there to remove", code, out)
	}
}

// testLogWriter writes to the test's log.
type testLogWriter struct{ t *testing.T }

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// A prune through a serve prunes by that serve's rules: the retention
// variables set where the command runs (TFMIRROR_KEEP_VERSIONS, meant
// for a prune on its own, or the serve's own in a kubectl exec) are said
// to be ignored. They were passed over without a word, where the flags
// are refused and import says so of its variables.
func TestCachePruneThroughServeSaysVariablesIgnored(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	fakeServeSocket(t, dataDir, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}")
	})
	env := map[string]string{"TFMIRROR_KEEP_VERSIONS": "1", "TFMIRROR_OFFLINE": "true"}
	var stdout, stderr bytes.Buffer
	code := runPrune([]string{"--data-dir", dataDir, "--dry-run"}, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &stdout, &stderr)
	t.Logf("exit %d\nstdout:\n%sstderr:\n%s", code, stdout.String(), stderr.String())
	if code != 0 {
		t.Fatalf("a dry run through a serve: exit %d, want 0", code)
	}
	for name := range env {
		if !strings.Contains(stderr.String(), name+" is ignored: the tfmirror serving this data directory prunes with its own settings") {
			t.Errorf("stderr does not say %s is ignored", name)
		}
	}
	if strings.Contains(stderr.String(), "TFMIRROR_PINS_DIR") {
		t.Error("stderr names a variable that is not set")
	}
}

// A command that promises to remove nothing (cache prune --dry-run,
// cache verify, policy explain, export), opening a data directory whose
// configuration file has lowered cache_max_bytes below what is cached,
// removes nothing: opening the cache applied the size limit, and the
// dry run evicted the archives it said it would not touch.
func TestReadOnlyCommandsEvictNothing(t *testing.T) {
	dataDir := syncedDataDir(t)
	checked := func() string {
		t.Helper()
		out, _, code := verifyInProcess(t, dataDir)
		if code != 0 {
			t.Fatalf("cache verify: exit %d", code)
		}
		return out
	}
	before := checked()
	if !strings.Contains(before, "checked 9 packages") {
		t.Fatalf("cache verify after the sync: %q, want 9 packages", before)
	}
	conf := filepath.Join(t.TempDir(), "tfmirror.hcl")
	if err := os.WriteFile(conf, []byte("cache_max_bytes = \"1KiB\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// It lists what the size limit would evict (a test of its own:
	// TestCachePruneDryRunListsSizeLimitEvictions), and evicts none of it.
	if out, _, code := pruneInProcess(t, dataDir, "--dry-run", "--config", conf); code != 0 || !strings.Contains(out, "would remove the packages of ") {
		t.Fatalf("prune --dry-run: exit %d, %q", code, out)
	}
	if _, _, code := cacheInProcess(t, "verify", runVerify, dataDir, "--config", conf); code != 0 {
		t.Fatalf("cache verify --config: exit %d", code)
	}
	if after := checked(); after != before {
		t.Errorf("after a dry run and a check with cache_max_bytes below the cache: %q, was %q", after, before)
	}
}

// emptyCacheIn makes dataDir a data directory holding an empty cache, as
// a first serve or sync leaves it: the commands that read a cache refuse
// a directory without one.
func emptyCacheIn(t *testing.T, dataDir string) string {
	t.Helper()
	if err := os.MkdirAll(cacheDir(dataDir), 0o700); err != nil {
		t.Fatal(err)
	}
	return dataDir
}
