package ocidoor

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// One cold archive asked at once through the network mirror and as an
// OCI blob is downloaded from its origin once, and both get its bytes.
func TestTwoDoorsOneDownload(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.origin.AddProvider("acme", "net", []string{"2.0.0"}, twoPlatforms)
	ctx := context.Background()
	repo := r.repo("acme", "net", auth.EmptyCredential)
	desc, err := repo.Resolve(ctx, "2.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := content.FetchAll(ctx, repo, desc); err != nil {
		t.Fatal(err)
	}
	want := r.origin.Archive("acme", "net", "2.0.0", "linux_amd64")
	// The layer's digest, as the platform's manifest names it (fetching
	// the manifest would download the archive).
	layer := "sha256:" + r.origin.SHA256("acme", "net", "2.0.0", "linux_amd64")
	release := r.origin.GateArchives()
	defer release()

	resp := r.do(http.MethodGet, "/"+originHost+"/acme/net/terraform-provider-net_2.0.0_linux_amd64.zip")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("network mirror: %s", resp.Status)
	}
	if c := resp.Header.Get("X-Tfmirror-Cache"); c != "miss" {
		t.Fatalf("network mirror: cache %q, origin hits %d", c, r.origin.ArchiveHits("acme", "net", "2.0.0", "linux_amd64"))
	}
	r.origin.WaitArchiveStarted()
	p, err := addrs.NewProvider(originHost, "acme", "net")
	if err != nil {
		t.Fatal(err)
	}
	blob := r.do(http.MethodGet, "/v2/"+r.names.Provider(p)+"/blobs/"+layer)
	defer blob.Body.Close()
	if blob.StatusCode != http.StatusOK || blob.Header.Get("X-Tfmirror-Cache") != "coalesced" {
		t.Fatalf("OCI blob during the download: %s, cache %q; want 200, coalesced", blob.Status, blob.Header.Get("X-Tfmirror-Cache"))
	}
	release()
	for door, body := range map[string]io.Reader{"network mirror": resp.Body, "OCI blob": blob.Body} {
		got, err := io.ReadAll(body)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, err %v", door, len(got), err)
		}
	}
	if n := r.origin.ArchiveHits("acme", "net", "2.0.0", "linux_amd64"); n != 1 {
		t.Errorf("%d origin downloads for the two doors, want 1", n)
	}
}
