package mirror

import (
	"bytes"
	"context"
	"testing"
)

// A provider archive whose download URL, kept in the version's package
// record, expired (a pre-signed URL answering 403) is fetched from the
// URL the origin gives for it now, its bytes held to the signed sha256
// as ever: for a client's download and for a sync's. The mirror had
// fetched from the kept URL only, and every platform not cached before
// the URL expired failed for good, where a direct install asks the
// registry again and succeeds.
func TestExpiredDownloadURLAskedAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	if _, err := h.packages("1.0.0"); err != nil { // the record, with today's URLs
		t.Fatal(err)
	}
	h.origin.ExpireDownloadURLs()

	want := h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")
	if r := h.read(context.Background(), "1.0.0", "linux_amd64"); r.err != nil || !bytes.Equal(r.body, want) {
		t.Fatalf("after the URL expired: err %v, %d bytes; want the archive", r.err, len(r.body))
	}
	if _, err := h.engine.EnsureArchive(t.Context(), h.provider(), mustVersion(t, "1.0.0"), mustPlatform(t, "darwin_arm64")); err != nil {
		t.Fatalf("EnsureArchive after the URL expired: %v", err)
	}
	for _, pl := range []string{"linux_amd64", "darwin_arm64"} {
		if _, err := h.store.StatBlob(h.origin.SHA256(ns, typ, "1.0.0", pl)); err != nil {
			t.Errorf("%s not cached: %v", pl, err)
		}
	}
}

// The OCI side learns the sizes of a version's archives from their
// origin for its first index: at the URLs the origin gives now when the
// kept ones expired. The index had failed (502 to a pull, even of a
// cached platform) on the expired URLs of the other platforms.
func TestExpiredDownloadURLsSizedAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	if _, err := h.packages("1.0.0"); err != nil {
		t.Fatal(err)
	}
	h.origin.ExpireDownloadURLs()
	o := mustOCI(t, h.engine)
	if _, err := o.Index(t.Context(), h.provider(), mustVersion(t, "1.0.0")); err != nil {
		t.Fatalf("the index after the URLs expired: %v", err)
	}
}
