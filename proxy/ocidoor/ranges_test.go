package ocidoor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// TestRangeNotSatisfiableInTheErrorEnvelope: a Range that names no byte
// of a blob or document (bytes=SIZE-, or a malformed bytes=9-2) is
// answered 416 in the door's error envelope, as every other error of the
// door is (the distribution-spec's JSON errors; net/http's own text/plain
// "invalid range: failed to overlap" was sent), with the spec's
// SIZE_INVALID, no-store, no ETag or Docker-Content-Digest, and
// Content-Range: bytes */SIZE (RFC 9110): a provider's cached blob, a
// module's blob, manifests by tag and digest and the empty config blob,
// to GET and HEAD.
func TestRangeNotSatisfiableInTheErrorEnvelope(t *testing.T) {
	t.Parallel()
	r, base, modBase, manifest := documentsRig(t)
	read := func(resp *http.Response) []byte { return readBody(t, resp) }
	blob, modBlob := cachedBlobs(t, r, base, modBase)
	for name, path := range map[string]string{
		"provider blob":      base + "/blobs/" + blob,
		"index by tag":       base + "/manifests/1.0.0",
		"manifest by digest": base + "/manifests/" + manifest,
		"empty config blob":  base + "/blobs/" + oci.EmptyConfig().Digest.String(),
		"module blob":        modBase + "/blobs/" + modBlob,
		"module manifest":    modBase + "/manifests/1.0.0",
	} {
		whole := r.do("GET", path)
		size := len(read(whole))
		if whole.StatusCode != http.StatusOK || size == 0 {
			t.Fatalf("%s: %d, %d bytes", name, whole.StatusCode, size)
		}
		for _, rng := range []string{fmt.Sprintf("bytes=%d-", size), "bytes=9-2"} {
			for _, method := range []string{"GET", "HEAD"} {
				resp := r.do(method, path, "Range", rng)
				body := read(resp)
				what := fmt.Sprintf("%s, %s Range %s", name, method, rng)
				if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
					t.Errorf("%s: status %d, want 416", what, resp.StatusCode)
					continue
				}
				h := resp.Header
				if got, want := h.Get("Content-Range"), fmt.Sprintf("bytes */%d", size); got != want {
					t.Errorf("%s: Content-Range %q, want %q", what, got, want)
				}
				if ct, cc := h.Get("Content-Type"), h.Get("Cache-Control"); ct != "application/json" || cc != "no-store" {
					t.Errorf("%s: Content-Type %q, Cache-Control %q; want application/json and no-store", what, ct, cc)
				}
				if et, dcd := h.Get("ETag"), h.Get("Docker-Content-Digest"); et != "" || dcd != "" {
					t.Errorf("%s: ETag %q, Docker-Content-Digest %q; want neither on an error", what, et, dcd)
				}
				if method == "HEAD" {
					continue
				}
				var env errorEnvelope
				if err := json.Unmarshal(body, &env); err != nil || len(env.Errors) != 1 || env.Errors[0].Code != "SIZE_INVALID" ||
					!strings.Contains(env.Errors[0].Message, fmt.Sprint(size)) {
					t.Errorf("%s: body %q (%v); want the error envelope, SIZE_INVALID, naming the size", what, body, err)
				}
			}
		}
	}
}

// TestRangeOfAnotherUnitIgnored: a Range in a unit other than bytes is
// ignored, as RFC 9110 has an origin server do with a unit it does not
// understand (the whole answered, 200), not refused as a range of bytes
// naming none (416); and the bytes unit is read in any case ("Bytes=",
// as unit names are case-insensitive): a provider's cached blob, a
// module's blob, and a manifest.
func TestRangeOfAnotherUnitIgnored(t *testing.T) {
	t.Parallel()
	r, base, modBase, manifest := documentsRig(t)
	read := func(resp *http.Response) []byte { return readBody(t, resp) }
	blob, modBlob := cachedBlobs(t, r, base, modBase)
	for name, path := range map[string]string{
		"provider blob":      base + "/blobs/" + blob,
		"manifest by digest": base + "/manifests/" + manifest,
		"module blob":        modBase + "/blobs/" + modBlob,
	} {
		whole := read(r.do("GET", path))
		for _, rng := range []string{"items=0-4", "x-rows=1-2"} {
			resp := r.do("GET", path, "Range", rng)
			if body := read(resp); resp.StatusCode != http.StatusOK || !bytes.Equal(body, whole) {
				t.Errorf("%s, Range %s: %d, %d bytes; want 200 and the %d bytes whole", name, rng, resp.StatusCode, len(body), len(whole))
			}
		}
		resp := r.do("GET", path, "Range", "Bytes=1-3")
		if body := read(resp); resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, whole[1:4]) {
			t.Errorf("%s, Range Bytes=1-3: %d %q; want 206 and bytes 1-3", name, resp.StatusCode, body)
		}
	}
}

// cachedBlobs caches the linux_amd64 archive of documentsRig's provider
// through the door and returns its blob's digest, with the digest of the
// module's blob, read from its manifest.
func cachedBlobs(t *testing.T, r *rig, base, modBase string) (blob, modBlob string) {
	t.Helper()
	blob = "sha256:" + r.origin.SHA256("hashicorp", "random", "1.0.0", "linux_amd64")
	readBody(t, r.do("GET", base+"/blobs/"+blob))
	enginetest.WaitCommitted(t, func(ctx context.Context) error { return mirror.WaitIdle(ctx, r.engine) }, r.store, strings.TrimPrefix(blob, "sha256:"))
	var modManifest struct{ Layers []struct{ Digest string } }
	if err := json.Unmarshal(readBody(t, r.do("GET", modBase+"/manifests/1.0.0")), &modManifest); err != nil || len(modManifest.Layers) != 1 {
		t.Fatalf("module manifest: %v", err)
	}
	return blob, modManifest.Layers[0].Digest
}
