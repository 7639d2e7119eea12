package retention

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
)

// An import that fails after it committed one of its archives writes no
// record naming it: the archive is kept from the size limit while the
// import runs, and may be evicted once a rebuild after the import's end
// finds that nothing names it (it is not kept until a restart). While
// an import is under way, it stays kept: that import may write a record
// naming it.
func TestAFailedImportsArchiveIsNotKeptForever(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{ret: Config{Interval: -1}})
	local := addrs.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	zipped := enginetest.ZipOfSize(t, "thing", 4<<10, 1)
	sum := sha256.Sum256(zipped)
	sha := hex.EncodeToString(sum[:])
	other := enginetest.ZipOfSize(t, "thing", 4<<10, 2)
	var opened atomic.Int32
	in := imports.Imported{Provider: local, Version: mustVersion(t, "1.0.0"), Unsigned: true, Packages: []imports.Package{
		{
			Platform: "linux_amd64", Filename: "terraform-provider-thing_1.0.0_linux_amd64.zip", Document: -1,
			Open: func(context.Context) (io.ReadCloser, int64, error) {
				return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
			},
		},
		{
			Platform: "windows_amd64", Filename: "terraform-provider-thing_1.0.0_windows_amd64.zip", Document: -1,
			// Read whole once (its sha256), then not again: the
			// import fails as it commits it.
			Open: func(context.Context) (io.ReadCloser, int64, error) {
				if opened.Add(1) > 1 {
					return nil, 0, errors.New("the bundle's file cannot be read")
				}
				return io.NopCloser(bytes.NewReader(other)), int64(len(other)), nil
			},
		},
	}}
	if _, err := h.engine.AirGap().Import(t.Context(), in); err == nil {
		t.Fatal("an import with a package that cannot be read succeeded")
	}
	if _, err := h.store.StatBlob(sha); err != nil {
		t.Fatalf("the import did not commit its first archive before failing (%v): nothing to check", err)
	}
	// While another import is under way, a record naming the archive may
	// be about to be written.
	h.ret.ImportBegun()
	h.ret.rebuild()
	if h.ret.Evictable(sha) {
		t.Error("an archive no record names is evictable while an import is under way")
	}
	h.ret.ImportEnded()
	h.ret.rebuild()
	if !h.ret.Evictable(sha) {
		t.Error("an archive that a failed import committed, and no record names, is kept from the size limit after a rebuild")
	}
}
