package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// outcome is what one client of a mirror that shut down under it got.
type outcome struct {
	status int
	length int64 // Content-Length, -1 when not stated
	body   []byte
	err    error // the request's or the body's
}

// slowGet requests path and reads the answer 64 KiB at a time, pausing
// between reads.
func slowGet(client *http.Client, url string, pause time.Duration) outcome {
	resp, err := client.Get(url)
	if err != nil {
		return outcome{err: err}
	}
	defer resp.Body.Close()
	o := outcome{status: resp.StatusCode, length: resp.ContentLength}
	var body bytes.Buffer
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		body.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			o.err = err
			break
		}
		time.Sleep(pause)
	}
	o.body = body.Bytes()
	return o
}

// TestShutdownUnderLoadThenRestart stops a mirror with SIGTERM while 50
// clients download one archive that is not cached (one download from the
// origin, held half way) and 10 clients read a cached archive slowly,
// with a shutdown deadline none of them can meet: no client holds an
// answer it could take as whole and is not (a 200 read to its end is the
// archive, byte for byte); the mirror exits 0; and started again on the
// same data directory, its cache checks out (tfmirror cache verify) and
// it serves both archives whole.
func TestShutdownUnderLoadThenRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const ns, typ, pl, size = "hashicorp", "random", "linux_amd64", 4 << 20
	const cold, warm = "1.0.0", "2.0.0"
	bin := buildBinary(t)
	origin, err := fakeorigin.Start(fakeorigin.Options{ArchiveSize: size})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	origin.AddProvider(ns, typ, []string{cold, warm}, []string{pl})
	dataDir := filepath.Join(t.TempDir(), "data")
	ca := originCAFile(t, origin)
	m := startProcess(t, bin, dataDir, origin, ca, "--shutdown-timeout", "2s")
	coldPath, warmPath := providerArchivePath(origin, ns, typ, cold, pl), providerArchivePath(origin, ns, typ, warm, pl)
	if _, _, err := m.get(t.Context(), warmPath); err != nil {
		t.Fatal(err)
	}
	release := origin.GateArchives()
	t.Cleanup(release)

	client := &http.Client{Transport: m.client.Transport.(*http.Transport).Clone()}
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = 100
	var wg sync.WaitGroup
	var mu sync.Mutex
	var outcomes []outcome
	run := func(path string, pause time.Duration) {
		wg.Go(func() {
			o := slowGet(client, m.url+path[1:], pause)
			mu.Lock()
			outcomes = append(outcomes, o)
			mu.Unlock()
		})
	}
	for range 50 {
		run(coldPath, 0)
	}
	for range 10 {
		run(warmPath, 200*time.Millisecond)
	}
	origin.WaitArchiveStarted()
	time.Sleep(500 * time.Millisecond) // the clients joined the download, the slow readers began
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := m.wait(time.Minute); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	wg.Wait()
	want := map[string][]byte{coldPath: origin.Archive(ns, typ, cold, pl), warmPath: origin.Archive(ns, typ, warm, pl)}
	whole := 0
	for i, o := range outcomes {
		if o.err != nil {
			continue // the client knows it has no archive
		}
		if o.status != http.StatusOK {
			t.Errorf("client %d: %d with no error", i, o.status)
			continue
		}
		if !bytes.Equal(o.body, want[coldPath]) && !bytes.Equal(o.body, want[warmPath]) {
			t.Errorf("client %d: a 200 read to its end without error holds %d bytes that are no archive (Content-Length %d)", i, len(o.body), o.length)
		}
		whole++
	}
	t.Logf("%d of %d clients got a whole archive", whole, len(outcomes))
	if m.logged("stopped") == nil {
		t.Error(`no "stopped" log line`)
	}

	// Started again on the same data directory.
	out, stderr, code := verifyInProcess(t, dataDir)
	if code != 0 {
		t.Errorf("cache verify after the shutdown: exit %d\n%s%s", code, out, stderr)
	}
	release()
	m2 := startProcess(t, bin, dataDir, origin, ca)
	for path, body := range want {
		got, resp, err := m2.get(context.Background(), path)
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("%s after the restart: %v, %d bytes (want %d)", path, err, len(got), len(body))
		} else if resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
			t.Errorf("%s after the restart: Content-Length %q", path, resp.Header.Get("Content-Length"))
		}
	}
}
