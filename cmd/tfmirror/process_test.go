package main

// Helpers for tests that run the real tfmirror binary as a subprocess, as
// an operator would: killed, restarted, stopped with a signal.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// built is the tfmirror binary of this test run: compiled by the first
// test that asks for it, shared by the others, removed by TestMain.
var built struct {
	once sync.Once
	dir  string // temporary directory holding the binary
	path string
	err  error
}

// buildBinary returns the path of tfmirror compiled from this package's
// source. `go build` runs once per test run of the package, when the first
// test asks (tests that do not run the binary do not pay for it); every
// later call returns the same binary, which tests run but must not modify.
// Each run builds afresh (go's build cache makes that quick), so the
// binary is never older than the source under test.
//
// The binary is built as the release is (.goreleaser.yaml): static, with
// CGO_ENABLED=0 and -trimpath. Besides testing what operators run, this
// lets the deploy package's test build reuse every compiled package from
// the build cache: with other settings a cold cache compiles the whole
// dependency tree twice.
func buildBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "tfmirror-test-bin-")
		if built.err != nil {
			return
		}
		bin := filepath.Join(built.dir, "tfmirror")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		built.path = bin
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// removeBinary deletes the binary buildBinary made, if any; TestMain calls
// it once every test has finished.
func removeBinary() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// originCAFile writes the fake origin's CA so that a subprocess trusts it
// through SSL_CERT_FILE.
func originCAFile(t *testing.T, o *fakeorigin.Origin) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "origin-ca.pem")
	if err := os.WriteFile(path, o.CACertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// proc is a running `tfmirror serve` subprocess.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string // 127.0.0.1:port
	url    string // https://127.0.0.1:port/
	client *http.Client
	exited chan struct{}
	err    error // of Wait, once exited is closed

	mu      sync.Mutex
	lines   []map[string]any
	changed chan struct{} // closed and replaced when a log line arrives
}

// startProcess runs `tfmirror serve` on a random loopback port with the
// given data directory, allowing origin, plus extra flags, and waits until
// it serves.
func startProcess(t *testing.T, bin, dataDir string, origin *fakeorigin.Origin, caFile string, extra ...string) *proc {
	t.Helper()
	return startProcessEnv(t, bin, dataDir, origin, append(os.Environ(), "SSL_CERT_FILE="+caFile), extra...)
}

// startProcessEnv is startProcess with the process's whole environment
// env.
func startProcessEnv(t *testing.T, bin, dataDir string, origin *fakeorigin.Origin, env []string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"serve",
		"--listen", "127.0.0.1:0",
		"--data-dir", dataDir,
		"--allowed-origins", origin.Addr,
		"--allow-private-origins",
		"--log-format", "json",
	}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	return startCmd(t, cmd, dataDir)
}

// startCmd starts cmd, a `tfmirror serve` logging JSON on stderr with its
// data directory at dataDir, and waits until it serves.
func startCmd(t *testing.T, cmd *exec.Cmd, dataDir string) *proc {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, exited: make(chan struct{}), changed: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				line = map[string]any{"msg": sc.Text()}
			}
			p.mu.Lock()
			p.lines = append(p.lines, line)
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
	}()
	go func() {
		<-logDone
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			p.dumpLog()
		}
	})

	serving := p.waitLog("tfmirror is serving", 30*time.Second)
	p.addr, _ = serving["address"].(string)
	p.url = "https://" + p.addr + "/"
	if ca := filepath.Join(dataDir, "tls", "ca.pem"); fileExists(ca) {
		p.client = trustingClient(t, ca) // the generated CA; none with --tls-cert
	}
	return p
}

// waitLog waits for a log line with message msg and returns it. It waits
// a minute at least, whatever timeout says: the lines waited for come in
// milliseconds on an idle machine, and a two-core CI machine running every
// package's tests at once has stalled a process for tens of seconds; a line
// that never comes fails the test all the same.
func (p *proc) waitLog(msg string, timeout time.Duration) map[string]any {
	p.t.Helper()
	timeout = max(timeout, time.Minute)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := 0
	for {
		p.mu.Lock()
		lines, changed := p.lines, p.changed
		p.mu.Unlock()
		for ; seen < len(lines); seen++ {
			if lines[seen]["msg"] == msg {
				return lines[seen]
			}
		}
		select {
		case <-changed:
		case <-p.exited:
			p.mu.Lock()
			n := len(p.lines)
			p.mu.Unlock()
			if n == seen {
				p.t.Fatalf("tfmirror exited (%v) without logging %q", p.err, msg)
			}
		case <-deadline.C:
			p.t.Fatalf("tfmirror did not log %q within %s", msg, timeout)
		}
	}
}

// logged returns the first log line with message msg, or nil.
func (p *proc) logged(msg string) map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if l["msg"] == msg {
			return l
		}
	}
	return nil
}

func (p *proc) dumpLog() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		b, _ := json.Marshal(l)
		p.t.Logf("tfmirror: %s", b)
	}
}

// wait waits for the process to exit and returns Wait's error. Like
// waitLog it waits a minute at least, whatever timeout says: an exit
// after a signal takes milliseconds on an idle machine, and a test that
// bounds how long it took measures that itself.
func (p *proc) wait(timeout time.Duration) error {
	p.t.Helper()
	timeout = max(timeout, time.Minute)
	select {
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		p.t.Fatalf("tfmirror did not exit within %s", timeout)
		return nil
	}
}

// get fetches path (relative to the mirror's root) and reads the body.
func (p *proc) get(ctx context.Context, path string) ([]byte, *http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+strings.TrimPrefix(path, "/"), nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return body, resp, err
}

// status returns the mirror's status document.
func (p *proc) status(t *testing.T) mirrorStatus {
	t.Helper()
	body, _, err := p.get(context.Background(), "/?format=json")
	if err != nil {
		t.Fatal(err)
	}
	var st mirrorStatus
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("status JSON: %v", err)
	}
	return st
}

type mirrorStatus struct {
	Archives int `json:"cached_archives"`
	Health   struct {
		DamagedArchives  *int   `json:"damaged_archives"`
		SharedStore      string `json:"shared_store"`
		SharedStoreError string `json:"shared_store_error"`
	} `json:"health"`
	Retention struct {
		PinsError string `json:"pins_error"`
	} `json:"retention"`
	SharedStore *struct {
		Location string `json:"location"`
		Endpoint string `json:"endpoint"`
		StoreID  string `json:"store_id"`
	} `json:"shared_store"`
	Providers []struct {
		Versions []struct {
			Platforms []struct {
				Platform string `json:"platform"`
				Cached   bool   `json:"cached"`
			} `json:"platforms"`
		} `json:"versions"`
	} `json:"providers"`
}

// cachedPlatforms lists the platforms whose archive the status reports cached.
func (st mirrorStatus) cachedPlatforms() []string {
	var out []string
	for _, p := range st.Providers {
		for _, v := range p.Versions {
			for _, pl := range v.Platforms {
				if pl.Cached {
					out = append(out, pl.Platform)
				}
			}
		}
	}
	return out
}

// providerArchivePath is the mirror path of an archive of origin's provider.
func providerArchivePath(origin *fakeorigin.Origin, ns, typ, version, platform string) string {
	return fmt.Sprintf("/%s/%s/%s/terraform-provider-%s_%s_%s.zip", origin.Addr, ns, typ, typ, version, platform)
}

// count is how many log lines have message msg.
func (p *proc) count(msg string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if l["msg"] == msg {
			n++
		}
	}
	return n
}
