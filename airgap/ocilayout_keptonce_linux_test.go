package airgap

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"unsafe"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// opens counts the times a file is opened, as the kernel reports them
// (inotify), from its start to count.
type opens struct{ fd int }

func watchOpens(t *testing.T, path string) *opens {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	// Closes are watched too: the kernel merges an event into the one
	// before it when the two are alike and unread, so two opens in a row
	// with nothing between them would be reported as one.
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN|unix.IN_CLOSE_NOWRITE|unix.IN_CLOSE_WRITE); err != nil {
		t.Fatalf("inotify on %s: %v", path, err)
	}
	return &opens{fd: fd}
}

func (o *opens) count(t *testing.T) int {
	t.Helper()
	n := 0
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for range 1000 { // each read takes at least one event
		got, err := unix.Read(o.fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= got; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if ev.Mask&unix.IN_OPEN != 0 {
				n++
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
	t.Fatal("inotify reports without end")
	return n
}

// An OCI layout export that keeps a platform an earlier export wrote into
// a version's tag (here one it does not select) reads that platform's zip
// once, to find it of its digest, and does not read it again to write the
// layer it has just found there.
func TestExportOCILayoutReadsAKeptZipOnce(t *testing.T) {
	o := enginetest.StartOrigin(t, fakeorigin.Options{})
	o.AddProvider("acme", "net", []string{"1.0.0"}, []string{"linux_amd64", "darwin_arm64"})
	engine := newEngine(t, o)
	ctx := context.Background()
	p := addrs.Provider{Hostname: enginetest.OriginHost, Namespace: "acme", Type: "net"}
	cacheArchive(t, engine, p, "1.0.0", "linux_amd64")
	cacheArchive(t, engine, p, "1.0.0", "darwin_arm64")
	side, names := ociLayoutParts(t, engine)
	repo := names.Provider(p)
	out := filepath.Join(t.TempDir(), "layout")
	export := func(pl string) LayoutSummary {
		t.Helper()
		var reports []string
		sum, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{Platforms: []string{pl}}, out, func(s string) { reports = append(reports, s) })
		if err != nil || sum.Failed != 0 {
			t.Fatalf("export of %s: %+v, %v, %q", pl, sum, err, reports)
		}
		return sum
	}
	export("linux_amd64")
	var idx ocispec.Index
	if err := json.Unmarshal(layoutBlob(t, out, repo, layoutIndex(t, out, repo)["1.0.0"].Digest), &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("the index of the first export: %+v, %v", idx, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(layoutBlob(t, out, repo, idx.Manifests[0].Digest), &m); err != nil || len(m.Layers) != 1 {
		t.Fatalf("linux_amd64's manifest: %+v, %v", m, err)
	}
	zip := filepath.Join(out, filepath.FromSlash(repo), "blobs", "sha256", m.Layers[0].Digest.Encoded())
	w := watchOpens(t, zip)

	sum := export("darwin_arm64")
	if n := w.count(t); n != 1 {
		t.Errorf("the export of darwin_arm64 opened linux_amd64's zip, which it keeps in the tag, %d times; want once", n)
	}
	if sum.PackagesPresent != 1 || sum.Packages != 1 {
		t.Errorf("the export of darwin_arm64: %+v, want linux_amd64's zip present and darwin_arm64's written", sum)
	}
	if err := json.Unmarshal(layoutBlob(t, out, repo, layoutIndex(t, out, repo)["1.0.0"].Digest), &idx); err != nil || len(idx.Manifests) != 2 {
		t.Errorf("the tag after the second export: %+v, %v; want both platforms", idx, err)
	}
}
