package ocidoor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// pulled is what a pull of one platform of a version got.
type pulled struct {
	index, manifest string // digests
	layer           ocispec.Descriptor
}

// tryPull pulls the platform's zip of a version as pullProvider does
// (every fetch checked by oras-go against its descriptor's digest and
// size), returning the first failure instead of ending the test.
func tryPull(r *rig, ns, typ, version, platform string) (pulled, error) {
	ctx := context.Background()
	repo := r.repo(ns, typ, auth.EmptyCredential)
	tag, _ := oci.Tag(version)
	desc, err := repo.Resolve(ctx, tag)
	if err != nil {
		return pulled{}, fmt.Errorf("resolve: %w", err)
	}
	b, err := content.FetchAll(ctx, repo, desc)
	if err != nil {
		return pulled{}, fmt.Errorf("index: %w", err)
	}
	var index ocispec.Index
	if err := json.Unmarshal(b, &index); err != nil {
		return pulled{}, err
	}
	out := pulled{index: desc.Digest.String()}
	for _, m := range index.Manifests {
		if m.Platform == nil || m.Platform.OS+"_"+m.Platform.Architecture != platform {
			continue
		}
		out.manifest = m.Digest.String()
		mb, err := content.FetchAll(ctx, repo, m)
		if err != nil {
			return out, fmt.Errorf("manifest: %w", err)
		}
		var man ocispec.Manifest
		if err := json.Unmarshal(mb, &man); err != nil || len(man.Layers) != 1 {
			return out, fmt.Errorf("manifest %s: %v", mb, err)
		}
		out.layer = man.Layers[0]
		zip, err := content.FetchAll(ctx, repo.Blobs(), out.layer)
		if err != nil {
			return out, fmt.Errorf("blob: %w", err)
		}
		if !bytes.Equal(zip, r.origin.Archive(ns, typ, version, platform)) {
			return out, errors.New("the blob is not the origin's zip")
		}
		return out, nil
	}
	return out, fmt.Errorf("the index has no %s", platform)
}

// wantManifest is the digest of the platform manifest of a version
// built over its archive's true size, as package oci builds it.
func wantManifest(t *testing.T, r *rig, ns, typ, version, platform string) string {
	t.Helper()
	zip := r.origin.Archive(ns, typ, version, platform)
	m, err := oci.ProviderTargetManifest(oci.Layer{SHA256: r.origin.SHA256(ns, typ, version, platform), Size: int64(len(zip)), Title: addrs.ArchiveName(typ, version, platform)})
	if err != nil {
		t.Fatal(err)
	}
	return m.Digest.String()
}

// sizeCases are the two ways an origin states an archive's size without
// a download: OpenTofu's package_size, or the total of the Content-Range
// of a first-byte request.
var sizeCases = []struct {
	name          string
	packageHashes bool
}{
	{"package_size", true},
	{"Content-Range", false},
}

// An origin states a wrong size for one platform's archive of a
// version: the index first handed out names a manifest made with that
// size, which no client could pull. A platform's manifest is answered
// only once its archive is verified, so the first pull fails at the
// manifest, before any blob, with MANIFEST_UNKNOWN (410 Gone, whose
// message oras-go reports, where it reports a 404 as "not found" alone)
// saying both sizes and to pull the tag again; the documents are dropped before that answer
// and built again from the verified size, so that the very next pull
// succeeds. A pull downloads the archive of its platform only, once; a
// version whose sizes were right keeps its digests.
func TestWrongStatedSizeRepaired(t *testing.T) {
	for _, tc := range sizeCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := rigOptions{origin: fakeorigin.Options{PackageHashes: tc.packageHashes}, cacheDir: dir}
			r := newRig(t, opts)
			r.origin.AddProvider("acme", "net", []string{"1.0.0", "2.0.0"}, twoPlatforms)
			good, err := tryPull(r, "acme", "net", "2.0.0", "linux_amd64")
			if err != nil {
				t.Fatalf("the version with right sizes: %v", err)
			}
			if want := wantManifest(t, r, "acme", "net", "2.0.0", "linux_amd64"); good.manifest != want {
				t.Fatalf("manifest %s, want %s", good.manifest, want)
			}
			if n, m := r.origin.ArchiveHits("acme", "net", "2.0.0", "linux_amd64"), r.origin.ArchiveHits("acme", "net", "2.0.0", "darwin_arm64"); n != 1 || m != 0 {
				t.Errorf("a pull of linux_amd64 downloaded its archive %d times and darwin_arm64's %d times, want 1 and 0", n, m)
			}

			trueSize := int64(len(r.origin.Archive("acme", "net", "1.0.0", "linux_amd64")))
			r.origin.SetStatedSize("acme", "net", "1.0.0", "linux_amd64", trueSize+7)
			first, err := tryPull(r, "acme", "net", "1.0.0", "linux_amd64")
			if err == nil {
				t.Fatal("a pull of documents made over a wrong stated size succeeded")
			}
			t.Logf("the first pull: %v", err)
			var answer *errcode.ErrorResponse
			if !errors.As(err, &answer) || answer.StatusCode != http.StatusGone || len(answer.Errors) != 1 || answer.Errors[0].Code != "MANIFEST_UNKNOWN" {
				t.Fatalf("the first pull failed with %v, want 410 MANIFEST_UNKNOWN for the manifest", err)
			}
			if msg := answer.Errors[0].Message; !strings.Contains(msg, fmt.Sprintf("%d bytes", trueSize+7)) || !strings.Contains(msg, fmt.Sprintf("%d", trueSize)) || !strings.Contains(msg, "pull the tag again") {
				t.Errorf("the manifest's error says %q, want both sizes and what to do", msg)
			}
			if first.manifest == "" || first.manifest == wantManifest(t, r, "acme", "net", "1.0.0", "linux_amd64") {
				t.Fatalf("the first index named manifest %q, want one made with the stated size", first.manifest)
			}

			// At once: no wait for anything the first pull started.
			again, err := tryPull(r, "acme", "net", "1.0.0", "linux_amd64")
			if err != nil {
				t.Fatalf("a pull after the archive was verified: %v", err)
			}
			if again.layer.Size != trueSize || again.manifest != wantManifest(t, r, "acme", "net", "1.0.0", "linux_amd64") {
				t.Errorf("repaired manifest %s with a layer of %d bytes, want %d", again.manifest, again.layer.Size, trueSize)
			}
			if n := r.origin.ArchiveHits("acme", "net", "1.0.0", "linux_amd64"); n != 1 {
				t.Errorf("%d downloads of the archive, want 1", n)
			}
			if again.index == first.index {
				t.Error("the index of the repaired version kept its digest")
			}
			// The documents made over the wrong size are not served any
			// more, by digest either.
			for _, d := range []string{first.index, first.manifest} {
				if status, code := ociError(t, r.do(http.MethodGet, "/v2/providers/"+originHost+"/acme/net/manifests/"+d)); status != http.StatusNotFound || code != "MANIFEST_UNKNOWN" {
					t.Errorf("the wrong document %s: %d %s", d, status, code)
				}
			}
			// The version whose sizes were right keeps its digests, here
			// and after a restart; so does the repaired one.
			for i := 0; i < 2; i++ {
				if got, err := tryPull(r, "acme", "net", "2.0.0", "linux_amd64"); err != nil || got.index != good.index || got.manifest != good.manifest {
					t.Errorf("the right version after the repair (restarts %d): %+v, %v; before %+v", i, got, err, good)
				}
				if got, err := tryPull(r, "acme", "net", "1.0.0", "linux_amd64"); err != nil || got.index != again.index || got.manifest != again.manifest {
					t.Errorf("the repaired version (restarts %d): %+v, %v; before %+v", i, got, err, again)
				}
				r.stop()
				r.start(opts)
			}
		})
	}
}

// A platform's manifest waits for its archive no longer than
// mirror.Config.OCIArchiveWait: past it, the manifest is answered as it
// was made (with the size the origin stated), and the download goes on
// for the blob request that follows. Once it is verified, the next pull
// succeeds.
func TestManifestWaitsForItsArchiveBounded(t *testing.T) {
	const ns, typ, version, platform = "acme", "net", "1.0.0", "linux_amd64"
	const wait = 200 * time.Millisecond
	r := newRig(t, rigOptions{origin: fakeorigin.Options{PackageHashes: true}, engine: mirror.Config{OCIArchiveWait: wait}})
	r.origin.AddProvider(ns, typ, []string{version}, twoPlatforms)
	trueSize := int64(len(r.origin.Archive(ns, typ, version, platform)))
	r.origin.SetStatedSize(ns, typ, version, platform, trueSize+3)
	release := r.origin.GateArchives()
	released := false
	defer func() {
		if !released {
			release()
		}
	}()

	ctx := context.Background()
	repo := r.repo(ns, typ, auth.EmptyCredential)
	tag, _ := oci.Tag(version)
	desc, err := repo.Resolve(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	b, err := content.FetchAll(ctx, repo, desc)
	if err != nil {
		t.Fatal(err)
	}
	var index ocispec.Index
	if err := json.Unmarshal(b, &index); err != nil {
		t.Fatal(err)
	}
	var man ocispec.Manifest
	for _, m := range index.Manifests {
		if m.Platform.OS+"_"+m.Platform.Architecture != platform {
			continue
		}
		start := time.Now()
		mb, err := content.FetchAll(ctx, repo, m)
		if err != nil {
			t.Fatalf("the manifest, its archive held at the origin: %v", err)
		}
		if took := time.Since(start); took < wait {
			t.Errorf("the manifest was answered after %v, before its archive or the wait of %v", took, wait)
		}
		if err := json.Unmarshal(mb, &man); err != nil || len(man.Layers) != 1 {
			t.Fatalf("manifest %s: %v", mb, err)
		}
	}
	if len(man.Layers) != 1 || man.Layers[0].Size != trueSize+3 {
		t.Fatalf("the manifest answered past the wait: %+v, want the layer as stated, %d bytes", man, trueSize+3)
	}
	// The download the manifest started is still held at the origin.
	gated, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.origin.WaitGated(gated, 1); err != nil {
		t.Fatalf("no download of the archive under way: %v", err)
	}
	release()
	released = true
	r.waitIdle()
	if got, err := tryPull(r, ns, typ, version, platform); err != nil || got.layer.Size != trueSize {
		t.Errorf("a pull once the archive was verified: %+v, %v", got, err)
	}
}

// An archive the mirror holds verified (fetched for another door while
// the origin stated a wrong size) is sized by what it holds, not by what
// the origin states: the first documents handed out are right.
func TestVerifiedSizeWinsOverStated(t *testing.T) {
	for _, tc := range sizeCases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigOptions{origin: fakeorigin.Options{PackageHashes: tc.packageHashes}})
			r.origin.AddProvider("acme", "net", []string{"1.0.0"}, twoPlatforms)
			trueSize := int64(len(r.origin.Archive("acme", "net", "1.0.0", "linux_amd64")))
			r.origin.SetStatedSize("acme", "net", "1.0.0", "linux_amd64", trueSize-1)
			ctx := context.Background()
			p, _ := addrs.ParseProvider(originHost + "/acme/net")
			a, err := r.engine.OpenArchive(ctx, p, versions.MustParseVersion("1.0.0"), mustPlatform(t, "linux_amd64"))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, a)
			a.Close()
			r.waitIdle()

			got, err := tryPull(r, "acme", "net", "1.0.0", "linux_amd64")
			if err != nil {
				t.Fatalf("pull: %v", err)
			}
			if got.manifest != wantManifest(t, r, "acme", "net", "1.0.0", "linux_amd64") {
				t.Errorf("manifest %s over a layer of %d bytes, want %d", got.manifest, got.layer.Size, trueSize)
			}
		})
	}
}

// Sizes once kept are kept: an origin stating a wrong size later (a
// restart, every memo empty, the archive not cached) changes no digest.
func TestWrongSizeStatedLaterChangesNothing(t *testing.T) {
	for _, tc := range sizeCases {
		t.Run(tc.name, func(t *testing.T) {
			opts := rigOptions{origin: fakeorigin.Options{PackageHashes: tc.packageHashes}, cacheDir: t.TempDir()}
			r := newRig(t, opts)
			r.origin.AddProvider("acme", "net", []string{"1.0.0"}, twoPlatforms)
			before, err := tryPull(r, "acme", "net", "1.0.0", "linux_amd64")
			if err != nil {
				t.Fatal(err)
			}
			trueSize := int64(len(r.origin.Archive("acme", "net", "1.0.0", "darwin_arm64")))
			r.origin.SetStatedSize("acme", "net", "1.0.0", "darwin_arm64", trueSize+100)
			r.origin.SetStatedSize("acme", "net", "1.0.0", "linux_amd64", trueSize+100)
			r.stop()
			r.start(opts)
			for _, pl := range twoPlatforms {
				got, err := tryPull(r, "acme", "net", "1.0.0", pl)
				if err != nil || got.index != before.index {
					t.Errorf("%s after a wrong size was stated: %+v, %v; before %+v", pl, got, err, before)
				}
			}
		})
	}
}

// dropMetrics counts the versions whose OCI documents were dropped for
// a wrong size.
type dropMetrics struct {
	enginetest.NoMetrics
	dropped atomic.Int64
}

func (m *dropMetrics) OCIWrongSizeDropped() { m.dropped.Add(1) }

// A version's documents made with a wrong stated size are dropped
// however the mirror comes to hold the archive verified: fetched for
// another door (the network mirror's), or found in the cache (one
// written before sizes were checked) when the blob is served or when
// the version's index is built again after a restart. Each time the
// version is counted once, and pulls succeed from then on.
func TestWrongSizeNoticed(t *testing.T) {
	const ns, typ, version, platform = "acme", "net", "1.0.0", "linux_amd64"
	for _, tc := range []struct {
		name string
		// verify brings the archive into the cache, verified, once the
		// wrong documents were handed out; it reports whether the first
		// pull after it may fail (a blob served with its own length,
		// which the client's descriptor does not have).
		verify func(t *testing.T, r *rig, opts rigOptions) (firstPullFails bool)
	}{
		{"fetched for another door", func(t *testing.T, r *rig, _ rigOptions) bool {
			p, _ := addrs.ParseProvider(originHost + "/" + ns + "/" + typ)
			a, err := r.engine.OpenArchive(context.Background(), p, versions.MustParseVersion(version), mustPlatform(t, platform))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, a)
			a.Close()
			r.waitIdle()
			return false
		}},
		{"cached before, blob served", func(t *testing.T, r *rig, _ rigOptions) bool {
			putBlob(t, r, r.origin.Archive(ns, typ, version, platform))
			return true
		}},
		{"cached before, index built after a restart", func(t *testing.T, r *rig, opts rigOptions) bool {
			putBlob(t, r, r.origin.Archive(ns, typ, version, platform))
			r.stop()
			r.start(opts)
			return false
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			met := &dropMetrics{}
			opts := rigOptions{origin: fakeorigin.Options{PackageHashes: true}, cacheDir: t.TempDir(), engine: mirror.Config{Metrics: met}}
			r := newRig(t, opts)
			r.origin.AddProvider(ns, typ, []string{version}, twoPlatforms)
			trueSize := int64(len(r.origin.Archive(ns, typ, version, platform)))
			r.origin.SetStatedSize(ns, typ, version, platform, trueSize*2)
			// The documents are handed out (no archive downloaded).
			repo := r.repo(ns, typ, auth.EmptyCredential)
			tag, _ := oci.Tag(version)
			wrong, err := repo.Resolve(context.Background(), tag)
			if err != nil {
				t.Fatal(err)
			}
			if r.origin.Hits(fakeorigin.Archive) != 0 {
				t.Fatal("an archive was downloaded for an index")
			}
			firstFails := tc.verify(t, r, opts)
			got, err := tryPull(r, ns, typ, version, platform)
			if err != nil && firstFails {
				t.Logf("the first pull: %v", err)
				got, err = tryPull(r, ns, typ, version, platform)
			}
			if err != nil {
				t.Fatalf("pull: %v", err)
			}
			if got.layer.Size != trueSize || got.index == wrong.Digest.String() {
				t.Errorf("pulled %+v, the wrong index %s", got, wrong.Digest)
			}
			if n := met.dropped.Load(); n != 1 {
				t.Errorf("%d versions dropped, want 1", n)
			}
		})
	}
}

// putBlob commits zip to the rig's cache as the mirror does (its sha256
// and h1:), without the engine: as a cache holds an archive fetched
// before anything compared its size with the documents'.
func putBlob(t *testing.T, r *rig, zip []byte) {
	t.Helper()
	w, err := r.store.NewBlobWriter(sha256Digest(zip)[len("sha256:"):])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(zip); err != nil {
		t.Fatal(err)
	}
	h1, err := verify.H1(bytes.NewReader(zip), int64(len(zip)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(h1); err != nil {
		t.Fatal(err)
	}
}

// A blob streamed from an origin that announces no length is sent
// without one, never with the index's size: the client reads the whole
// verified archive and its own check against its descriptor says what is
// wrong, rather than a body cut at, or running past, a length its bytes
// do not have. A HEAD waits for the verified bytes and answers their
// length, not the index's.
func TestBlobNeverSentWithTheIndexLength(t *testing.T) {
	const ns, typ, platform = "acme", "net", "linux_amd64"
	for _, tc := range []struct {
		name  string
		delta int64 // the stated size minus the true one
	}{
		{"stated larger", 7},
		{"stated smaller", -7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigOptions{origin: fakeorigin.Options{PackageHashes: true}})
			r.origin.AddProvider(ns, typ, []string{"1.0.0", "2.0.0"}, twoPlatforms)
			r.origin.SetArchiveLengthHidden(true)
			repo := r.repo(ns, typ, auth.EmptyCredential)
			blobOf := func(version string) (path string, zip []byte) {
				zip = r.origin.Archive(ns, typ, version, platform)
				r.origin.SetStatedSize(ns, typ, version, platform, int64(len(zip))+tc.delta)
				tag, _ := oci.Tag(version)
				if _, err := repo.Resolve(context.Background(), tag); err != nil {
					t.Fatal(err)
				}
				return "/v2/providers/" + originHost + "/" + ns + "/" + typ + "/blobs/" + sha256Digest(zip), zip
			}

			blob, zip := blobOf("1.0.0")
			resp := r.do(http.MethodGet, blob)
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(got, zip) {
				t.Fatalf("GET: %s, %d bytes, %v; want the %d of the archive", resp.Status, len(got), err, len(zip))
			}
			if resp.ContentLength != -1 && resp.ContentLength != int64(len(zip)) {
				t.Errorf("GET announced %d bytes, sent %d", resp.ContentLength, len(zip))
			}

			blob, zip = blobOf("2.0.0")
			head := r.do(http.MethodHead, blob)
			head.Body.Close()
			if head.StatusCode != http.StatusOK || head.ContentLength != int64(len(zip)) {
				t.Errorf("HEAD: %s, length %d; want the archive's %d", head.Status, head.ContentLength, len(zip))
			}
			r.waitIdle()
		})
	}
}
