package retention

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
)

// An imported version whose archive a read found damaged is never served
// again and cannot be fetched again: the operator prunes it by name, as
// the damage log line and docs/operations.md say. The prune removes the
// damaged copy with the version: nothing names it any more, so nothing
// would ever replace it, and the cache's count of damaged archives (the
// tfmirror_cache_damaged_archives gauge, the status page's Health block)
// would stay above zero for good.
func TestNamedPruneRemovesTheDamagedArchiveOfAnImport(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{ret: Config{Interval: -1}})
	local := addrs.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	zipped := enginetest.ZipOfSize(t, "thing", 32<<10, 7)
	sha := sha256Hex(zipped)
	in := imports.Imported{Provider: local, Version: mustVersion(t, "1.0.0"), Unsigned: true, Packages: []imports.Package{{
		Platform: "linux_amd64", Filename: "terraform-provider-thing_1.0.0_linux_amd64.zip", Document: -1,
		Open: func(context.Context) (io.ReadCloser, int64, error) {
			return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
		},
	}}}
	if _, err := h.engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	// A read found it damaged where it is stored.
	if err := cachetest.MarkDamaged(h.store, sha); err != nil {
		t.Fatal(err)
	}
	if n := h.store.DamagedArchives(); n != 1 {
		t.Fatalf("DamagedArchives = %d before the prune, want 1", n)
	}

	done, err := h.ret.Prune(t.Context(), PruneRequest{Provider: &local, Versions: []string{"1.0.0"}})
	if err != nil || len(done) != 1 || !done[0].Unlisted {
		t.Fatalf("Prune = %+v, %v; want 1.0.0 removed and unlisted", done, err)
	}
	if n := h.store.DamagedArchives(); n != 0 {
		t.Errorf("DamagedArchives = %d after the version was pruned, want 0: the damaged copy is named by nothing and kept for good", n)
	}
	if archives, bytes := h.store.Stats(); archives != 0 || bytes != 0 {
		t.Errorf("Stats = %d archives, %d bytes after the only version was pruned, want 0, 0", archives, bytes)
	}
}
