package records

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
)

func TestNormalModuleKey(t *testing.T) {
	for _, c := range []struct{ prefix, key, want string }{
		{"module/", "module/example.com/Acme/VPC/aws/1.0.0", "module/example.com/acme/vpc/aws/1.0.0"},
		{"modversions/", "modversions/example.com/Acme/VPC/aws", "modversions/example.com/acme/vpc/aws"},
		{"modzip/", "modzip/example.com:8443/a/b/c/v1.0.0-RC1", "modzip/example.com:8443/a/b/c/v1.0.0-RC1"},
		{"release/absent/module/", "release/absent/module/h/NS/N/S/1.0.0", "release/absent/module/h/ns/n/s/1.0.0"},
		{"lastuse/module/", "lastuse/module/h/NS/N", "lastuse/module/h/NS/N"}, // not a module address
	} {
		got, differs := NormalModuleKey(c.prefix, c.key)
		if got != c.want || differs != (c.want != c.key) {
			t.Errorf("NormalModuleKey(%q, %q) = %q, %v; want %q", c.prefix, c.key, got, differs, c.want)
		}
	}
}

// The documents an earlier release kept under a module's spelling are
// moved to its normal form; two of one key are resolved to the one that
// serves (a module record whose package is cached), the other set aside;
// what the module side shares is offered under the normal key; nothing
// is left under the spelling, nothing is lost.
func TestNormalizeModuleKeys(t *testing.T) {
	store, err := cache.Open(cache.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sum := sha256.Sum256([]byte("package"))
	w, err := store.NewBlobWriter(hex.EncodeToString(sum[:]))
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("package"))
	info, err := w.Commit("")
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	sha := info.SHA256
	put := func(key string, doc any) {
		t.Helper()
		if err := store.PutMeta(key, doc); err != nil {
			t.Fatal(err)
		}
	}
	put("module/h/Acme/Net/aws/1.0.0", ModuleRecord{Schema: Schema, Module: "h/Acme/Net/aws", Version: "1.0.0", SHA256: sha})
	put("module/h/acme/net/aws/1.0.0", ModuleRecord{Schema: Schema, Module: "h/acme/net/aws", Version: "1.0.0", SHA256: "ff"})
	put("module/h/Acme/Net/aws/2.0.0", ModuleRecord{Schema: Schema, Module: "h/Acme/Net/aws", Version: "2.0.0"})
	put("modzip/h/Acme/Net/aws/1.0.0", ModuleZipRecord{Schema: Schema, Module: "h/Acme/Net/aws", Version: "1.0.0", Package: sha})
	put("release/absent/module/h/Acme/Net/aws/3.0.0", map[string]string{"at": "then"})
	put("module/h/other/net/aws/1.0.0", ModuleRecord{Schema: Schema, Module: "h/other/net/aws", Version: "1.0.0"})

	shared := map[string]bool{}
	n, err := NormalizeModuleKeys(store, func(key string, _ any) { shared[key] = true }, slog.New(slog.DiscardHandler))
	if err != nil || n != 4 {
		t.Fatalf("moved %d, %v; want 4", n, err)
	}
	var keys []string
	for _, prefix := range append(slices.Clone(ModuleKeyPrefixes), ModuleKeyAside) {
		store.ScanMeta(prefix, func(key string, _ time.Time, _ json.RawMessage) error { keys = append(keys, key); return nil })
	}
	want := []string{"module/h/acme/net/aws/1.0.0", "module/h/acme/net/aws/2.0.0", "module/h/other/net/aws/1.0.0",
		"modzip/h/acme/net/aws/1.0.0", "release/absent/module/h/acme/net/aws/3.0.0", ModuleKeyAside + "module/h/acme/net/aws/1.0.0"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys %q\nwant %q", keys, want)
	}
	var rec ModuleRecord
	if _, err := store.GetMeta("module/h/acme/net/aws/1.0.0", &rec); err != nil || rec.SHA256 != sha || rec.Module != "h/acme/net/aws" {
		t.Errorf("kept %+v, %v; want the record whose package is cached, naming the normal form", rec, err)
	}
	var aside ModuleRecord
	if _, err := store.GetMeta(ModuleKeyAside+"module/h/acme/net/aws/1.0.0", &aside); err != nil || aside.SHA256 != "ff" {
		t.Errorf("set aside %+v, %v; want the other", aside, err)
	}
	var zr ModuleZipRecord
	if _, err := store.GetMeta("modzip/h/acme/net/aws/1.0.0", &zr); err != nil || zr.Module != "h/Acme/Net/aws" {
		t.Errorf("zip record %+v, %v; want it moved naming the module as recorded", zr, err)
	}
	wantShared := map[string]bool{"module/h/acme/net/aws/1.0.0": true, "module/h/acme/net/aws/2.0.0": true, "modzip/h/acme/net/aws/1.0.0": true}
	if !maps.Equal(shared, wantShared) {
		t.Errorf("shared %v, want %v", shared, wantShared)
	}
	if n, err := NormalizeModuleKeys(store, nil, slog.New(slog.DiscardHandler)); n != 0 || err != nil {
		t.Errorf("again: moved %d, %v; want nothing", n, err)
	}
}

// A module record asked for in three spellings by an earlier release:
// the one that serves best is kept under the normal key, and each of the
// other two is set aside, none written over the other (what is set aside
// at the normal key's aside name by one move is not replaced by the
// next move's).
func TestNormalizeModuleKeysSetsAsideEachSpelling(t *testing.T) {
	store, err := cache.Open(cache.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	commit := func(content string) string {
		t.Helper()
		sum := sha256.Sum256([]byte(content))
		w, err := store.NewBlobWriter(hex.EncodeToString(sum[:]))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		w.Write([]byte(content))
		info, err := w.Commit("")
		if err != nil {
			t.Fatal(err)
		}
		return info.SHA256
	}
	fetched, imported := commit("fetched"), commit("imported")
	lost := hex.EncodeToString(make([]byte, 32)) // an import whose package the cache lost
	put := func(key string, rec ModuleRecord) {
		t.Helper()
		if err := store.PutMeta(key, rec); err != nil {
			t.Fatal(err)
		}
	}
	// Scanned in this order: "ACME" < "Acme" < "acme".
	put("module/h/ACME/net/aws/1.0.0", ModuleRecord{Schema: Schema, Module: "h/ACME/net/aws", Version: "1.0.0", SHA256: fetched})
	put("module/h/Acme/net/aws/1.0.0", ModuleRecord{Schema: Schema, Module: "h/Acme/net/aws", Version: "1.0.0", SHA256: imported, Provenance: ProvenanceImported})
	put("module/h/acme/net/aws/1.0.0", ModuleRecord{Schema: Schema, Module: "h/acme/net/aws", Version: "1.0.0", SHA256: lost, Provenance: ProvenanceImported})

	for range 2 { // a second start finds nothing more to move, and loses nothing
		if _, err := NormalizeModuleKeys(store, nil, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
	}
	var kept ModuleRecord
	if _, err := store.GetMeta("module/h/acme/net/aws/1.0.0", &kept); err != nil || kept.SHA256 != imported {
		t.Errorf("kept %+v, %v; want the import whose package is cached", kept, err)
	}
	found := map[string]int{}
	store.ScanMeta(ModuleKeyAside, func(key string, _ time.Time, raw json.RawMessage) error {
		var rec ModuleRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Errorf("%s: %v", key, err)
		}
		found[rec.SHA256]++
		return nil
	})
	if want := map[string]int{fetched: 1, lost: 1}; !maps.Equal(found, want) {
		t.Errorf("set aside (by package) %v, want each of the two not kept once: %v", found, want)
	}
}

// The last use of a module version kept under two spellings is the
// later of the two once moved: the use of the spelling clients use today
// is not set aside for that of one used once long ago, which would make
// the version look unused to retention and have it removed while in use.
func TestNormalizeModuleKeysKeepsTheLaterUse(t *testing.T) {
	store, err := cache.Open(cache.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	type use struct {
		At time.Time `json:"at"`
	}
	longAgo, today := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name        string
		upper, norm time.Time
	}{{"spelt in capitals today", today, longAgo}, {"spelt in lowercase today", longAgo, today}} {
		t.Run(c.name, func(t *testing.T) {
			normal := "lastuse/module/h/acme/net/aws/1.0.0"
			if err := store.PutMeta("lastuse/module/h/Acme/Net/aws/1.0.0", use{c.upper}); err != nil {
				t.Fatal(err)
			}
			if err := store.PutMeta(normal, use{c.norm}); err != nil {
				t.Fatal(err)
			}
			if _, err := NormalizeModuleKeys(store, nil, slog.New(slog.DiscardHandler)); err != nil {
				t.Fatal(err)
			}
			var got use
			if _, err := store.GetMeta(normal, &got); err != nil || !got.At.Equal(today) {
				t.Errorf("last use %v, %v; want the later, %v", got.At, err, today)
			}
		})
	}
}

// A start that stopped after it wrote a document under its normal key,
// before it removed it under the spelling, leaves the same document
// twice: the next start removes the spelling's and sets nothing aside.
func TestNormalizeModuleKeysAfterAStartThatStopped(t *testing.T) {
	store, err := cache.Open(cache.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, key := range []string{"module/h/Acme/net/aws/1.0.0", "module/h/acme/net/aws/1.0.0"} {
		if err := store.PutMeta(key, ModuleRecord{Schema: Schema, Module: "h/acme/net/aws", Version: "1.0.0", Location: "https://example.com/x.tgz"}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := NormalizeModuleKeys(store, nil, slog.New(slog.DiscardHandler)); n != 1 || err != nil {
		t.Fatalf("moved %d, %v; want 1", n, err)
	}
	var keys []string
	for _, prefix := range []string{"module/", ModuleKeyAside} {
		store.ScanMeta(prefix, func(key string, _ time.Time, _ json.RawMessage) error { keys = append(keys, key); return nil })
	}
	if want := []string{"module/h/acme/net/aws/1.0.0"}; !slices.Equal(keys, want) {
		t.Errorf("keys %q, want %q", keys, want)
	}
}

// The release time of a module version an earlier release dated under
// two spellings (the latest listing of each that did not yet name it) is
// the later of the two once moved: the version was released after both,
// and the earlier would let a version younger than the minimum release
// age through.
func TestNormalizeModuleKeysKeepsTheLaterAbsence(t *testing.T) {
	store, err := cache.Open(cache.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	type absent struct {
		Schema int       `json:"schema"`
		At     time.Time `json:"at"`
	}
	longAgo, lately := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name        string
		upper, norm time.Time
	}{{"the spelling in capitals listed lately", lately, longAgo}, {"the lowercase spelling listed lately", longAgo, lately}} {
		t.Run(c.name, func(t *testing.T) {
			normal := "release/absent/module/h/acme/net/aws/1.0.0"
			if err := store.PutMeta("release/absent/module/h/Acme/Net/aws/1.0.0", absent{1, c.upper}); err != nil {
				t.Fatal(err)
			}
			if err := store.PutMeta(normal, absent{1, c.norm}); err != nil {
				t.Fatal(err)
			}
			if _, err := NormalizeModuleKeys(store, nil, slog.New(slog.DiscardHandler)); err != nil {
				t.Fatal(err)
			}
			var got absent
			if _, err := store.GetMeta(normal, &got); err != nil || !got.At.Equal(lately) {
				t.Errorf("absent at %v, %v; want the later, %v", got.At, err, lately)
			}
		})
	}
}

// failingKeys is a KeyStore whose writes (puts and deletes) fail after
// the first allowed ones, as on a disk that fills up, or never happen, as
// in a process killed there.
type failingKeys struct {
	KeyStore
	allowed int
}

var errStopped = errors.New("write refused: no space left on device")

func (f *failingKeys) write() error {
	if f.allowed <= 0 {
		return errStopped
	}
	f.allowed--
	return nil
}

func (f *failingKeys) PutMeta(key string, v any) error {
	if err := f.write(); err != nil {
		return err
	}
	return f.KeyStore.PutMeta(key, v)
}

func (f *failingKeys) DeleteMeta(key string) error {
	if err := f.write(); err != nil {
		return err
	}
	return f.KeyStore.DeleteMeta(key)
}

// A module asked for in three spellings, each with a record of one
// version: the one whose package cannot be had again (an import whose
// package the cache lost) under the normal key, one fetched from the
// origin and one imported, both cached, under the others. Each record is
// kept, under the normal key (the imported package, cached) or set
// aside, whether the move runs whole, or stops after any of its writes
// (a full disk, a kill) and runs again at the next start.
func TestNormalizeModuleKeysKeepsEveryRecord(t *testing.T) {
	const (
		normal = "module/h/acme/net/aws/1.0.0"
		upper  = "module/h/ACME/net/aws/1.0.0" // scanned first
		mixed  = "module/h/Acme/net/aws/1.0.0"
	)
	setup := func(t *testing.T) (*cache.Store, map[string]string) {
		store, err := cache.Open(cache.Options{InMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		fetched, err := cachetest.PutBlob(store, []byte("fetched package"))
		if err != nil {
			t.Fatal(err)
		}
		imported, err := cachetest.PutBlob(store, []byte("imported package"))
		if err != nil {
			t.Fatal(err)
		}
		lost := strings.Repeat("f", 64) // imported, its package gone
		for key, rec := range map[string]ModuleRecord{
			normal: {Schema: Schema, Module: "h/acme/net/aws", Version: "1.0.0", SHA256: lost, Provenance: ProvenanceImported},
			upper:  {Schema: Schema, Module: "h/ACME/net/aws", Version: "1.0.0", SHA256: fetched},
			mixed:  {Schema: Schema, Module: "h/Acme/net/aws", Version: "1.0.0", SHA256: imported, Provenance: ProvenanceImported},
		} {
			if err := store.PutMeta(key, rec); err != nil {
				t.Fatal(err)
			}
		}
		return store, map[string]string{"lost": lost, "fetched": fetched, "imported": imported}
	}
	// kept returns the sha256 of every module record of the version,
	// under its normal key and set aside.
	kept := func(t *testing.T, store *cache.Store) (served string, all []string) {
		t.Helper()
		for _, prefix := range []string{"module/", ModuleKeyAside} {
			store.ScanMeta(prefix, func(key string, _ time.Time, raw json.RawMessage) error {
				var rec ModuleRecord
				if err := json.Unmarshal(raw, &rec); err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				if key == normal {
					served = rec.SHA256
				}
				all = append(all, rec.SHA256)
				return nil
			})
		}
		slices.Sort(all)
		return served, slices.Compact(all)
	}
	quiet := slog.New(slog.DiscardHandler)
	// Six writes move the two spellings, when nothing stops them.
	for stopAfter := 0; stopAfter <= 7; stopAfter++ {
		t.Run(fmt.Sprintf("stopped after %d writes", stopAfter), func(t *testing.T) {
			store, sha := setup(t)
			if _, err := NormalizeModuleKeys(&failingKeys{KeyStore: store, allowed: stopAfter}, nil, quiet); err != nil && !errors.Is(err, errStopped) {
				t.Fatalf("first start: %v", err)
			}
			if _, err := NormalizeModuleKeys(store, nil, quiet); err != nil {
				t.Fatalf("next start: %v", err)
			}
			want := []string{sha["fetched"], sha["imported"], sha["lost"]}
			slices.Sort(want)
			served, all := kept(t, store)
			if !slices.Equal(all, want) {
				t.Errorf("records kept name %q, want all three %q", all, want)
			}
			if served != sha["imported"] {
				t.Errorf("the normal key's record names %s, want the imported package, cached (%s)", served, sha["imported"])
			}
			for _, k := range []string{upper, mixed} {
				if _, err := store.GetMeta(k, new(json.RawMessage)); !errors.Is(err, cache.ErrNotFound) {
					t.Errorf("%s still stored (%v)", k, err)
				}
			}
		})
	}
}
