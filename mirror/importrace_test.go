package mirror

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// heldPackages holds every package answer asked of the origin until
// release is closed, saying when one is asked (asked).
type heldPackages struct {
	Origin
	asked   chan struct{}
	release chan struct{}
}

func (o heldPackages) Package(ctx context.Context, p addrs.Provider, version string, pl addrs.Platform) (*discovery.Package, error) {
	select {
	case o.asked <- struct{}{}:
	default:
	}
	select {
	case <-o.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return o.Origin.Package(ctx, p, version, pl)
}

// A signed import of one platform of a provider version, made while the
// origin is asked for another platform of it, is not written over by the
// record that fetch stores: the import's record is stored in turn with
// the fetch (both through the version's coalesced metadata writes), so the
// version's record names both platforms and both archives are served, the
// imported one from the cache. An imported archive, which may not be
// fetched again, is never left named by no record. Neither waits for the
// other for ever.
func TestImportNotWrittenOverByAPackageFetched(t *testing.T) {
	t.Parallel()
	const (
		fetched  = "linux_amd64"
		imported = "windows_amd64"
	)
	src := newHarness(t, harnessOptions{})
	src.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{fetched, imported})
	p, v := src.provider(), mustVersion(t, "1.0.0")
	ev, err := src.engine.Evidence(t.Context(), p, v, []addrs.Platform{mustPlatform(t, imported)})
	if err != nil {
		t.Fatal(err)
	}
	in := enginetest.ImportedFrom(ev, func(pl string) []byte { return src.origin.Archive(ns, typ, "1.0.0", pl) })
	in.Version = v

	// The mirror the version is imported into, on the same origin.
	held := heldPackages{asked: make(chan struct{}, 1), release: make(chan struct{})}
	dst := &harness{t: t, origin: src.origin}
	dst.start(harnessOptions{wrapOrigin: func(o Origin) Origin { held.Origin = o; return held }})

	asked := make(chan error, 1)
	go func() {
		_, err := dst.packages("1.0.0", fetched)
		asked <- err
	}()
	select {
	case <-held.asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the origin was not asked for the package")
	}
	done := make(chan error, 1)
	go func() {
		_, err := dst.engine.AirGap().Import(context.Background(), in)
		done <- err
	}()
	// The import commits its archive, then stores its record: in turn
	// with the fetch held at the origin, it waits for it (an import that
	// did not would have stored its record by now).
	sha := src.origin.SHA256(ns, typ, "1.0.0", imported)
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := dst.store.StatBlob(sha); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the imported archive was not committed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-done:
		done <- err
	case <-time.After(300 * time.Millisecond):
	}
	close(held.release)
	for name, ch := range map[string]chan error{"the package fetch": asked, "the import": done} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not end: the fetch and the import wait for each other", name)
		}
	}

	var rec records.PackageRecord
	if _, err := dst.store.GetMeta(records.PackageKey(p, v), &rec); err != nil {
		t.Fatal(err)
	}
	if _, ok := rec.Archives[fetched]; !ok {
		t.Errorf("the record names %v, want %s (fetched)", sortedKeys(rec.Archives), fetched)
	}
	if a, ok := rec.Archives[imported]; !ok || a.SHA256 != sha {
		t.Errorf("the record names %v (%s: %+v), want %s (imported, sha256 %s)", sortedKeys(rec.Archives), imported, a, imported, sha)
	}
	hits := src.origin.ArchiveHits(ns, typ, "1.0.0", imported)
	for _, pl := range []string{fetched, imported} {
		got := dst.read(t.Context(), "1.0.0", pl)
		if got.err != nil || !bytes.Equal(got.body, src.origin.Archive(ns, typ, "1.0.0", pl)) {
			t.Errorf("%s: %v, %d bytes; want the archive served", pl, got.err, len(got.body))
		}
	}
	if n := src.origin.ArchiveHits(ns, typ, "1.0.0", imported) - hits; n != 0 {
		t.Errorf("the imported archive was fetched from the origin %d times, want it served from the cache", n)
	}
}
