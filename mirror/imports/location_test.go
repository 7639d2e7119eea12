package imports_test

import (
	"net"
	"sync/atomic"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
)

// TestImportedDownloadURLNotContacted: the download_url an import gives
// for an archive (a bundle's evidence file says it, and no signature
// covers it) is never contacted: before, once the imported archive left
// the cache (damaged and removed, or missing from a shared store's
// bucket), the mirror fetched it again from the host the bundle named, a
// host that neither the operator nor an origin chose. An imported
// archive cannot be fetched again (as retention already holds).
func TestImportedDownloadURLNotContacted(t *testing.T) {
	t.Parallel()
	src, v, ev := sourceEvidence(t)
	body := func(pl string) []byte { return src.Origin.Archive(harness.NS, harness.Type, "1.0.0", pl) }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	// A connected mirror, whose origin serves the version too.
	dst := harness.New(t, harness.Options{})
	dst.Origin.AddProvider(harness.NS, harness.Type, []string{"1.0.0"}, harness.Platforms)
	in := enginetest.ImportedFrom(ev, body)
	in.Version = v
	for i := range in.Packages {
		in.Packages[i].DownloadURL = "https://" + ln.Addr().String() + "/named-by-the-bundle.zip"
	}
	if _, err := dst.Engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	pkg, err := dst.Packages("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range pkg.Archives {
		if a.URL != "" {
			t.Errorf("%s is kept with the import's download URL %q", a.Filename, a.URL)
		}
		if err := cache.RigOf(dst.Store).DeleteBlob(a.SHA256); err != nil {
			t.Fatal(err)
		}
	}
	a := dst.Read(t.Context(), "1.0.0", "linux_amd64")
	if n := conns.Load(); n > 0 {
		t.Errorf("the host the import named was contacted %d times (read: %v)", n, a.Err)
	}
}
