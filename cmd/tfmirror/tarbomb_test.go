//go:build linux

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
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

// scratchPrefix is how an import names the directory it unpacks a tar
// file into, in the data directory (airgap's scratchPrefix).
const scratchPrefix = ".tfmirror-import-"

// tarBomb writes a gzip-compressed tar file of files files of size bytes
// of zeros each (size a multiple of 1 MiB) and returns its path. The
// zeros are one compressed MiB repeated as gzip members, so that making a
// bomb of GiBs costs milliseconds.
func tarBomb(t *testing.T, files int, size int64) string {
	t.Helper()
	member := func(data []byte) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		zw.Write(data)
		zw.Close()
		return buf.Bytes()
	}
	mib := member(make([]byte, 1<<20))
	path := filepath.Join(t.TempDir(), "bomb.tar.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range files {
		var hdr bytes.Buffer
		tw := tar.NewWriter(&hdr)
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("registry.test/acme/bomb/zero-%d.bin", i), Typeflag: tar.TypeReg,
			Mode: 0o644, Size: size}); err != nil {
			t.Fatal(err)
		}
		tw.Flush()
		if _, err := f.Write(member(hdr.Bytes())); err != nil {
			t.Fatal(err)
		}
		for range size >> 20 {
			if _, err := f.Write(mib); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := f.Write(member(make([]byte, 1024))); err != nil { // the end of the archive
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// scratchDirs lists the import scratch directories in dir.
func scratchDirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), scratchPrefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// usedBytes is the space in use on the file system of dir.
func usedBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize
}

// TestTarBombImportThroughServe is the tar bomb of #19: a small .tar.gz
// holding four 900 MiB files of zeros, imported through a running serve
// whose data directory is on a 1 GiB file system while a cold 64 MiB
// download is being cached. The import is refused before it takes the
// disk, the serve stays up, the download is served and cached, and
// nothing of the import is left on the file system. Once by default;
// TFMIRROR_HEAVY_TESTS=1 runs it 20 times. Needs root (CAP_SYS_ADMIN) to
// mount the file system; skips otherwise.
func TestTarBombImportThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const (
		ns, typ, version, platform = "hashicorp", "big", "1.0.0", "linux_amd64"
		archiveSize                = 64 << 20
	)
	runs := 1
	if os.Getenv("TFMIRROR_HEAVY_TESTS") == "1" {
		runs = 20
	}
	mnt := mountSmallFS(t, "1g")
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{ArchiveSize: archiveSize})
	origin.AddProvider(ns, typ, []string{version}, []string{platform})
	want := origin.Archive(ns, typ, version, platform)
	caFile := originCAFile(t, origin)
	bomb := tarBomb(t, 4, 900<<20)
	if info, err := os.Stat(bomb); err == nil {
		t.Logf("the bomb: %s, %d bytes, 3600 MiB unpacked", bomb, info.Size())
	}
	work := t.TempDir()

	for run := range runs {
		dataDir := filepath.Join(mnt, fmt.Sprintf("run-%d", run))
		m := startProcess(t, bin, dataDir, origin, caFile)
		m.waitLog("admin API listening", 10*time.Second)

		// A cold download, held by the origin halfway.
		release := origin.GateArchives()
		type result struct {
			body []byte
			err  error
		}
		got := make(chan result, 1)
		go func() {
			body, _, err := m.get(context.Background(), providerArchivePath(origin, ns, typ, version, platform))
			got <- result{body, err}
		}()
		select {
		case <-origin.ArchiveStarted():
		case <-time.After(30 * time.Second):
			release()
			t.Fatalf("run %d: the download did not start", run)
		}
		before, err := os.ReadDir(dataDir)
		if err != nil {
			t.Fatal(err)
		}

		_, stderr, code := runProcess(t, bin, work, "import", "--data-dir", dataDir, bomb)
		release()
		if code != 1 || !strings.Contains(stderr, "working through the running tfmirror's admin socket") ||
			!strings.Contains(stderr, `refused: entry "registry.test/acme/bomb/zero-0.bin" (900 MiB): not enough disk space`) ||
			!strings.Contains(stderr, "above the cache's disk reserve") {
			t.Errorf("run %d: import of the bomb through the serve: exit %d, want 1 and refused for the disk reserve at its first file", run, code)
		}
		select {
		case <-m.exited:
			t.Fatalf("run %d: the serve died during the import: %v", run, m.err)
		default:
		}

		r := <-got
		if r.err != nil || !bytes.Equal(r.body, want) {
			t.Fatalf("run %d: the download during the import: %v, %d bytes, want the archive's %d", run, r.err, len(r.body), len(want))
		}
		waitCached(t, m, 1)
		body, resp, err := m.get(context.Background(), providerArchivePath(origin, ns, typ, version, platform))
		if err != nil || !bytes.Equal(body, want) || resp.Header.Get("X-Tfmirror-Cache") != "hit" {
			t.Errorf("run %d: the archive is not served from the cache after the import: %v", run, err)
		}

		after, err := os.ReadDir(dataDir)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before) || len(scratchDirs(t, dataDir)) > 0 {
			t.Errorf("run %d: the data directory held %v before the import, %v after", run, names(before), names(after))
		}
		// The cache holds one 64 MiB archive; any file of the bomb would
		// be 900 MiB.
		if used := usedBytes(t, mnt); used > 400<<20 {
			t.Errorf("run %d: %d MiB in use on the file system after the import", run, used>>20)
		}

		if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := m.wait(30 * time.Second); err != nil {
			t.Fatalf("run %d: tfmirror exited with %v after SIGTERM", run, err)
		}
		if err := os.RemoveAll(dataDir); err != nil {
			t.Fatal(err)
		}
	}
}

func names(entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// A serve killed while an import unpacks a tar file leaves the unpacked
// part in the data directory; the next serve on it removes it at start.
// The import reads a FIFO, so that it is certainly under way when the
// serve is killed.
func TestServeRemovesWhatAKilledImportLeft(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	caFile := originCAFile(t, origin)
	dataDir := filepath.Join(t.TempDir(), "data")
	m := startProcess(t, bin, dataDir, origin, caFile)
	m.waitLog("admin API listening", 10*time.Second)

	fifo := filepath.Join(t.TempDir(), "bundle.tar")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	imp := exec.CommandContext(ctx, bin, "import", "--data-dir", dataDir, fifo)
	var out bytes.Buffer
	imp.Stdout, imp.Stderr = &out, &out
	if err := imp.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- imp.Wait() }()

	// The serve opens the FIFO (having made its scratch directory), and
	// once it has taken more than the pipe holds, it is unpacking.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Name: "registry.test/acme/alpha/terraform-provider-alpha_1.0.0_linux_amd64.zip",
		Typeflag: tar.TypeReg, Mode: 0o644, Size: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	left := scratchDirs(t, dataDir)
	if len(left) != 1 {
		t.Fatalf("scratch directories while the import unpacks: %v, want one", left)
	}

	if err := m.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-m.exited
	w.Close()
	if err := <-done; err == nil {
		t.Errorf("the import succeeded though its serve was killed:\n%s", out.String())
	}
	if got := scratchDirs(t, dataDir); len(got) != 1 {
		t.Fatalf("scratch directories after the serve was killed: %v, want the one it left", got)
	}

	m2 := startProcess(t, bin, dataDir, origin, caFile)
	line := m2.logged("removed what an interrupted import left unpacked")
	if line == nil || line["path"] != filepath.Join(dataDir, left[0]) {
		t.Errorf("the restarted serve logged %v, want the removal of %s", line, left[0])
	}
	if got := scratchDirs(t, dataDir); len(got) != 0 {
		t.Errorf("scratch directories after the restart: %v, want none", got)
	}
}
