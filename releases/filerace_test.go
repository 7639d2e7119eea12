package releases_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/heldpoint"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// heldMissStore is the cache, except that the first read after Arm of a
// key ending in suffix that finds nothing waits (heldpoint), having
// said so on Reached, until GoOn: a caller held between finding a file
// not kept and asking the origin for it.
type heldMissStore struct {
	releases.Store
	suffix string

	heldpoint.Point
}

func (s *heldMissStore) GetMeta(key string, v any) (time.Time, error) {
	at, err := s.Store.GetMeta(key, v)
	if !strings.HasSuffix(key, s.suffix) || !errors.Is(err, cache.ErrNotFound) {
		return at, err
	}
	s.Pass()
	return at, err
}

// A caller that found a release's cosign signature not kept, and asks the
// origin for it once another caller's fetch of it has ended, is answered
// with the file that fetch kept: the origin is not asked again (the
// fetch keeps the file before it ends, and looks in the cache before it
// asks).
func TestFileFetchedJustBeforeIsNotFetchedAgain(t *testing.T) {
	o := startOrigin(t)
	const sig = "tofu_1.8.0_SHA256SUMS.sig"
	const sigPath = "/tofu/download/v1.8.0/" + sig
	r := newRig(t, o, "", false)
	store := &heldMissStore{Store: r.store, suffix: "/" + sig}
	rel, err := releases.New(releases.Config{
		HashiCorpURL: o.HashiCorpURL, HashiCorpKeys: []string{o.HashiCorpKey},
		OpenTofuDownloadURL: o.OpenTofuDownloadURL, OpenTofuAPIURL: o.OpenTofuAPIURL, OpenTofuKeys: []string{o.OpenTofuKey},
		Logger: enginetest.Logger(t), Metrics: r.metrics, Now: r.clock.Now,
	}, r.client, r.engine, store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rel.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	doc := func() ([]byte, error) { return rel.Document(ctx, releases.OpenTofu, "tofu", "1.8.0", sig) }

	store.Arm()
	type answer struct {
		data []byte
		err  error
	}
	held := make(chan answer, 1)
	go func() {
		data, err := doc()
		held <- answer{data, err}
	}()
	<-store.Reached() // the held caller found the file not kept
	if data, err := doc(); err != nil || !bytes.Equal(data, o.CosignFile("tofu", "1.8.0", sig)) {
		t.Fatalf("the caller that fetched %s: %q, %v", sig, data, err)
	}
	store.GoOn()
	if a := <-held; a.err != nil || !bytes.Equal(a.data, o.CosignFile("tofu", "1.8.0", sig)) {
		t.Fatalf("the held caller: %q, %v", a.data, a.err)
	}
	if n := o.Hits(sigPath); n != 1 {
		t.Errorf("%d origin requests for %s, want 1", n, sig)
	}
}
