package ocidoor

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// moduleRepo returns an oras-go repository of the mirror for module
// NS/NAME/SYSTEM of the fake origin.
func (r *rig) moduleRepo(ns, name, system string) *remote.Repository {
	r.t.Helper()
	repo, err := remote.NewRepository(r.host() + "/modules/" + originHost + "/" + ns + "/" + name + "/" + system)
	if err != nil {
		r.t.Fatal(err)
	}
	repo.Client = &auth.Client{Client: r.http.Client(), Cache: auth.NewCache()}
	return repo
}

// addTarballModule serves versions of module acme/net/aws from tar.gz
// packages holding files, versioned as the origin spells them.
func addTarballModule(r *rig, files map[string][]byte, versions ...string) {
	for _, v := range versions {
		name := "net-" + v + ".tar.gz"
		r.origin.AddTarball(name, fakeorigin.TarGz(files))
		r.origin.AddModule("acme", "net", "aws", v, r.origin.TarballURL(name))
	}
}

// pullModule does what OpenTofu's oci:// module source does with
// oras-go: resolve the tag to an image manifest of artifactType modulepkg,
// fetch it and its one archive/zip layer (each checked by oras-go against
// its descriptor), and read the zip's files.
func pullModule(t *testing.T, r *rig, tag string) (manifestDigest string, files map[string]string) {
	t.Helper()
	ctx := context.Background()
	repo := r.moduleRepo("acme", "net", "aws")
	desc, err := repo.Resolve(ctx, tag)
	if err != nil {
		t.Fatalf("resolve %s: %v", tag, err)
	}
	if desc.MediaType != ocispec.MediaTypeImageManifest {
		t.Fatalf("tag resolves to %s", desc.MediaType)
	}
	mb, err := content.FetchAll(ctx, repo, desc)
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != oci.ArtifactTypeModulePackage || len(m.Layers) != 1 || m.Layers[0].MediaType != "archive/zip" ||
		m.Config.Digest != ocispec.DescriptorEmptyJSON.Digest {
		t.Fatalf("manifest %s", mb)
	}
	zb, err := content.FetchAll(ctx, repo.Blobs(), m.Layers[0])
	if err != nil {
		t.Fatalf("blob: %v", err)
	}
	zr, err := zip.NewReader(bytes.NewReader(zb), int64(len(zb)))
	if err != nil {
		t.Fatal(err)
	}
	files = map[string]string{}
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		files[f.Name] = string(b)
	}
	return desc.Digest.String(), files
}

// A module pulled as OpenTofu pulls it holds the package's files; its
// source is fetched once; a second pull is all from the cache and gives
// the same manifest digest, which also resolves by digest.
func TestORASPullsModule(t *testing.T) {
	r := newRig(t, rigOptions{})
	addTarballModule(r, map[string][]byte{"main.tf": []byte("# net\n"), "sub/vars.tf": []byte("# vars\n")}, "v1.0.0")
	d1, files := pullModule(t, r, "1.0.0")
	if len(files) != 2 || files["main.tf"] != "# net\n" || files["sub/vars.tf"] != "# vars\n" {
		t.Errorf("the zip holds %v", files)
	}
	if n := r.origin.Hits(fakeorigin.Tarball); n != 1 {
		t.Errorf("%d source fetches, want 1", n)
	}
	r.origin.ResetHits()
	d2, _ := pullModule(t, r, "1.0.0")
	if d2 != d1 {
		t.Errorf("manifest digest %s, then %s", d1, d2)
	}
	if n := r.origin.TotalHits(); n != 0 {
		t.Errorf("%d origin requests for a warm pull", n)
	}
	resp := r.do("GET", "/v2/modules/"+originHost+"/acme/net/aws/manifests/"+d1)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || sha256Digest(b) != d1 || resp.Header.Get("Docker-Content-Digest") != d1 {
		t.Errorf("by digest: %s, digest %s", resp.Status, sha256Digest(b))
	}
}

// Module tags are the canonical versions, paged with n and last.
func TestModuleTagPaging(t *testing.T) {
	r := newRig(t, rigOptions{})
	addTarballModule(r, map[string][]byte{"main.tf": []byte("#\n")}, "v1.0.0", "1.1.0", "2.0.0+b.1", "not-a-version")
	all := r.pageTags(t, "modules/"+originHost+"/acme/net/aws", 2)
	if want := []string{"1.0.0", "1.1.0", "2.0.0_b.1"}; !slices.Equal(all, want) {
		t.Errorf("tags over pages %v, want %v", all, want)
	}
}

func TestModuleErrorCodes(t *testing.T) {
	r := newRig(t, rigOptions{})
	addTarballModule(r, map[string][]byte{"main.tf": []byte("#\n")}, "1.0.0")
	base := "/v2/modules/" + originHost + "/acme/net/aws"
	for _, tt := range []struct {
		name, method, path string
		status             int
		code               string
	}{
		{"module the origin lacks", "GET", "/v2/modules/" + originHost + "/acme/nothing/aws/tags/list", 404, "NAME_UNKNOWN"},
		{"origin not allowed", "GET", "/v2/modules/registry.example.org/acme/net/aws/tags/list", 404, "NAME_UNKNOWN"},
		{"too few parts", "GET", "/v2/modules/" + originHost + "/acme/net/tags/list", 404, "NAME_UNKNOWN"},
		{"version the origin lacks", "GET", base + "/manifests/9.9.9", 404, "MANIFEST_UNKNOWN"},
		{"tag that is no version", "GET", base + "/manifests/latest", 404, "MANIFEST_UNKNOWN"},
		{"digest never handed out", "GET", base + "/manifests/sha256:" + strings.Repeat("a", 64), 404, "MANIFEST_UNKNOWN"},
		{"blob never handed out", "GET", base + "/blobs/sha256:" + strings.Repeat("b", 64), 404, "BLOB_UNKNOWN"},
		{"bad digest", "GET", base + "/blobs/sha256:zz", 400, "DIGEST_INVALID"},
		{"push a manifest", "PUT", base + "/manifests/1.0.0", 405, "UNSUPPORTED"},
		{"start an upload", "POST", base + "/blobs/uploads/", 405, "UNSUPPORTED"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, code := ociError(t, r.do(tt.method, tt.path))
			if status != tt.status || code != tt.code {
				t.Errorf("%s %s: %d %s, want %d %s", tt.method, tt.path, status, code, tt.status, tt.code)
			}
		})
	}
	if n := r.origin.Hits(fakeorigin.Tarball); n != 0 {
		t.Errorf("%d source fetches from refused requests", n)
	}
	resp := r.do("GET", base+"/referrers/sha256:"+strings.Repeat("c", 64))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var idx ocispec.Index
	if resp.StatusCode != 200 || json.Unmarshal(b, &idx) != nil || idx.Manifests == nil || len(idx.Manifests) != 0 {
		t.Errorf("referrers: %s %q", resp.Status, b)
	}
}

// A module version is one version by either tag: the origin lists
// "v1.0.0", and a pull by the tag "1.0.0" or "v1.0.0" resolves to the one
// manifest, made of one fetch of the source. A tag that names no version
// is MANIFEST_UNKNOWN, with no origin request.
func TestModuleTagEverySpelling(t *testing.T) {
	r := newRig(t, rigOptions{})
	addTarballModule(r, map[string][]byte{"main.tf": []byte("# net\n")}, "v1.0.0")
	d1, files := pullModule(t, r, "1.0.0")
	d2, _ := pullModule(t, r, "v1.0.0")
	if d1 != d2 || files["main.tf"] != "# net\n" {
		t.Errorf("by 1.0.0 %s, by v1.0.0 %s (files %v): want one manifest", d1, d2, files)
	}
	if n := r.origin.Hits(fakeorigin.Tarball); n != 1 {
		t.Errorf("%d source fetches, want 1", n)
	}
	if n := r.origin.Hits(fakeorigin.ModuleDownload); n != 1 {
		t.Errorf("%d download answers asked of the origin, want 1", n)
	}
	before := r.origin.TotalHits()
	base := "/v2/modules/" + originHost + "/acme/net/aws/manifests/"
	for _, tag := range []string{"vv1.0.0", "V1.0.0", "v", "1.0", "1.0.0-", "v1.0.0_"} {
		if status, code := ociError(t, r.do("GET", base+tag)); status != 404 || code != "MANIFEST_UNKNOWN" {
			t.Errorf("tag %q: %d %s, want 404 MANIFEST_UNKNOWN", tag, status, code)
		}
	}
	if n := r.origin.TotalHits() - before; n != 0 {
		t.Errorf("tags that name no version made %d origin requests", n)
	}
}
