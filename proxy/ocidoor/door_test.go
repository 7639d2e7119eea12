package ocidoor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/observed"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/proxy"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

var twoPlatforms = []string{"linux_amd64", "darwin_arm64"}

// pullProvider does what OpenTofu's oci_mirror does with oras-go: list
// tags, resolve a tag, fetch the index and the platform's manifest and
// blob, each checked against its descriptor's digest and size by oras-go.
// It returns the documents' digests and the zip.
func pullProvider(t *testing.T, r *rig, ns, typ, version, platform string, cred auth.Credential) (digests []string, zip []byte) {
	t.Helper()
	ctx := context.Background()
	repo := r.repo(ns, typ, cred)
	var tags []string
	if err := repo.Tags(ctx, "", func(page []string) error { tags = append(tags, page...); return nil }); err != nil {
		t.Fatalf("tags: %v", err)
	}
	tag, _ := oci.Tag(version)
	if !slices.Contains(tags, tag) {
		t.Fatalf("tags %v lack %s", tags, tag)
	}
	desc, err := repo.Resolve(ctx, tag)
	if err != nil {
		t.Fatalf("resolve %s: %v", tag, err)
	}
	if desc.MediaType != ocispec.MediaTypeImageIndex {
		t.Fatalf("tag resolves to %s", desc.MediaType)
	}
	b, err := content.FetchAll(ctx, repo, desc)
	if err != nil {
		t.Fatalf("index: %v", err)
	}
	var index ocispec.Index
	if err := json.Unmarshal(b, &index); err != nil {
		t.Fatal(err)
	}
	if index.ArtifactType != oci.ArtifactTypeProvider || index.MediaType != ocispec.MediaTypeImageIndex {
		t.Fatalf("index %s", b)
	}
	digests = append(digests, desc.Digest.String())
	var target *ocispec.Descriptor
	for i, m := range index.Manifests {
		if m.ArtifactType != oci.ArtifactTypeProviderTarget || m.Platform == nil || m.Platform.Variant != "" || m.Platform.OSVersion != "" {
			t.Fatalf("index entry %+v", m)
		}
		if m.Platform.OS+"_"+m.Platform.Architecture == platform {
			target = &index.Manifests[i]
		}
	}
	if target == nil {
		t.Fatalf("index %s has no %s", b, platform)
	}
	mb, err := content.FetchAll(ctx, repo, *target)
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != oci.ArtifactTypeProviderTarget || len(m.Layers) != 1 || m.Layers[0].MediaType != "archive/zip" ||
		m.Config.Digest != ocispec.DescriptorEmptyJSON.Digest {
		t.Fatalf("manifest %s", mb)
	}
	digests = append(digests, target.Digest.String())
	if want := "sha256:" + r.origin.SHA256(ns, typ, version, platform); m.Layers[0].Digest.String() != want {
		t.Errorf("layer digest %s, want the origin's SHA256SUMS entry %s", m.Layers[0].Digest, want)
	}
	zip, err = content.FetchAll(ctx, repo.Blobs(), m.Layers[0])
	if err != nil {
		t.Fatalf("blob: %v", err)
	}
	if !bytes.Equal(zip, r.origin.Archive(ns, typ, version, platform)) {
		t.Error("the blob is not the origin's zip")
	}
	cfg, err := content.FetchAll(ctx, repo.Blobs(), m.Config)
	if err != nil || string(cfg) != "{}" {
		t.Errorf("config blob %q, %v", cfg, err)
	}
	return digests, zip
}

func TestORASPullsProvider(t *testing.T) {
	for _, tc := range []struct {
		name          string
		packageHashes bool // the origin states sizes (OpenTofu's package_size)
		wantSizeHits  int  // first-byte requests for the first index
	}{
		{"origin without package sizes", false, len(twoPlatforms)},
		{"origin with package sizes", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigOptions{origin: fakeorigin.Options{PackageHashes: tc.packageHashes}})
			r.origin.AddProvider("acme", "net", []string{"1.0.0", "1.1.0"}, twoPlatforms)
			pullProvider(t, r, "acme", "net", "1.1.0", "linux_amd64", auth.EmptyCredential)
			if got := r.origin.ArchiveHits("acme", "net", "1.1.0", "linux_amd64"); got != 1 {
				t.Errorf("%d origin downloads of the pulled zip, want 1", got)
			}
			if got := r.origin.ArchiveHits("acme", "net", "1.1.0", "darwin_arm64"); got != 0 {
				t.Errorf("%d origin downloads of the platform not pulled, want 0", got)
			}
			if got := r.origin.Hits(fakeorigin.ArchiveSize); got != tc.wantSizeHits {
				t.Errorf("%d first-byte requests, want %d", got, tc.wantSizeHits)
			}
			// Again: everything from the cache.
			r.origin.ResetHits()
			pullProvider(t, r, "acme", "net", "1.1.0", "linux_amd64", auth.EmptyCredential)
			if got := r.origin.Hits(fakeorigin.Archive) + r.origin.Hits(fakeorigin.ArchiveSize) + r.origin.Hits(fakeorigin.Download); got != 0 {
				t.Errorf("%d origin requests for a warm pull", got)
			}
		})
	}
}

// The layer digest resolves as a blob of its repository before the zip
// is cached: fifty clients fetching it cold, all waiting on the origin at
// once, are coalesced on one origin download (and the platform's
// manifest, fetched after, names that digest and the zip's real size).
func TestColdBlobFanOutMakesOneDownload(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.origin.AddProvider("acme", "net", []string{"2.0.0"}, twoPlatforms)
	ctx := context.Background()
	repo := r.repo("acme", "net", auth.EmptyCredential)
	desc, err := repo.Resolve(ctx, "2.0.0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := content.FetchAll(ctx, repo, desc)
	if err != nil {
		t.Fatal(err)
	}
	want := r.origin.Archive("acme", "net", "2.0.0", "linux_amd64")
	// The layer's digest, as the platform's manifest names it (fetching
	// the manifest would download the archive).
	layer := "sha256:" + r.origin.SHA256("acme", "net", "2.0.0", "linux_amd64")
	p, err := addrs.NewProvider(originHost, "acme", "net")
	if err != nil {
		t.Fatal(err)
	}
	release := r.origin.GateArchives()
	defer release()
	const clients = 50
	type answer struct {
		resp *http.Response
		err  error
	}
	answers := make(chan answer, clients)
	for range clients {
		go func() {
			req, err := http.NewRequest(http.MethodGet, r.http.URL+"/v2/"+r.names.Provider(p)+"/blobs/"+layer, nil)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			resp, err := r.http.Client().Do(req)
			answers <- answer{resp, err}
		}()
	}
	// Every client is answered while the origin's download is held: each
	// is waiting on a download then, none on the cache.
	sources := map[string]int{}
	var bodies []io.ReadCloser
	deadline := time.After(time.Minute)
	for range clients {
		select {
		case a := <-answers:
			if a.err != nil {
				t.Fatal(a.err)
			}
			defer a.resp.Body.Close()
			if a.resp.StatusCode != http.StatusOK {
				t.Fatalf("blob: %s", a.resp.Status)
			}
			sources[a.resp.Header.Get("X-Tfmirror-Cache")]++
			bodies = append(bodies, a.resp.Body)
		case <-deadline:
			t.Fatalf("%d of %d clients answered while the download was held (origin hits %d)", len(bodies), clients, r.origin.ArchiveHits("acme", "net", "2.0.0", "linux_amd64"))
		}
	}
	if sources["miss"] != 1 || sources["coalesced"] != clients-1 {
		t.Errorf("cache sources %v; want 1 miss, %d coalesced", sources, clients-1)
	}
	release()
	for _, body := range bodies {
		if got, err := io.ReadAll(body); err != nil || !bytes.Equal(got, want) {
			t.Errorf("blob: %d bytes, err %v; want %d bytes", len(got), err, len(want))
		}
	}
	if got := r.origin.ArchiveHits("acme", "net", "2.0.0", "linux_amd64"); got != 1 {
		t.Errorf("%d origin downloads for %d clients, want 1", got, clients)
	}
	var index ocispec.Index
	json.Unmarshal(b, &index)
	for _, m := range index.Manifests {
		if m.Platform.OS != "linux" {
			continue
		}
		mb, err := content.FetchAll(ctx, repo, m)
		if err != nil {
			t.Fatal(err)
		}
		var man ocispec.Manifest
		json.Unmarshal(mb, &man)
		if len(man.Layers) != 1 || string(man.Layers[0].Digest) != layer || man.Layers[0].Size != int64(len(want)) {
			t.Errorf("manifest layers %+v; want one, %s of %d bytes", man.Layers, layer, len(want))
		}
	}
}

// ociError reads the OCI error envelope of a response.
func ociError(t *testing.T, resp *http.Response) (status int, code string) {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Errors []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(b, &body); err != nil || len(body.Errors) != 1 {
		t.Fatalf("%s: body %q is not one OCI error", resp.Status, b)
	}
	return resp.StatusCode, body.Errors[0].Code
}

func TestErrorCodes(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.origin.AddProvider("acme", "net", []string{"1.0.0"}, twoPlatforms)
	base := "/v2/providers/" + originHost + "/acme/net"
	tests := []struct {
		name, method, path string
		status             int
		code               string
	}{
		{"provider the origin lacks", "GET", "/v2/providers/" + originHost + "/acme/nothing/tags/list", 404, "NAME_UNKNOWN"},
		{"origin not allowed", "GET", "/v2/providers/registry.example.org/acme/net/tags/list", 404, "NAME_UNKNOWN"},
		{"outside the prefixes", "GET", "/v2/library/alpine/manifests/latest", 404, "NAME_UNKNOWN"},
		{"upper case name", "GET", "/v2/providers/" + originHost + "/Acme/net/tags/list", 404, "NAME_UNKNOWN"},
		{"escaped slash", "GET", "/v2/providers/" + originHost + "%2Facme/net/tags/list", 404, "NAME_UNKNOWN"},
		{"dot dot", "GET", "/v2/providers/" + originHost + "/../net/tags/list", 404, "NAME_UNKNOWN"},
		{"unknown provider's manifest", "HEAD", "/v2/providers/" + originHost + "/acme/nothing/manifests/1.0.0", 404, ""},
		{"unknown provider's manifest body", "GET", "/v2/providers/" + originHost + "/acme/nothing/manifests/1.0.0", 404, "NAME_UNKNOWN"},
		{"version the origin lacks", "GET", base + "/manifests/9.9.9", 404, "MANIFEST_UNKNOWN"},
		{"tag that is no version", "GET", base + "/manifests/latest", 404, "MANIFEST_UNKNOWN"},
		{"digest never handed out", "GET", base + "/manifests/sha256:" + strings.Repeat("a", 64), 404, "MANIFEST_UNKNOWN"},
		{"bad digest", "GET", base + "/manifests/sha256:zz", 400, "DIGEST_INVALID"},
		{"blob never handed out", "GET", base + "/blobs/sha256:" + strings.Repeat("b", 64), 404, "BLOB_UNKNOWN"},
		{"push a manifest", "PUT", base + "/manifests/1.0.0", 405, "UNSUPPORTED"},
		{"delete a manifest", "DELETE", base + "/manifests/1.0.0", 405, "UNSUPPORTED"},
		{"start an upload", "POST", base + "/blobs/uploads/", 405, "UNSUPPORTED"},
		{"an upload's state", "GET", base + "/blobs/uploads/some-id", 405, "UNSUPPORTED"},
		{"delete a blob", "DELETE", base + "/blobs/sha256:" + strings.Repeat("b", 64), 405, "UNSUPPORTED"},
		{"negative page", "GET", base + "/tags/list?n=-1", 400, "PAGINATION_NUMBER_INVALID"},
		{"not an API path", "GET", base + "/whatever", 404, "NAME_UNKNOWN"},
		{"path longer than the door's bound", "GET", base + "/" + strings.Repeat("a/", 1100) + "tags/list", 400, "NAME_INVALID"},
		{"path longer than any door's", "GET", base + "/" + strings.Repeat("a/", 2100) + "tags/list", 414, "NAME_INVALID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := r.do(tt.method, tt.path)
			if tt.method == "HEAD" {
				resp.Body.Close()
				if resp.StatusCode != tt.status {
					t.Errorf("%s %s: %d, want %d", tt.method, tt.path, resp.StatusCode, tt.status)
				}
				return
			}
			if allow, ok := resp.Header["Allow"]; tt.status == http.StatusMethodNotAllowed &&
				(!ok || strings.Contains(tt.path, "/uploads/") != (allow[0] == "")) {
				t.Errorf("%s %s: 405 with Allow %q, want GET and HEAD (none on an upload's path)", tt.method, tt.path, allow)
			}
			status, code := ociError(t, resp)
			if status != tt.status || code != tt.code {
				t.Errorf("%s %s: %d %s, want %d %s", tt.method, tt.path, status, code, tt.status, tt.code)
			}
		})
	}
	if got := r.origin.Hits(fakeorigin.Archive); got != 0 {
		t.Errorf("%d archive downloads from refused requests", got)
	}
}

func TestPingAndReferrers(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.origin.AddProvider("acme", "net", []string{"1.0.0"}, twoPlatforms)
	for _, path := range []string{"/v2/", "/v2"} {
		resp := r.do("GET", path)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "{}" || resp.Header.Get("Docker-Distribution-API-Version") != "registry/2.0" {
			t.Errorf("GET %s: %s %q", path, resp.Status, b)
		}
	}
	resp := r.do("GET", "/v2/providers/"+originHost+"/acme/net/referrers/sha256:"+strings.Repeat("c", 64))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var idx ocispec.Index
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != ocispec.MediaTypeImageIndex || json.Unmarshal(b, &idx) != nil ||
		idx.Manifests == nil || len(idx.Manifests) != 0 || idx.SchemaVersion != 2 {
		t.Errorf("referrers: %s %s %q", resp.Status, resp.Header.Get("Content-Type"), b)
	}
}

// The version check and the referrers answers say how a cache in front
// may reuse them, as their neighbours do: without client authentication
// the check is no-cache (it says whether credentials are needed, which
// turning client authentication on changes) and the referrers reusable
// as the tag list and the answers by digest are, so that a deny on a
// reload reaches a cache's copy as soon; with it, each is private and
// unstored, as every answer to a token holder is, and the challenge
// unstored.
func TestPingAndReferrersCacheControl(t *testing.T) {
	digest := "sha256:" + strings.Repeat("c", 64)
	paths := map[string]string{
		"ping":               "/v2/",
		"ping without slash": "/v2",
		"provider referrers": "/v2/providers/" + originHost + "/acme/net/referrers/" + digest,
		"module referrers":   "/v2/modules/" + originHost + "/acme/net/aws/referrers/" + digest,
	}
	cacheControl := func(r *rig, method, path string, header ...string) (int, string) {
		t.Helper()
		resp := r.do(method, path, header...)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Cache-Control")
	}

	open := newRig(t, rigOptions{})
	open.origin.AddProvider("acme", "net", []string{"1.0.0"}, twoPlatforms)
	_, tags := cacheControl(open, "GET", "/v2/providers/"+originHost+"/acme/net/tags/list")
	if tags != proxy.PackageCacheControl {
		t.Fatalf("tag list: Cache-Control %q, want %q", tags, proxy.PackageCacheControl)
	}
	for what, path := range paths {
		want := tags
		if strings.HasPrefix(what, "ping") {
			want = "no-cache"
		}
		for _, method := range []string{"GET", "HEAD"} {
			if status, cc := cacheControl(open, method, path); status != 200 || cc != want {
				t.Errorf("without client authentication, %s %s (%s): %d, Cache-Control %q; want 200 and %q", method, what, path, status, cc, want)
			}
		}
	}

	private := newRig(t, rigOptions{auth: testAuth(t, nil)})
	private.origin.AddProvider("acme", "net", []string{"1.0.0"}, twoPlatforms)
	for what, path := range paths {
		for _, method := range []string{"GET", "HEAD"} {
			if status, cc := cacheControl(private, method, path, "Authorization", "Bearer "+clientToken); status != 200 || cc != "private, no-store" {
				t.Errorf("with a client token, %s %s (%s): %d, Cache-Control %q; want 200 and private, no-store", method, what, path, status, cc)
			}
			if status, cc := cacheControl(private, method, path); status != 401 || cc != "no-store" {
				t.Errorf("without a token, %s %s (%s): %d, Cache-Control %q; want 401 and no-store", method, what, path, status, cc)
			}
		}
	}
}

// HEAD of a tag answers what OpenTofu needs: Content-Type, a real
// Content-Length and Docker-Content-Digest, equal to the GET's.
func TestManifestHead(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.origin.AddProvider("acme", "net", []string{"1.0.0+build.1"}, twoPlatforms)
	path := "/v2/providers/" + originHost + "/acme/net/manifests/1.0.0_build.1"
	head := r.do("HEAD", path)
	head.Body.Close()
	get := r.do("GET", path)
	b, _ := io.ReadAll(get.Body)
	get.Body.Close()
	if head.StatusCode != 200 || get.StatusCode != 200 {
		t.Fatalf("HEAD %s, GET %s", head.Status, get.Status)
	}
	if head.Header.Get("Content-Type") != ocispec.MediaTypeImageIndex || head.ContentLength != int64(len(b)) ||
		head.Header.Get("Docker-Content-Digest") != sha256Digest(b) || get.Header.Get("Docker-Content-Digest") != sha256Digest(b) {
		t.Errorf("HEAD: %v (length %d); GET body of %d bytes, digest %s", head.Header, head.ContentLength, len(b), sha256Digest(b))
	}
}

func TestTagPaging(t *testing.T) {
	r := newRig(t, rigOptions{})
	vs := []string{"1.0.0", "1.1.0", "1.2.0", "2.0.0", "2.0.0-rc1", "0.9.0+a.b"}
	r.origin.AddProvider("acme", "net", vs, twoPlatforms)
	all := r.pageTags(t, "providers/"+originHost+"/acme/net", 2)
	want := []string{"0.9.0_a.b", "1.0.0", "1.1.0", "1.2.0", "2.0.0", "2.0.0-rc1"}
	if !slices.Equal(all, want) {
		t.Errorf("tags over pages %v, want %v", all, want)
	}
	// oras-go follows the Link pages itself.
	var tags []string
	repo := r.repo("acme", "net", auth.EmptyCredential)
	repo.TagListPageSize = 1
	if err := repo.Tags(context.Background(), "", func(p []string) error { tags = append(tags, p...); return nil }); err != nil || !slices.Equal(tags, want) {
		t.Errorf("oras-go tags %v, %v", tags, err)
	}
}

// TestTagPageCountBeyondAnInt: a tag list's n too large for an int asks
// for more than a page holds, as any n over maxTagPage does: it is given
// a page, not refused PAGINATION_NUMBER_INVALID; one too small for an
// int is refused as any negative n is.
func TestTagPageCountBeyondAnInt(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.origin.AddProvider("acme", "net", []string{"1.0.0", "1.1.0"}, twoPlatforms)
	base := "/v2/providers/" + originHost + "/acme/net/tags/list"
	resp := r.do("GET", base+"?n=99999999999999999999")
	var list tagList
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !slices.Equal(list.Tags, []string{"1.0.0", "1.1.0"}) {
		t.Errorf("n beyond an int: %s %+v, want 200 with both tags", resp.Status, list)
	}
	if status, code := ociError(t, r.do("GET", base+"?n=-99999999999999999999")); status != http.StatusBadRequest || code != codePaginationInvalid {
		t.Errorf("n below an int: %d %s, want 400 %s", status, code, codePaginationInvalid)
	}
}

// TestTagPageBounded: a page of the tag list holds at most maxTagPage
// tags, whatever n asks for, and says where the next page is: a client
// asking for more than that is given the first maxTagPage and the Link,
// never the whole list in one answer.
func TestTagPageBounded(t *testing.T) {
	all := make([]string, 3*maxTagPage)
	for i := range all {
		all[i] = fmt.Sprintf("1.0.%d", i)
	}
	for _, n := range []int{-1, maxTagPage + 1, 5 * maxTagPage} {
		w := httptest.NewRecorder()
		writeTagPage(w, httptest.NewRequest("GET", "/v2/r/tags/list", nil), "r", slices.Clone(all), n, "", false)
		var list tagList
		if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Tags) != maxTagPage || w.Header().Get("Link") == "" {
			t.Errorf("n=%d: a page of %d tags, Link %q; want %d and a Link to the next", n, len(list.Tags), w.Header().Get("Link"), maxTagPage)
		}
	}
}

// pageTags follows repo's tag list n at a time, through every Link
// rel="next", checking each page's status, size and name, and returns the
// tags of all pages in order.
func (r *rig) pageTags(t *testing.T, repo string, n int) []string {
	t.Helper()
	var all []string
	path := "/v2/" + repo + "/tags/list?n=" + strconv.Itoa(n)
	for pages := 0; path != ""; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		resp := r.do("GET", path)
		var list tagList
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(list.Tags) > n || list.Name != repo {
			t.Fatalf("%s: %s %+v", path, resp.Status, list)
		}
		all = append(all, list.Tags...)
		path = ""
		if link := resp.Header.Get("Link"); link != "" {
			next, ok := strings.CutSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
			if !ok {
				t.Fatalf("Link %q", link)
			}
			path = next
		}
	}
	return all
}

// The route is read from the end of the path, as the spec anchors it: a
// repository name may hold the routes' words ("manifests", "blobs",
// "uploads", "referrers", "tags") as components, and such a provider is
// pulled like any other.
func TestRoutesReadFromTheEndOfThePath(t *testing.T) {
	r := newRig(t, rigOptions{})
	for _, nt := range [][2]string{{"acme", "manifests"}, {"blobs", "uploads"}, {"manifests", "blobs"}, {"acme", "referrers"}, {"tags", "list"}} {
		r.origin.AddProvider(nt[0], nt[1], []string{"1.0.0"}, twoPlatforms)
		t.Run(nt[0]+"/"+nt[1], func(t *testing.T) {
			digests, _ := pullProvider(t, r, nt[0], nt[1], "1.0.0", "linux_amd64", auth.EmptyCredential)
			base := "/v2/providers/" + originHost + "/" + nt[0] + "/" + nt[1]
			resp := r.do("GET", base+"/referrers/"+digests[0])
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("referrers: %s", resp.Status)
			}
			for _, path := range []string{base + "/blobs/uploads/", base + "/blobs/uploads/some-id"} {
				if status, code := ociError(t, r.do("POST", path)); status != http.StatusMethodNotAllowed || code != "UNSUPPORTED" {
					t.Errorf("POST %s: %d %s", path, status, code)
				}
			}
		})
	}
}

// A client that goes away while the door waits for the origin is counted
// and logged with its own code, 499, as on the other doors: not as a 200
// that delivered nothing.
func TestClientGoneCountedAsSuch(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.origin.AddProvider("acme", "net", []string{"1.0.0"}, twoPlatforms)
	r.origin.AddProvider("acme", "dns", []string{"1.0.0"}, twoPlatforms)
	addTarballModule(r, map[string][]byte{"main.tf": []byte("#")}, "1.0.0")
	// A blob whose index was handed out, not downloaded yet.
	resp := r.do("GET", "/v2/providers/"+originHost+"/acme/dns/manifests/1.0.0")
	resp.Body.Close()
	blob := "/v2/providers/" + originHost + "/acme/dns/blobs/sha256:" + r.origin.SHA256("acme", "dns", "1.0.0", "linux_amd64")
	// The origin answers much later than the client gives up (at once).
	r.origin.SetLatency(time.Second)
	obs := &observed.Requests{}
	h := proxy.Instrument(r.http.Config.Handler, slog.New(slog.DiscardHandler), obs)
	paths := []string{
		"/v2/providers/" + originHost + "/acme/net/tags/list",
		"/v2/providers/" + originHost + "/acme/net/manifests/1.0.0",
		"/v2/modules/" + originHost + "/acme/net/aws/tags/list",
		"/v2/modules/" + originHost + "/acme/net/aws/manifests/1.0.0",
		blob,
	}
	observed.AskGone(h, paths)
	obs.Expect(t, paths, httperr.StatusClientClosedRequest)
}

// A path longer than any door serves is answered by the door, in its
// envelope, and the line it logs stays short however long the path.
func TestLongPathLoggedBounded(t *testing.T) {
	r := newRig(t, rigOptions{})
	var out bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	door, err := New(Config{Names: r.names, Logger: logger, Modules: r.pkgs}, r.pkgs)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(proxy.Config{Logger: logger, OCI: door}, r.pkgs)
	if err != nil {
		t.Fatal(err)
	}
	h := proxy.Instrument(srv, logger, nil)
	for _, path := range []string{"/v2/" + strings.Repeat("%FF", 18<<10), "/v2/providers/" + strings.Repeat("a/", 1500) + "tags/list"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var body struct {
			Errors []struct{ Code string } `json:"errors"`
		}
		if json.Unmarshal(rec.Body.Bytes(), &body) != nil || len(body.Errors) != 1 || body.Errors[0].Code != "NAME_INVALID" {
			t.Errorf("a path of %d bytes: %d %.200s", len(path), rec.Code, rec.Body.Bytes())
		}
	}
	for line := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
		if len(line) > 6<<10 {
			t.Errorf("a log line of %d bytes: %.300s…", len(line), line)
		}
	}
}

// A provider whose type holds letters outside ASCII (OpenTofu accepts
// any IDNA label: "café", "网络") is served as the network mirror serves
// it: its repository name is the hex form, and its zip's title is the
// archive's file name as the origin and the network mirror's
// VERSION.json name it, not an internal error on every manifest.
func TestNonASCIIProviderTypeServed(t *testing.T) {
	r := newRig(t, rigOptions{})
	for _, typ := range []string{"café", "网络"} {
		r.origin.AddProvider("acme", typ, []string{"1.0.0"}, twoPlatforms)
		_, zip := pullProvider(t, r, "acme", typ, "1.0.0", "linux_amd64", auth.EmptyCredential)
		if len(zip) == 0 {
			t.Errorf("%s: no zip", typ)
		}
	}
}

// Bad references and names no repository has, asked in a loop, get an
// access-log line each and, at info, only the first of their "request
// failed" lines: the rest are at debug, so that a client cannot grow the
// log by two lines a request.
func TestClientFaultsBoundedInTheLog(t *testing.T) {
	r := newRig(t, rigOptions{})
	logs := &observed.Logs{}
	door, err := New(Config{Names: r.names, Logger: slog.New(logs), Modules: r.pkgs}, r.pkgs)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(proxy.Config{Logger: slog.New(logs), OCI: door}, r.pkgs)
	if err != nil {
		t.Fatal(err)
	}
	h := proxy.Instrument(srv, slog.New(logs), nil)
	paths := []string{
		"/v2/providers/" + originHost + "/acme/net/manifests/not..a..tag",
		"/v2/providers/" + originHost + "/acme/nothing/manifests/1.0.0",
		"/v2/nothing/tags/list",
		"/v2/providers/" + originHost + "/acme/net/blobs/sha256:zz",
	}
	const n = 200
	observed.AskClientFaults(t, h, paths, n)
	if failed := logs.Besides("request", slog.LevelInfo); failed == 0 || failed > 40 {
		t.Errorf("%d lines at info besides the access log for %d requests, want at least one and at most 40", failed, n)
	}
}
