package ocidoor

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// sizeHidingTier is a shared tier in memory (harness.MemTier), as the
// bucket of replicas: what one replica puts, the others find. It hands
// an archive out without its length, as the tier's contract allows (-1).
type sizeHidingTier struct{ *harness.MemTier }

func (t sizeHidingTier) OpenArchive(ctx context.Context, sha string) (io.ReadCloser, int64, error) {
	rc, size, err := t.MemTier.OpenArchive(ctx, sha)
	if rc != nil {
		size = -1
	}
	return rc, size, err
}

// A HEAD of a blob answers its length whatever tier holds it, as the
// clients (oras, crane, containerd) take a blob's size from HEAD: on a
// replica that knows the digest only through the shared tier (another
// replica handed out the index), whether the archive is held by the tier
// alone, which does not say its length, or by the origin alone, which
// does not either. The length is the archive's, and a GET then sends the
// archive.
func TestBlobHeadLengthFromTheSharedTier(t *testing.T) {
	const ns, typ, platform = "acme", "net", "linux_amd64"
	for _, tc := range []struct {
		name string
		// inTier puts the archive in the tier before the second replica
		// asks for it; else only the origin has it.
		inTier bool
	}{
		{"archive held by the shared tier alone", true},
		{"archive held by the origin alone", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tier := sizeHidingTier{harness.NewMemTier()}
			first := newRig(t, rigOptions{engine: mirror.Config{Shared: tier}})
			first.origin.AddProvider(ns, typ, []string{"1.0.0"}, twoPlatforms)
			zip := first.origin.Archive(ns, typ, "1.0.0", platform)
			blob := "/v2/providers/" + originHost + "/" + ns + "/" + typ + "/blobs/" + sha256Digest(zip)
			tag, _ := oci.Tag("1.0.0")
			if _, err := first.repo(ns, typ, auth.EmptyCredential).Resolve(context.Background(), tag); err != nil {
				t.Fatal(err)
			}
			if tc.inTier {
				resp := first.do(http.MethodGet, blob)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("GET on the first replica: %s", resp.Status)
				}
			}
			first.waitIdle() // its records and archive put in the tier
			first.origin.SetArchiveLengthHidden(true)
			originHits := first.origin.TotalHits()

			second := &rig{t: t, origin: first.origin}
			second.start(rigOptions{engine: mirror.Config{Shared: tier}})
			head := second.do(http.MethodHead, blob)
			head.Body.Close()
			if head.StatusCode != http.StatusOK || head.ContentLength != int64(len(zip)) {
				t.Errorf("HEAD on the second replica: %s, length %d; want 200 and the archive's %d", head.Status, head.ContentLength, len(zip))
			}
			resp := second.do(http.MethodGet, blob)
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(got, zip) {
				t.Errorf("GET on the second replica: %s, %d bytes, %v; want the %d of the archive", resp.Status, len(got), err, len(zip))
			}
			if tc.inTier && first.origin.TotalHits() != originHits {
				t.Errorf("the second replica asked the origin %d times for what the tier holds", first.origin.TotalHits()-originHits)
			}
			second.waitIdle()
		})
	}
}
