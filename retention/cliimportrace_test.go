package retention

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// A prune naming a CLI version that cannot be fetched again, while an
// import of that very version is under way (it found one archive cached
// before the prune began, and copies another), leaves the cache whole:
// the version listed with its archives, or neither. The prune removes
// the version's SHA256SUMS only once the import ended, as it removes an
// engine's version under its import lock.
func TestNamedPruneOfACLIVersionBeingImported(t *testing.T) {
	t.Parallel()
	o, err := fakeorigin.StartReleases()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	o.Add("hashicorp", "terraform", "1.7.0", "linux_amd64", "darwin_arm64")
	dir := t.TempDir()
	online := newCLIRig(t, o, dir, false, nil, Config{Interval: -1})
	if _, _, err := online.rel.Versions(t.Context(), releases.HashiCorp, "terraform"); err != nil {
		t.Fatal(err)
	}
	online.readAll("terraform", "1.7.0") // linux_amd64 only
	var s releases.Sums
	if _, err := online.store.GetMeta("releases/sums/hashicorp/terraform/1.7.0", &s); err != nil {
		t.Fatal(err)
	}
	online.stop()

	r := newCLIRig(t, o, dir, true, nil, Config{Interval: -1})
	r.ret.Close() // no background rebuild
	archive := func(platform string, wait func()) releases.ImportedArchive {
		data := o.Archive("terraform", "1.7.0", platform)
		return releases.ImportedArchive{Filename: fakeorigin.ArchiveName("terraform", "1.7.0", platform),
			Open: func(context.Context) (io.ReadCloser, int64, error) {
				if wait != nil {
					wait()
				}
				return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
			}}
	}
	// darwin_arm64's bytes are read twice: checked, then copied; the copy
	// waits, once linux_amd64 (cached) was taken as present.
	copying, release := make(chan struct{}), make(chan struct{})
	var opens sync.Mutex
	n := 0
	in := releases.Imported{Publisher: releases.HashiCorp, Product: "terraform", Version: "1.7.0", Document: s.Document, Signature: s.Signature,
		Archives: []releases.ImportedArchive{archive("linux_amd64", nil), archive("darwin_arm64", func() {
			opens.Lock()
			n++
			second := n == 2
			opens.Unlock()
			if second {
				close(copying)
				<-release
			}
		})}}
	imported := make(chan error, 1)
	go func() {
		_, err := r.rel.AirGap().Import(context.Background(), in)
		imported <- err
	}()
	select {
	case <-copying:
	case err := <-imported:
		t.Fatalf("the import ended before copying darwin_arm64: %v", err)
	}
	pruned := make(chan error, 1)
	go func() {
		_, err := r.ret.Prune(context.Background(), PruneRequest{CLI: tfAddr, Versions: []string{"1.7.0"}})
		pruned <- err
	}()
	// The prune waits for the import; one that does not has ended by now.
	select {
	case <-pruned:
		pruned <- nil
	case <-time.After(3 * time.Second):
	}
	close(release)
	if err := <-imported; err != nil {
		t.Fatalf("import: %v", err)
	}
	if err := <-pruned; err != nil {
		t.Fatalf("prune: %v", err)
	}
	_, err = r.rel.Sums(t.Context(), releases.HashiCorp, "terraform", "1.7.0")
	switch {
	case err == nil && !r.isCached("terraform", "1.7.0"):
		t.Error("1.7.0 is listed, imported, without its linux_amd64 archive, which cannot be fetched again")
	case err != nil && !errors.Is(err, releases.ErrNotFound):
		t.Fatal(err)
	}
}
