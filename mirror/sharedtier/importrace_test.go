package sharedtier

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// slowTier is a fakeTier whose GetMeta answers once release is closed,
// after saying on asked that it was asked.
type slowTier struct {
	*fakeTier
	asked, release chan struct{}
}

func (t *slowTier) GetMeta(ctx context.Context, key string) (json.RawMessage, time.Time, error) {
	close(t.asked)
	<-t.release
	return t.fakeTier.GetMeta(ctx, key)
}

// A module record taken from the tier while an import stored the
// version's own record (ImportModule, under the import lock: an imported
// package may not be fetched again) does not write over the import's: the
// cache keeps the record the import stored, as it does when the origin
// is asked meanwhile (mirror/modules, "In turn with ImportModule").
func TestSharedModuleRecordKeepsAnImportStoredMeanwhile(t *testing.T) {
	const key = "module/registry.test/acme/net/aws/1.0.0"
	theirs := records.ModuleRecord{Schema: records.Schema, Module: "registry.test/acme/net/aws", Version: "1.0.0",
		Location: "https://src.test/net.tar.gz", Kind: "archive", Package: "https://src.test/net.tar.gz", SHA256: "00000000000000000000000000000000000000000000000000000000000000aa",
		Provenance: records.ProvenanceOrigin}
	ours := theirs
	ours.SHA256 = "00000000000000000000000000000000000000000000000000000000000000bb"
	ours.Provenance = records.ProvenanceImported

	tier := &slowTier{fakeTier: newFakeTier(), asked: make(chan struct{}), release: make(chan struct{})}
	raw, _ := json.Marshal(theirs)
	tier.meta[key] = raw
	store, err := cache.Open(cache.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	s, life := newSharedOn(t, tier, store, false)

	got := make(chan *records.ModuleRecord, 1)
	go func() {
		rec, _, err := s.ModuleRecord(t.Context(), key)
		if err != nil {
			t.Error(err)
		}
		got <- rec
	}()
	<-tier.asked
	// The import, as ImportModule stores its record.
	life.Imports().Lock()
	if err := store.PutMeta(key, &ours); err != nil {
		t.Fatal(err)
	}
	life.Imports().Unlock()
	close(tier.release)
	<-got

	var now records.ModuleRecord
	if _, err := store.GetMeta(key, &now); err != nil {
		t.Fatal(err)
	}
	if now.SHA256 != ours.SHA256 || now.Provenance != records.ProvenanceImported {
		t.Errorf("the cache holds the record of sha256 %s, provenance %v, after the import stored sha256 %s, imported: the tier's copy wrote over the import's",
			now.SHA256, now.Provenance, ours.SHA256)
	}
}
