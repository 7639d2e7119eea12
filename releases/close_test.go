package releases_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
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

func (o *heldOrigin) FetchDocument(ctx context.Context, _ addrs.Provider, _ string, _ int64) ([]byte, error) {
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
