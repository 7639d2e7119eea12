package retention

import (
	"testing"
)

// An archive an import is about to commit (Importing) is kept from the
// size limit until a rebuild reads the import's record. A rebuild that
// ran before the import wrote its record, but read another record naming
// the same archive (one that can be fetched again: a module version of
// the origin's whose package is byte for byte the one imported for
// another version, as two tags of one commit give), must not take the
// protection away: the import's record, written a moment later, names an
// archive that cannot be fetched again for it.
func TestImportingStaysProtectedThroughARebuildThatMissedItsRecord(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{ret: Config{Interval: -1}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	h.readAll("1.0.0")
	sha := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
	h.ret.rebuild()
	if !h.ret.Evictable(sha) {
		t.Fatal("an archive that can be fetched again is kept from the size limit")
	}
	// An import of the same bytes begins; a rebuild runs before its
	// record is written.
	h.ret.ImportBegun()
	h.ret.Importing(sha)
	h.ret.rebuild()
	if h.ret.Evictable(sha) {
		t.Error("the size limit may evict an archive an import is committing, once a rebuild read another version's record naming it")
	}
}
