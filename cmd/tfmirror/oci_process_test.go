package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/ocitest"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// ociSeen is what a client saw of a mirror's OCI front door: each
// repository's manifests (indexes too), by digest, with their bytes.
type ociSeen map[string]map[string][]byte

// pull walks repo's tag on p as a client does: the tag's document, and
// for an index each manifest it names, recording every document, and
// fetching every layer (so that the mirror caches it).
func (s ociSeen) pull(t *testing.T, p *proc, repo, tag string) {
	t.Helper()
	ctx := context.Background()
	body, _, err := p.get(ctx, "/v2/"+repo+"/manifests/"+tag)
	if err != nil {
		t.Fatalf("%s:%s: %v", repo, tag, err)
	}
	docs := [][]byte{body}
	var idx ocispec.Index
	if err := json.Unmarshal(body, &idx); err != nil {
		t.Fatal(err)
	}
	for _, d := range idx.Manifests {
		b, _, err := p.get(ctx, "/v2/"+repo+"/manifests/"+d.Digest.String())
		if err != nil {
			t.Fatalf("%s@%s: %v", repo, d.Digest, err)
		}
		docs = append(docs, b)
	}
	if s[repo] == nil {
		s[repo] = map[string][]byte{}
	}
	for _, b := range docs {
		s[repo][digestOf(b)] = b
		var m ocispec.Manifest
		if json.Unmarshal(b, &m) == nil && m.MediaType == ocispec.MediaTypeImageManifest {
			zip, _, err := p.get(ctx, "/v2/"+repo+"/blobs/"+m.Layers[0].Digest.String())
			if err != nil || digestOf(zip) != m.Layers[0].Digest.String() {
				t.Fatalf("%s layer %s: %v", repo, m.Layers[0].Digest, err)
			}
		}
	}
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// resolve checks that every document s holds resolves by its digest
// through get with the same bytes.
func (s ociSeen) resolve(t *testing.T, where string, get func(repo, digest string) ([]byte, error)) {
	t.Helper()
	for repo, docs := range s {
		for d, want := range docs {
			got, err := get(repo, d)
			if err != nil || string(got) != string(want) {
				t.Errorf("%s: %s@%s: %v (same bytes: %v)", where, repo, d, err, string(got) == string(want))
			}
		}
	}
}

func (p *proc) byDigest(repo, d string) ([]byte, error) {
	b, _, err := p.get(context.Background(), "/v2/"+repo+"/manifests/"+d)
	return b, err
}

// Two `tfmirror serve` replicas on one shared store: every provider and
// module manifest digest a client saw on the first resolves on the
// second (its module manifests by digest alone; a provider version's
// once its tag was asked there, giving the same digests), and on the
// first after a restart; `tfmirror export --format oci-layout` holds
// every one of them, and push.sh copies them with oras into a
// distribution registry, where each resolves by digest with the same
// bytes. The status page shows the oci_mirror block and an oci://
// module source with the mirror's address.
func TestOCIDigestsStableAcrossRestartReplicaAndLayout(t *testing.T) {
	s := newSharedSetup(t, "linux_amd64", "darwin_arm64")
	s.origin.AddTarball("net.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# net\n"), "sub/x.tf": []byte("# x\n")}))
	s.origin.AddModule("acme", "net", "aws", "1.0.0", s.origin.TarballURL("net.tar.gz"))
	names, err := oci.NewNames("providers", "modules")
	if err != nil {
		t.Fatal(err)
	}
	p, err := addrs.ParseProvider(s.origin.Addr + "/hashicorp/random")
	if err != nil {
		t.Fatal(err)
	}
	m, err := addrs.ParseModule(s.origin.Addr + "/acme/net/aws")
	if err != nil {
		t.Fatal(err)
	}
	provider, module := names.Provider(p), names.Module(m)

	dataA := filepath.Join(t.TempDir(), "data")
	a := startProcess(t, s.bin, dataA, s.origin, s.caFile, s.flags...)
	var page struct {
		Block  string `json:"oci_block"`
		Module string `json:"oci_module_source"`
	}
	if body, _, err := a.get(context.Background(), "/?format=json"); err != nil || json.Unmarshal(body, &page) != nil ||
		!strings.Contains(page.Block, `repository_template = "`+a.addr+`/providers/${hostname}/${namespace}/${type}"`) ||
		!strings.Contains(page.Module, `source = "oci://`+a.addr+`/modules/`+strings.Replace(s.origin.Addr, ":", "__", 1)+`/NAMESPACE/NAME/SYSTEM?tag=VERSION"`) {
		t.Errorf("the status page's OCI snippets: %+v, %v", page, err)
	}
	seen := ociSeen{}
	seen.pull(t, a, provider, "1.0.0")
	seen.pull(t, a, module, "1.0.0")
	if len(seen[provider]) != 3 || len(seen[module]) != 1 {
		t.Fatalf("saw %d provider and %d module documents, want 3 and 1", len(seen[provider]), len(seen[module]))
	}

	b := s.start(t)
	ociSeen{module: seen[module]}.resolve(t, "second replica, by digest", b.byDigest)
	ociSeen{}.pull(t, b, provider, "1.0.0")
	ociSeen{provider: seen[provider]}.resolve(t, "second replica, after its tag", b.byDigest)

	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := a.wait(time.Minute); err != nil {
		t.Fatalf("first replica stopped with %v", err)
	}
	s.origin.ResetHits()
	a = startProcess(t, s.bin, dataA, s.origin, s.caFile, s.flags...)
	seen.resolve(t, "after a restart", a.byDigest)
	if n := s.origin.Hits(fakeorigin.Archive) + s.origin.Hits(fakeorigin.Tarball); n != 0 {
		t.Errorf("resolving after a restart made %d downloads", n)
	}

	layout := filepath.Join(t.TempDir(), "layout")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, s.bin, "export", "--data-dir", dataA, "--format", "oci-layout", layout).CombinedOutput()
	if err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	seen.resolve(t, "in the layout", func(repo, d string) ([]byte, error) {
		return os.ReadFile(filepath.Join(layout, filepath.FromSlash(repo), "blobs", "sha256", strings.TrimPrefix(d, "sha256:")))
	})
	for _, repo := range []string{provider, module} {
		var idx ocispec.Index
		if b, err := os.ReadFile(filepath.Join(layout, filepath.FromSlash(repo), "index.json")); err != nil || json.Unmarshal(b, &idx) != nil ||
			len(idx.Manifests) != 1 || idx.Manifests[0].Annotations[ocispec.AnnotationRefName] != "1.0.0" || seen[repo][idx.Manifests[0].Digest.String()] == nil {
			t.Errorf("%s/index.json: %+v, %v", repo, idx, err)
		}
	}

	reg := ocitest.StartRegistry(t)
	pushLayout(t, layout, reg)
	client := reg.Client()
	seen.resolve(t, "in the registry", func(repo, d string) ([]byte, error) {
		req, _ := http.NewRequest("GET", "https://"+reg.Host()+"/v2/"+repo+"/manifests/"+d, nil)
		req.Header.Set("Accept", ocispec.MediaTypeImageIndex+", "+ocispec.MediaTypeImageManifest)
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return io.ReadAll(resp.Body)
	})
}
