package ocidoor

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// getDigest fetches a manifest or blob by digest and reports its status
// and the digest the mirror says it served.
func getDigest(t *testing.T, r *rig, kind, d string) (int, string) {
	t.Helper()
	resp := r.do(http.MethodGet, "/v2/providers/"+originHost+"/acme/net/"+kind+"/"+d)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK && sha256Digest(b) != d {
		t.Errorf("%s %s: the body's digest is %s", kind, d, sha256Digest(b))
	}
	return resp.StatusCode, resp.Header.Get("Docker-Content-Digest")
}

// Every digest handed out resolves after a restart, after the tag moved
// (--platforms changed), and sealed, from the cache alone; the same tag
// gives the same digest after a restart.
func TestDigestsSurviveRestartAndTagMoves(t *testing.T) {
	dir := t.TempDir()
	r := newRig(t, rigOptions{cacheDir: dir})
	r.origin.AddProvider("acme", "net", []string{"1.0.0"}, twoPlatforms)
	docs, zip := pullProvider(t, r, "acme", "net", "1.0.0", "linux_amd64", auth.EmptyCredential)
	blob := sha256Digest(zip)
	firstIndex := docs[0]

	// Restart: the same tag, the same digest.
	r.stop()
	r.start(rigOptions{cacheDir: dir})
	again, _ := pullProvider(t, r, "acme", "net", "1.0.0", "linux_amd64", auth.EmptyCredential)
	if again[0] != firstIndex || again[1] != docs[1] {
		t.Errorf("after a restart the tag gives %v, before %v", again, docs)
	}

	// The tag moves: only one platform served now.
	r.stop()
	r.start(rigOptions{cacheDir: dir, engine: mirror.Config{Platforms: []string{"linux_amd64"}}})
	moved, _ := pullProvider(t, r, "acme", "net", "1.0.0", "linux_amd64", auth.EmptyCredential)
	if moved[0] == firstIndex {
		t.Fatal("the index did not change with the platforms served")
	}
	docs = append(docs, moved[0])

	// Sealed, with the origin down: every digest seen still resolves.
	r.stop()
	r.origin.SetDown(http.StatusServiceUnavailable)
	r.start(rigOptions{cacheDir: dir, engine: mirror.Config{Offline: true}})
	for _, d := range docs {
		if status, got := getDigest(t, r, "manifests", d); status != http.StatusOK || got != d {
			t.Errorf("manifest %s after restarts: %d %s", d, status, got)
		}
	}
	if status, got := getDigest(t, r, "blobs", blob); status != http.StatusOK || got != blob {
		t.Errorf("blob %s sealed: %d %s", blob, status, got)
	}
	// And the tag resolves sealed too, to the index of the platforms
	// served (both, again), from the kept sizes.
	resp := r.do(http.MethodHead, "/v2/providers/"+originHost+"/acme/net/manifests/1.0.0")
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Docker-Content-Digest") != firstIndex {
		t.Errorf("tag sealed: %s %s, want %s", resp.Status, resp.Header.Get("Docker-Content-Digest"), firstIndex)
	}
}

// A cache written before the OCI front door existed (package records and
// archives, no OCI records) is served: the index is built from the
// records, sizes taken from cached archives or learned once, and sealed,
// a version whose sizes cannot be known is 503, not a wrong document.
func TestCacheWithoutOCIRecords(t *testing.T) {
	dir := t.TempDir()
	r := newRig(t, rigOptions{cacheDir: dir})
	r.origin.AddProvider("acme", "net", []string{"1.0.0", "1.1.0"}, twoPlatforms)
	// Fill the cache as the network mirror does: through the engine's
	// provider side only.
	ctx := context.Background()
	p, _ := addrs.ParseProvider(originHost + "/acme/net")
	for _, pl := range twoPlatforms {
		a, err := r.engine.OpenArchive(ctx, p, versions.MustParseVersion("1.0.0"), mustPlatform(t, pl))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, a)
		a.Close()
	}
	if _, err := r.engine.Package(ctx, p, versions.MustParseVersion("1.1.0"), nil); err != nil {
		t.Fatal(err)
	}
	r.waitIdle()

	// Sealed: 1.0.0's archives are cached, so their sizes are known.
	r.stop()
	r.origin.ResetHits()
	r.start(rigOptions{cacheDir: dir, engine: mirror.Config{Offline: true}})
	docs, _ := pullProvider(t, r, "acme", "net", "1.0.0", "darwin_arm64", auth.EmptyCredential)
	if len(docs) != 2 {
		t.Fatal(docs)
	}
	// 1.1.0 has records but no archive and no kept size.
	status, code := ociError(t, r.do(http.MethodGet, "/v2/providers/"+originHost+"/acme/net/manifests/1.1.0"))
	if status != http.StatusServiceUnavailable || code != "UNAVAILABLE" {
		t.Errorf("sealed, sizes unknown: %d %s", status, code)
	}
	// Sizes are asked through the engine's guarded origin: sealed, the
	// origin hears nothing.
	if got := r.origin.Hits("archive_size"); got != 0 {
		t.Errorf("sealed, the origin was asked for %d archive sizes", got)
	}
	// Online again: learned once.
	r.stop()
	r.origin.ResetHits()
	r.start(rigOptions{cacheDir: dir})
	pullProvider(t, r, "acme", "net", "1.1.0", "linux_amd64", auth.EmptyCredential)
	if got := r.origin.Hits("archive_size"); got != 2 {
		t.Errorf("%d first-byte requests, want one per platform", got)
	}
}

func mustPlatform(t *testing.T, s string) addrs.Platform {
	pl, err := addrs.ParsePlatform(s)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

func (r *rig) waitIdle() {
	ctx := context.Background()
	if err := mirror.WaitIdle(ctx, r.engine); err != nil {
		r.t.Fatal(err)
	}
}
