package mirror

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// Platforms a client makes up, which the version list does not offer,
// are answered not found without growing the version's stored package
// record: a stranger choosing names must not make what the cache keeps
// for a version grow with every name.
func TestMadeUpPlatformsDoNotGrowThePackageRecord(t *testing.T) {
	t.Parallel()
	const version = "1.0.0"
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{version}, platforms)
	if _, err := h.packages(version); err != nil {
		t.Fatalf("package metadata: %v", err)
	}
	const asked = 200
	for i := range asked {
		pl := fmt.Sprintf("madeup%d_arch%d", i, i)
		if r := h.read(context.Background(), version, pl); !errors.Is(r.err, records.ErrPlatformNotFound) {
			t.Fatalf("%s: opened %v, err %v; want ErrPlatformNotFound", pl, r.opened, r.err)
		}
		if _, err := h.packages(version, pl); err != nil {
			t.Fatalf("%s: package metadata: %v", pl, err)
		}
	}
	rec, ok := h.engine.memo.CachedPackage(h.provider(), mustVersion(t, version))
	if !ok {
		t.Fatal("no package record cached")
	}
	if len(rec.Missing) > len(platforms) || len(rec.MissingChecked) > len(platforms) {
		t.Fatalf("after %d made-up platforms the record holds %d missing platforms (%d checks), want at most %d",
			asked, len(rec.Missing), len(rec.MissingChecked), len(platforms))
	}
	if len(rec.Archives) != len(platforms) {
		t.Fatalf("record has %d archives, want %d", len(rec.Archives), len(platforms))
	}
}

// A record that an earlier release stored with made-up platforms found
// missing sheds them the next time the version's record is fetched and
// written again.
func TestPackageRecordShedsMadeUpPlatforms(t *testing.T) {
	t.Parallel()
	const version = "1.0.0"
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{version}, platforms)
	if _, err := h.packages(version, platforms[0]); err != nil {
		t.Fatalf("package metadata: %v", err)
	}
	v := mustVersion(t, version)
	rec, ok := h.engine.memo.CachedPackage(h.provider(), v)
	if !ok {
		t.Fatal("no package record cached")
	}
	polluted := rec.Clone()
	polluted.MissingChecked = map[string]records.MissingCheck{}
	for i := range 50 {
		pl := fmt.Sprintf("madeup%d_arch", i)
		polluted.Missing = append(polluted.Missing, pl)
		polluted.MissingChecked[pl] = records.MissingCheck{At: time.Now()}
	}
	if err := h.engine.memo.Put(records.PackageKey(h.provider(), v), polluted); err != nil {
		t.Fatal(err)
	}
	if _, err := h.packages(version, platforms[1]); err != nil {
		t.Fatalf("package metadata: %v", err)
	}
	rec, ok = h.engine.memo.CachedPackage(h.provider(), v)
	if !ok {
		t.Fatal("no package record cached")
	}
	if len(rec.Missing) != 0 || len(rec.MissingChecked) != 0 {
		t.Fatalf("after a fetch the record still holds %d missing platforms (%d checks), want none: %v",
			len(rec.Missing), len(rec.MissingChecked), rec.Missing)
	}
	if len(rec.Archives) != 2 {
		t.Fatalf("record has %d archives, want 2", len(rec.Archives))
	}
}
