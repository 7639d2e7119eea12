package ocidoor

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// TestDocumentsAnswerIfNoneMatch: every answer of the door that carries
// an ETag (the image index of a tag, a manifest by digest, the empty
// config blob, of provider and module repositories alike) answers a
// request whose If-None-Match names it with 304 and no body, as its
// blobs do, whether it is made afresh or sent again as a warm answer: a
// cache in front revalidates an index of a tag (no-cache) on every use,
// and was sent the whole document each time. An If-Match that fails
// is 412, in the door's error envelope.
func TestDocumentsAnswerIfNoneMatch(t *testing.T) {
	t.Parallel()
	r, base, modBase, manifest := documentsRig(t)
	read := func(resp *http.Response) []byte { return readBody(t, resp) }
	modManifest := r.do("GET", modBase+"/manifests/1.0.0")
	read(modManifest)
	paths := map[string]string{
		"index by tag":              base + "/manifests/1.0.0",
		"manifest by digest":        base + "/manifests/" + manifest,
		"empty config blob":         base + "/blobs/" + oci.EmptyConfig().Digest.String(),
		"module manifest by tag":    modBase + "/manifests/1.0.0",
		"module manifest by digest": modBase + "/manifests/" + modManifest.Header.Get("Docker-Content-Digest"),
		"module empty config blob":  modBase + "/blobs/" + oci.EmptyConfig().Digest.String(),
	}
	for name, path := range paths {
		for i := range 2 { // made, then sent again (warm)
			full := r.do("GET", path)
			body := read(full)
			etag := full.Header.Get("ETag")
			if full.StatusCode != http.StatusOK || etag == "" || len(body) == 0 {
				t.Fatalf("%s: %d, ETag %q, %d bytes", name, full.StatusCode, etag, len(body))
			}
			for _, method := range []string{"GET", "HEAD"} {
				resp := r.do(method, path, "If-None-Match", etag)
				if b := read(resp); resp.StatusCode != http.StatusNotModified || len(b) != 0 || resp.Header.Get("ETag") != etag {
					t.Errorf("%s (%d), %s If-None-Match its ETag: %d, ETag %q, %d bytes; want 304, its ETag, no body",
						name, i, method, resp.StatusCode, resp.Header.Get("ETag"), len(b))
				}
			}
			// An If-Match that fails is 412, in the door's error
			// envelope as its other errors (http.ServeContent's own had
			// no body), no-store, without the document's validators.
			failed := r.do("GET", path, "If-Match", `"sha256:0000"`)
			var env errorEnvelope
			if b := read(failed); failed.StatusCode != http.StatusPreconditionFailed || json.Unmarshal(b, &env) != nil ||
				len(env.Errors) != 1 || !strings.Contains(env.Errors[0].Message, "If-Match") {
				t.Errorf("%s (%d), If-Match another ETag: %d %q; want 412 in the error envelope, naming If-Match", name, i, failed.StatusCode, b)
			}
			if h := failed.Header; h.Get("Content-Type") != "application/json" || h.Get("Cache-Control") != "no-store" || h.Get("ETag") != "" || h.Get("Docker-Content-Digest") != "" {
				t.Errorf("%s (%d), If-Match another ETag: Content-Type %q, Cache-Control %q, ETag %q, Docker-Content-Digest %q; want application/json, no-store and no validators",
					name, i, h.Get("Content-Type"), h.Get("Cache-Control"), h.Get("ETag"), h.Get("Docker-Content-Digest"))
			}
			other := r.do("GET", path, "If-None-Match", `"sha256:0000"`)
			if b := read(other); other.StatusCode != http.StatusOK || string(b) != string(body) ||
				other.Header.Get("Content-Length") != full.Header.Get("Content-Length") {
				t.Errorf("%s (%d), If-None-Match another ETag: %d, %d bytes, Content-Length %q; want 200 and the document",
					name, i, other.StatusCode, len(b), other.Header.Get("Content-Length"))
			}
		}
	}
}

// TestColdBlobAnswersIfNoneMatch: a blob the mirror does not hold yet,
// asked with an If-None-Match naming its digest (a cache in front
// revalidating its copy), is answered 304 without its bytes, as a cached
// blob is; its download goes on into the cache, once.
func TestColdBlobAnswersIfNoneMatch(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	r.origin.AddProvider("hashicorp", "random", []string{"1.0.0"}, twoPlatforms)
	p, err := addrs.NewProvider(originHost, "hashicorp", "random")
	if err != nil {
		t.Fatal(err)
	}
	base := "/v2/" + r.names.Provider(p)
	r.do("GET", base+"/manifests/1.0.0").Body.Close()
	blob := "sha256:" + r.origin.SHA256("hashicorp", "random", "1.0.0", "linux_amd64")
	resp := r.do("GET", base+"/blobs/"+blob, "If-None-Match", `"`+blob+`"`)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusNotModified || len(b) != 0 || resp.Header.Get("X-Tfmirror-Cache") != "miss" {
		t.Errorf("cold blob with If-None-Match naming it: %d (%v, %s), %d bytes; want 304 and no body",
			resp.StatusCode, err, resp.Header.Get("X-Tfmirror-Cache"), len(b))
	}
	enginetest.WaitCommitted(t, func(ctx context.Context) error { return mirror.WaitIdle(ctx, r.engine) }, r.store, strings.TrimPrefix(blob, "sha256:"))
	if n := r.origin.ArchiveHits("hashicorp", "random", "1.0.0", "linux_amd64"); n != 1 {
		t.Errorf("origin archive fetches = %d, want 1", n)
	}
}

// documentsRig is a rig whose origin has provider hashicorp/random 1.0.0
// and module acme/net/aws 1.0.0, with the door's repositories of both
// (base, modBase) and the digest of a platform manifest of the provider,
// read from its image index.
func documentsRig(t *testing.T) (r *rig, base, modBase, manifest string) {
	t.Helper()
	r = newRig(t, rigOptions{})
	r.origin.AddProvider("hashicorp", "random", []string{"1.0.0"}, twoPlatforms)
	addTarballModule(r, map[string][]byte{"main.tf": []byte("# net\n")}, "1.0.0")
	p, err := addrs.NewProvider(originHost, "hashicorp", "random")
	if err != nil {
		t.Fatal(err)
	}
	base = "/v2/" + r.names.Provider(p)
	modBase = "/v2/modules/" + originHost + "/acme/net/aws"
	var index struct{ Manifests []struct{ Digest string } }
	if err := json.Unmarshal(readBody(t, r.do("GET", base+"/manifests/1.0.0")), &index); err != nil || len(index.Manifests) == 0 {
		t.Fatalf("index: %v", err)
	}
	return r, base, modBase, index.Manifests[0].Digest
}

// readBody reads and closes resp's body.
func readBody(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
