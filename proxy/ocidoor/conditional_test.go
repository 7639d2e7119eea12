package ocidoor

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// TestDocumentsAnswerIfNoneMatch: every answer of the door that carries
// an ETag (the image index of a tag, a manifest by digest, the empty
// config blob, of provider and module repositories alike) answers a
// request whose If-None-Match names it with 304 and no body, as its
// blobs do, whether it is made afresh or sent again as a warm answer: a
// cache in front revalidates an index of a tag (no-cache) on every use,
// and was sent the whole document each time. An If-Match that fails
// is 412.
func TestDocumentsAnswerIfNoneMatch(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	r.origin.AddProvider("hashicorp", "random", []string{"1.0.0"}, twoPlatforms)
	addTarballModule(r, map[string][]byte{"main.tf": []byte("# net\n")}, "1.0.0")
	p, err := addrs.NewProvider(originHost, "hashicorp", "random")
	if err != nil {
		t.Fatal(err)
	}
	base := "/v2/" + r.names.Provider(p)
	modBase := "/v2/modules/" + originHost + "/acme/net/aws"

	read := func(resp *http.Response) []byte {
		t.Helper()
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var index struct{ Manifests []struct{ Digest string } }
	if err := json.Unmarshal(read(r.do("GET", base+"/manifests/1.0.0")), &index); err != nil || len(index.Manifests) == 0 {
		t.Fatalf("index: %v", err)
	}
	modManifest := r.do("GET", modBase+"/manifests/1.0.0")
	read(modManifest)
	paths := map[string]string{
		"index by tag":              base + "/manifests/1.0.0",
		"manifest by digest":        base + "/manifests/" + index.Manifests[0].Digest,
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
			// An If-Match that fails is 412, a whole answer (no length
			// of the document it does not send).
			failed := r.do("GET", path, "If-Match", `"sha256:0000"`)
			if b := read(failed); failed.StatusCode != http.StatusPreconditionFailed || len(b) != 0 {
				t.Errorf("%s (%d), If-Match another ETag: %d, %d bytes; want 412", name, i, failed.StatusCode, len(b))
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
