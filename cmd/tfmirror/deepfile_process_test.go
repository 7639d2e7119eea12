package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// deepHCL is an attribute nested in n brackets: under a megabyte for n
// below half a million, and far beyond what HCL's recursive parser
// survives (a Go stack overflow is fatal, not a panic).
func deepHCL(n int) []byte {
	return []byte("a = " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n")
}

// memoryBound is what a command reading a hostile file may map for its
// data (heap, stacks): runBounded runs it under that RLIMIT_DATA, so a
// command that grows past it dies instead of passing. (The peak resident
// size rusage reports cannot serve: a child started by os/exec shares
// the test process's memory until it execs, and its peak counts that.)
const memoryBound = 256 << 20

// runBounded runs the binary with args and env under memoryBound (with
// util-linux's prlimit), and returns its exit status and its output.
func runBounded(t *testing.T, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Fatalf("prlimit (util-linux) bounds the command's memory: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prlimit, append([]string{fmt.Sprintf("--data=%d", memoryBound), "--", bin}, args...)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("tfmirror %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	if len(out) > 4000 {
		out = append(out[:4000], "..."...)
	}
	return code, string(out)
}

// TestDeepFilesRefusedProcess runs the binary on each kind of file it
// parses, in each of the hostileShapes (nested half a million levels
// deep, 600,000 tokens wide, not UTF-8; under each file's size
// limit): the configuration file (config check, and serve at start), the
// origin credentials file, the module source credentials, a sync
// manifest, a Terraform configuration, and the pins of cache prune (whose
// rules then remove nothing: they would not know what is pinned). Each
// command refuses the file with its file:line and exits with its error
// status, instead of dying of a stack overflow or running out of memory
// after taking a gigabyte, and stays small while doing so.
func TestDeepFilesRefusedProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	for _, tc := range []struct {
		name string
		file string // the deep file's name in its directory
		args func(file, data string) []string
		code int
	}{
		{"config check", "tfmirror.hcl", func(f, _ string) []string { return []string{"config", "check", f} }, 1},
		{"config check, JSON", "tfmirror.json", func(f, _ string) []string { return []string{"config", "check", f} }, 1},
		{"serve configuration", "tfmirror.hcl", func(f, d string) []string {
			return []string{"serve", "--data-dir", d, "--listen", "127.0.0.1:0", "--config", f}
		}, 2},
		{"serve credentials file", "credentials.tfrc", func(f, d string) []string {
			return []string{"serve", "--data-dir", d, "--listen", "127.0.0.1:0", "--credentials-file", f}
		}, 1},
		{"serve module source credentials", "module-creds.hcl", func(f, d string) []string {
			return []string{"serve", "--data-dir", d, "--listen", "127.0.0.1:0", "--module-source-credentials", f}
		}, 1},
		{"sync manifest", "mirror.hcl", func(f, d string) []string { return []string{"sync", "--data-dir", d, "--dry-run", f} }, 2},
		{"sync configuration", "main.tf", func(f, d string) []string {
			return []string{"sync", "--data-dir", d, "--dry-run", filepath.Dir(f)}
		}, 2},
		{"cache prune pins", "pins.hcl", func(f, d string) []string {
			return []string{"cache", "prune", "--data-dir", d, "--dry-run", "--keep-versions", "1", "--pins-dir", filepath.Dir(f)}
		}, 1},
	} {
		for _, shape := range hostileShapes {
			t.Run(tc.name+"/"+shape.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				file := filepath.Join(dir, tc.file)
				body := shape.native
				if strings.HasSuffix(tc.file, ".json") {
					body = shape.json
				}
				if err := os.WriteFile(file, body, 0o600); err != nil {
					t.Fatal(err)
				}
				// An existing data directory: cache prune refuses one
				// that is not there, or holds no cache, before it reads
				// its pins.
				data := emptyCacheIn(t, filepath.Join(t.TempDir(), "data"))
				code, out := runBounded(t, bin, []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, tc.args(file, data)...)
				if code < 0 || code > 2 || strings.Contains(out, "stack overflow") || strings.Contains(out, "out of memory") || strings.Contains(out, "goroutine ") {
					t.Fatalf("exit %d, the process crashed (or outgrew %d MiB):\n%.600s", code, memoryBound>>20, out)
				}
				if code != tc.code || !strings.Contains(out, file+":1") || !strings.Contains(out, shape.summary) {
					t.Errorf("exit %d, want %d and the file refused at %s:1 (%s):\n%s", code, tc.code, file, shape.summary, out)
				}
			})
		}
	}
}

// hostileShapes are the files of TestDeepFilesRefusedProcess, each
// refused on its first line: nested half a million levels deep; a tuple
// of 300,000 ones (600 KB, under the configuration file's megabyte, which
// HCL's parser would take half a gigabyte to build); and a bad byte before a line of brackets, which
// HCL's scanner reads as a name, where a check that took "#" for a
// comment let the brackets through to overflow the stack.
var hostileShapes = []struct {
	name         string
	native, json []byte
	summary      string
}{
	{"deep", deepHCL(500000), []byte(`{"a": ` + strings.Repeat("[", 500000) + strings.Repeat("]", 500000) + "}\n"), "Nesting too deep"},
	{"wide", []byte("a = [" + strings.Repeat("1,", 300000) + "1]\n"), []byte(`{"a": [` + strings.Repeat("1,", 300000) + "1]}\n"), "Too many tokens"},
	{"not UTF-8", []byte("a = \xda#" + strings.Repeat("[", 500000) + strings.Repeat("]", 500000) + "\n"), []byte("{\"a\": \"\xda\"}\n"), "Invalid UTF-8"},
}

// TestDeepPinsFileAtStart: serve starts with a pins directory that holds
// a 3 MB file nested too deep (under the 4 MiB a pins file may hold): it
// serves, logs the refusal with the file and line, and the status page
// shows it, where it crash-looped before.
func TestDeepPinsFileAtStart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	pins := t.TempDir()
	deep := filepath.Join(pins, "team.hcl")
	if err := os.WriteFile(deep, deepHCL(1500000), 0o644); err != nil {
		t.Fatal(err)
	}
	m := startProcess(t, bin, filepath.Join(t.TempDir(), "data"), origin, originCAFile(t, origin), "--pins-dir", pins)
	logged := m.waitLog("reading the pins; the pins read before are kept", 30*time.Second)
	if e, _ := logged["error"].(string); !strings.Contains(e, deep+":1: Nesting too deep") {
		t.Errorf("the log does not name the file and line: %q", e)
	}
	st := m.status(t)
	if !strings.Contains(st.Retention.PinsError, deep+":1") {
		t.Errorf("the status page's pins error: %q", st.Retention.PinsError)
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	if err := m.wait(30 * time.Second); err != nil {
		t.Fatalf("tfmirror exited with %v", err)
	}
}

// TestDeepConfigOnHangup: a configuration file replaced by one nested too
// deep (1 MB, its size limit) is refused on SIGHUP like any broken file:
// the configuration in force stays and the serve keeps serving, where it
// died before.
func TestDeepConfigOnHangup(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	path := filepath.Join(t.TempDir(), "tfmirror.hcl")
	if err := os.WriteFile(path, []byte("public_url = \"https://mirror.example.test/\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := startProcess(t, bin, filepath.Join(t.TempDir(), "data"), origin, originCAFile(t, origin), "--config", path)
	deep := append([]byte("public_url = \"https://other.example.test/\"\n"), deepHCL(500000)...)
	if err := os.WriteFile(path, deep, 0o600); err != nil {
		t.Fatal(err)
	}
	m.cmd.Process.Signal(syscall.SIGHUP)
	refused := m.waitLog("configuration file refused; the configuration in force stays", 30*time.Second)
	if e, _ := refused["error"].(string); !strings.Contains(e, path+":2,1-1: Nesting too deep") {
		t.Errorf("the refusal does not name the file and line: %q", e)
	}
	body, _, err := m.get(context.Background(), "/?format=json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		MirrorURL string `json:"mirror_url"`
	}
	if err := json.Unmarshal(body, &st); err != nil || st.MirrorURL != "https://mirror.example.test/" {
		t.Errorf("mirror_url after the refused reload: %q (%v)", st.MirrorURL, err)
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	if err := m.wait(30 * time.Second); err != nil {
		t.Fatalf("tfmirror exited with %v", err)
	}
}

// TestSyncDeepModuleProcess: sync fetches registry modules whose main.tf
// is one of the hostileShapes (nested too deep, too wide, not UTF-8) and
// refuses each, naming the module and the file's line, where the sync
// process died before (of a stack overflow, or after half a gigabyte).
func TestSyncDeepModuleProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	for i, shape := range hostileShapes {
		name := fmt.Sprintf("shape%d", i)
		origin.AddTarball(name+".tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": shape.native}))
		origin.AddModule("acme", name, "aws", "1.0.0", origin.TarballURL(name+".tar.gz"))
	}
	for i, shape := range hostileShapes {
		t.Run(shape.name, func(t *testing.T) {
			t.Parallel()
			manifestPath := filepath.Join(t.TempDir(), "mirror.hcl")
			addr := origin.Addr + fmt.Sprintf("/acme/shape%d/aws", i)
			if err := os.WriteFile(manifestPath, []byte("module \""+addr+"\" {\n  versions = [\"1.0.0\"]\n}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := syncProcess(t, bin, filepath.Join(t.TempDir(), "data"), origin, originCAFile(t, origin), manifestPath)
			if strings.Contains(stderr, "stack overflow") {
				t.Fatalf("sync crashed (exit %d)", code)
			}
			if code != 1 || !strings.Contains(stdout, "module "+addr+" 1.0.0: reading its configuration: ") ||
				!strings.Contains(stdout, "reading its configuration: main.tf:1") || !strings.Contains(stdout, shape.summary) {
				t.Errorf("exit %d, want 1 and the module refused (%s):\n%s%s", code, shape.summary, stdout, stderr)
			}
		})
	}
}
