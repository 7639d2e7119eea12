package releases_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// heldOrigin holds every document fetch until its context is done and
// then until proceed is closed: a fetch whose last steps (a read that
// completed as the cancel came, its check, its record) are still under
// way when Close cancels it.
type heldOrigin struct {
	entered  chan struct{}
	proceed  chan struct{}
	returned atomic.Bool
}

func (o *heldOrigin) FetchFile(ctx context.Context, _ addrs.Provider, _ string, _ int64) ([]byte, error) {
	select {
	case o.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	<-o.proceed
	o.returned.Store(true)
	return nil, ctx.Err()
}

func (o *heldOrigin) OpenArchive(context.Context, addrs.Provider, string) (io.ReadCloser, int64, error) {
	return nil, 0, errors.New("no archives here")
}

// Close ends the origin fetches under way, which run apart from their
// callers, and returns once they have ended: the cache closed after it
// (the mirror's shutdown) is not written to by a fetch still running.
func TestCloseWaitsForFetchesUnderWay(t *testing.T) {
	base := newRig(t, startOrigin(t), "", false)
	o := &heldOrigin{entered: make(chan struct{}, 1), proceed: make(chan struct{})}
	rel, err := releases.New(releases.Config{
		HashiCorpURL: base.origin.HashiCorpURL, HashiCorpKeys: []string{base.origin.HashiCorpKey},
		OpenTofuDownloadURL: base.origin.OpenTofuDownloadURL, OpenTofuAPIURL: base.origin.OpenTofuAPIURL, OpenTofuKeys: []string{base.origin.OpenTofuKey},
		Logger: enginetest.Logger(t),
	}, o, base.engine, base.store)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	asked := make(chan error, 1)
	go func() {
		_, err := rel.Sums(ctx, releases.HashiCorp, "terraform", "1.6.0")
		asked <- err
	}()
	<-o.entered
	cancel() // the caller leaves; the fetch goes on
	<-asked

	closed := make(chan struct{})
	go func() { rel.Close(); close(closed) }()
	select {
	case <-closed:
		t.Error("Close returned while a fetch it cancelled was still under way")
	case <-time.After(100 * time.Millisecond):
	}
	close(o.proceed)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10s of the fetch ending")
	}
	if !o.returned.Load() {
		t.Error("Close returned before the fetch under way")
	}
}

// With a full disk (every cache write fails) the CLI releases are served
// all the same, verified: the version list, the SHA256SUMS and an
// archive, which is streamed and not kept; nothing half-written is left
// in the cache. Once there is room the archive is cached.
func TestFullDiskStillServes(t *testing.T) {
	var full atomic.Bool
	full.Store(true)
	o := startOrigin(t)
	r := newRigStore(t, o, "", false, cache.Options{FailWrites: func() error {
		if full.Load() {
			return errors.New("write /data/cache/000001.vlog: no space left on device")
		}
		return nil
	}})
	ctx := context.Background()
	if _, _, err := r.rel.Versions(ctx, releases.HashiCorp, "terraform"); err != nil {
		t.Fatalf("version list with a full disk: %v", err)
	}
	sums, err := r.rel.Document(ctx, releases.HashiCorp, "terraform", "1.6.0", releases.SumsName(releases.HashiCorp, "terraform", "1.6.0"))
	if err != nil || !bytes.Equal(sums, o.Sums("hashicorp", "terraform", "1.6.0")) {
		t.Fatalf("SHA256SUMS with a full disk: %v", err)
	}
	want := fakeorigin.ReleaseArchive("terraform", "1.6.0", "linux_amd64")
	data, _, err := r.read(releases.HashiCorp, "terraform", "1.6.0", tfZip)
	if err != nil || !bytes.Equal(data, want) {
		t.Fatalf("archive with a full disk: %v, %d bytes (want %d correct ones)", err, len(data), len(want))
	}
	r.waitIdle()
	if n, err := cachetest.ChunkCount(r.store); n != 0 || err != nil {
		t.Errorf("ChunkCount = %d, %v after the archive could not be stored; want nothing left behind", n, err)
	}
	sha := fakeorigin.ArchiveSHA256("terraform", "1.6.0", "linux_amd64")
	if _, err := r.store.StatBlob(sha); !errors.Is(err, cache.ErrNotFound) {
		t.Errorf("archive cached although the disk was full: %v", err)
	}

	full.Store(false)
	if data, _, err = r.read(releases.HashiCorp, "terraform", "1.6.0", tfZip); err != nil || !bytes.Equal(data, want) {
		t.Fatalf("archive once there is room: %v", err)
	}
	r.waitIdle()
	if _, err := r.store.StatBlob(sha); err != nil {
		t.Errorf("archive not cached once there is room: %v", err)
	}
	if data, src, err := r.read(releases.HashiCorp, "terraform", "1.6.0", tfZip); err != nil || !bytes.Equal(data, want) || src != records.Hit {
		t.Errorf("archive read again: %v, source %v, correct %v", err, src, bytes.Equal(data, want))
	}
}
