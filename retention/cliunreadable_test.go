package retention

import (
	"encoding/json"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// A CLI version's SHA256SUMS record that retention cannot read (written by
// a newer release the operator rolled back from, or damaged) may be the
// only record of an archive that cannot be fetched again, as a provider's
// or module's record may (TestUnreadableRecordKeepsItsArchives): the size
// limit keeps every archive its text names, and no rule removes it.
func TestUnreadableCLIRecordKeepsItsArchives(t *testing.T) {
	t.Parallel()
	o := startReleasesOrigin(t)
	dir := t.TempDir()
	online := newCLIRig(t, o, dir, false, nil, Config{Interval: -1})
	if _, _, err := online.rel.Versions(t.Context(), releases.HashiCorp, "terraform"); err != nil {
		t.Fatal(err)
	}
	online.readAll("terraform", "1.5.7", "1.6.0")
	// 1.5.7 came in a bundle, and a newer release rewrote its record.
	key := "releases/sums/hashicorp/terraform/1.5.7"
	var s releases.Sums
	if _, err := online.store.GetMeta(key, &s); err != nil {
		t.Fatal(err)
	}
	s.Provenance = records.ProvenanceImported
	raw, err := json.Marshal(&s)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["schema"] = doc["schema"].(float64) + 1
	if err := online.store.PutMeta(key, doc); err != nil {
		t.Fatal(err)
	}
	online.stop()

	r := newCLIRig(t, o, dir, false, nil, Config{KeepVersions: 1, UnusedAfter: 1, Interval: -1})
	r.ret.rebuild()
	sha := fakeorigin.ArchiveSHA256("terraform", "1.5.7", "linux_amd64")
	if r.ret.Evictable(sha) {
		t.Error("the size limit may evict the archive of an imported CLI version whose record retention cannot read")
	}
	if _, err := r.ret.Prune(t.Context(), PruneRequest{}); err != nil {
		t.Fatal(err)
	}
	if !r.isCached("terraform", "1.5.7") {
		t.Error("a rule removed the archive of an imported CLI version whose record retention cannot read")
	}
}
