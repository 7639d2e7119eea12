package retention

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// A version record retention cannot read (written by a newer release,
// which an operator rolled back from, or damaged) may be the only record
// of packages that cannot be fetched again: the size limit keeps the
// archives it names, and the rules remove nothing of it.
func TestUnreadableRecordKeepsItsArchives(t *testing.T) {
	t.Parallel()
	const size = 32 << 10
	opts := harnessOptions{cacheDir: t.TempDir(), store: cache.Options{MaxBytes: 2 * size, Evictable: func(string) bool { return false }}}
	h := newHarness(t, opts)
	local := addrs.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	shas := map[string]string{}
	for i := range 4 {
		vs := fmt.Sprintf("1.%d.0", i)
		zipped := enginetest.ZipOfSize(t, "thing", size, uint64(i+100))
		shas[vs] = sha256Hex(zipped)
		in := imports.Imported{Provider: local, Version: mustVersion(t, vs), Unsigned: true, Packages: []imports.Package{{
			Platform: "linux_amd64", Filename: "terraform-provider-thing_" + vs + "_linux_amd64.zip", Document: -1,
			Open: func(context.Context) (io.ReadCloser, int64, error) {
				return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
			},
		}}}
		if _, err := h.engine.AirGap().Import(t.Context(), in); err != nil {
			t.Fatalf("import of %s: %v", vs, err)
		}
	}
	// 1.0.0's record as a newer release writes it, 1.1.0's damaged.
	var raw json.RawMessage
	if _, err := h.store.GetMeta(packageKey(local, "1.0.0"), &raw); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["schema"] = records.Schema + 1
	if err := h.store.PutMeta(packageKey(local, "1.0.0"), doc); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.GetMeta(packageKey(local, "1.1.0"), &raw); err != nil {
		t.Fatal(err)
	}
	// Damaged, yet JSON: the record's text where its archives were.
	if err := h.store.PutMeta(packageKey(local, "1.1.0"), map[string]any{"schema": 2, "version": "1.1.0", "archives": string(raw)}); err != nil {
		t.Fatal(err)
	}

	h.stop()
	opts.ret = Config{KeepVersions: 1, UnusedAfter: 1, Interval: -1, MaxBytes: 2 * size}
	h.start(opts)
	if done, err := h.ret.Prune(t.Context(), PruneRequest{}); err != nil || len(done) != 0 {
		t.Errorf("the rules removed %v (%v)", removalNames(done), err)
	}
	if err := cachetest.Evict(t.Context(), h.store); err != nil {
		t.Fatal(err)
	}
	for vs, sha := range shas {
		if _, err := h.store.StatBlob(sha); err != nil {
			t.Errorf("the archive of imported %s: %v", vs, err)
		}
	}
}
