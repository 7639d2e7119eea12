package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// TestManyRangesThroughEveryDoor: through the serve's own wiring, a
// request naming thousands of ranges of a cached archive is answered with
// the archive whole, once, on the network mirror and the OCI door (a
// provider archive is a blob there): never a part per range, each a chunk
// read from the cache. One range is still a 206 of its bytes.
func TestManyRangesThroughEveryDoor(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{ArchiveSize: 3 << 20})
	origin.AddProvider("hashicorp", "random", []string{"1.0.0"}, []string{"linux_amd64"})
	tm := startMirror(t, origin, t.TempDir(), nil)
	want := origin.Archive("hashicorp", "random", "1.0.0", "linux_amd64")
	archive := tfRegistry + "/hashicorp/random/terraform-provider-random_1.0.0_linux_amd64.zip"
	if resp, body, err := tm.get(archive); err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(body, want) {
		t.Fatalf("archive: %v %v", resp, err)
	}
	tm.idle()
	repo := "/v2/providers/" + tfRegistry + "/hashicorp/random"
	_, body, err := tm.get(repo+"/manifests/1.0.0", "Accept", ocispec.MediaTypeImageIndex)
	var idx ocispec.Index
	if err != nil || json.Unmarshal(body, &idx) != nil || len(idx.Manifests) != 1 {
		t.Fatalf("index: %v %s", err, body)
	}
	_, body, err = tm.get(repo+"/manifests/"+idx.Manifests[0].Digest.String(), "Accept", ocispec.MediaTypeImageManifest)
	var m ocispec.Manifest
	if err != nil || json.Unmarshal(body, &m) != nil || len(m.Layers) != 1 {
		t.Fatalf("manifest: %v %s", err, body)
	}
	blob := repo + "/blobs/" + m.Layers[0].Digest.String()

	var attack strings.Builder
	attack.WriteString("bytes=0-0")
	for attack.Len() < 60000 {
		fmt.Fprintf(&attack, ",%d-%d,0-0", 1<<20, 1<<20)
	}
	for _, path := range []string{archive, blob} {
		resp, body, err := tm.get(path, "Range", attack.String())
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(body, want) {
			t.Errorf("%s with %d ranges: %v, status %v, %d bytes; want 200 and the archive whole", path, strings.Count(attack.String(), ",")+1, err, resp.StatusCode, len(body))
		}
		resp, body, err = tm.get(path, "Range", "bytes=100-199")
		if err != nil || resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, want[100:200]) {
			t.Errorf("%s with one range: %v, status %v; want 206 and its bytes", path, err, resp.StatusCode)
		}
	}
}
