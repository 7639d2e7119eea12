package releases_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/releases"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// stallKeyIDSig is an origin client whose key-ID-named signatures
// (.KEYID.sig) answer only once the fetch's time is up.
type stallKeyIDSig struct {
	releases.Origin
	keyID string
}

func (s stallKeyIDSig) FetchFile(ctx context.Context, p addrs.Provider, raw string, limit int64) ([]byte, error) {
	if strings.HasSuffix(raw, "."+s.keyID+".sig") {
		<-ctx.Done()
	}
	return s.Origin.FetchFile(ctx, p, raw, limit)
}

// A .sig made by a key not in force, whose .KEYID.sig the origin does
// not send in time, is not refused: the signature in force was never
// read, so nothing was found not to verify. The fetch fails as a slow
// origin's does, and is not counted or logged as a refused signature
// (which tells the operator that HashiCorp's release is not genuine).
func TestKeyIDSignatureTimeoutNotARefusal(t *testing.T) {
	o := startOrigin(t)
	o.SignPlainWithOtherKey("terraform_1.6.0_SHA256SUMS")
	metrics := &countingMetrics{served: map[string]int{}, refused: map[string]int{}}
	store := enginetest.OpenStore(t, "", cache.Options{})
	client, host := enginetest.ReleasesClient(t, o)
	engine, err := mirror.New(mirror.Config{AllowedOrigins: []string{host}, Logger: enginetest.Logger(t)}, client, store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		engine.Shutdown(ctx) //nolint:errcheck
		store.Close()
	})
	rel, err := releases.New(releases.Config{
		HashiCorpURL: o.HashiCorpURL, HashiCorpKeys: []string{o.HashiCorpKey},
		OpenTofuDownloadURL: o.OpenTofuDownloadURL, OpenTofuAPIURL: o.OpenTofuAPIURL, OpenTofuKeys: []string{o.OpenTofuKey},
		Logger: enginetest.Logger(t), Metrics: metrics, OriginTimeout: 300 * time.Millisecond,
	}, stallKeyIDSig{Origin: client, keyID: o.HashiCorpKeyID}, engine, store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rel.Close)
	if _, err := rel.Sums(context.Background(), releases.HashiCorp, "terraform", "1.6.0"); err == nil || errors.Is(err, verify.ErrIntegrity) {
		t.Fatalf("a signature in force not fetched in time: %v, want the fetch's error, not a refusal", err)
	}
	if n := metrics.refusals("hashicorp/terraform/signature"); n != 0 {
		t.Errorf("a signature not fetched in time counted as refused %d times", n)
	}
}
