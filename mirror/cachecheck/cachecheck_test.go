package cachecheck_test

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/cachecheck"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// checkMetrics keeps the last check of the whole cache it was told of.
type checkMetrics struct {
	enginetest.NoMetrics
	mu   sync.Mutex
	last cachecheck.Summary
}

func (m *checkMetrics) CacheChecked(at time.Time, checked, failed int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last = cachecheck.Summary{At: at, Checked: checked, Failed: failed}
}

func (m *checkMetrics) get() cachecheck.Summary {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// A check of the whole cache reads every cached package, provider
// packages against their stored evidence and module packages against
// their sha256, without asking the origin; it finds exactly the packages
// whose bytes were damaged on disk, and keeps them.
func TestVerifyCache(t *testing.T) {
	t.Parallel()
	met := &checkMetrics{}
	h := harness.New(t, harness.Options{Config: harness.Config{Metrics: met}})
	h.Origin.AddProvider(harness.NS, harness.Type, []string{"1.0.0", "2.0.0"}, []string{"linux_amd64"})
	h.ReadAll("1.0.0", "2.0.0")
	h.Origin.AddTarball("vpc-1.0.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	h.Origin.AddModule("acme", "vpc", "aws", "1.0.0", h.Origin.TarballURL("vpc-1.0.0.tar.gz"))
	mod, _, err := h.ReadModule("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	h.WaitIdle()

	check := func() map[string]cachecheck.Result {
		t.Helper()
		h.Origin.ResetHits()
		got := map[string]cachecheck.Result{}
		if err := h.Engine.CacheChecker().VerifyCache(t.Context(), func(c cachecheck.Result) {
			got[fmt.Sprintf("%s %s %s %s", c.Kind, c.Address, c.Version, c.Platform)] = c
		}); err != nil {
			t.Fatal(err)
		}
		if n := h.Origin.TotalHits(); n != 0 {
			t.Errorf("the check asked the origin %d times", n)
		}
		return got
	}
	if _, ok := h.Engine.CacheChecker().LastCacheCheck(); ok {
		t.Error("a check is remembered before any ran")
	}
	p := h.Provider().String()
	want := map[string]string{ // what each package is checked by
		"provider " + p + " 1.0.0 linux_amd64":          cachecheck.CheckedEvidence,
		"provider " + p + " 2.0.0 linux_amd64":          cachecheck.CheckedEvidence,
		"module " + harness.Module.String() + " 1.0.0 ": cachecheck.CheckedSHA256,
	}
	got := check()
	if len(got) != len(want) {
		t.Fatalf("checked %v, want %v", got, want)
	}
	for name, by := range want {
		if c, ok := got[name]; !ok || c.By != by || c.Problem != "" || c.Bytes <= 0 {
			t.Errorf("%s: %+v, want intact, checked by %s", name, c, by)
		}
	}

	// The provider archive damaged as a failing disk does (the store
	// finds it as it reads it), the module package changed where only
	// its sha256 tells.
	damaged := h.Origin.SHA256(harness.NS, harness.Type, "2.0.0", "linux_amd64")
	if err := cachetest.FlipBlobByte(h.Store, damaged, 100); err != nil {
		t.Fatal(err)
	}
	if err := cachetest.AlterBlobByte(h.Store, mod.SHA256, 100); err != nil {
		t.Fatal(err)
	}
	got = check()
	for name := range want {
		c := got[name]
		bad := c.SHA256 == damaged || c.SHA256 == mod.SHA256
		if bad && (c.Reason != string(verify.ReasonChecksum) || c.Problem == "") {
			t.Errorf("%s was damaged, but: %+v", name, c)
		}
		if !bad && c.Problem != "" {
			t.Errorf("%s is intact, but: %+v", name, c)
		}
	}
	if last, ok := h.Engine.CacheChecker().LastCacheCheck(); !ok || last.Checked != 3 || last.Failed != 2 || last.At.IsZero() {
		t.Errorf("last check %+v (%v), want 3 checked, 2 failed", last, ok)
	}
	if last, _ := h.Engine.CacheChecker().LastCacheCheck(); met.get() != last {
		t.Errorf("the metrics were told %+v, want the last check %+v", met.get(), last)
	}
	// A report: what failed is kept, for the operator to prune; the
	// archive the store found damaged is no longer served (its record
	// keeps the mark), the other is refused by what checks it when it
	// is served.
	if _, err := h.Store.StatBlob(damaged); !errors.Is(err, cache.ErrDamaged) {
		t.Errorf("the archive the store found damaged: %v, want it kept, marked damaged", err)
	}
	if _, err := h.Store.StatBlob(mod.SHA256); err != nil {
		t.Errorf("the changed archive %s was removed: %v", mod.SHA256, err)
	}

	h.Stop()
	if err := h.Engine.CacheChecker().VerifyCache(t.Context(), func(cachecheck.Result) {}); !errors.Is(err, records.ErrShutDown) {
		t.Errorf("after shutdown: %v, want ErrShutDown", err)
	}
}

// With CheckEvery the engine checks the whole cache in the background,
// and a check under way (scheduled or asked for) ends at shutdown
// without holding it up.
func TestVerifyCacheScheduled(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{CheckEvery: 20 * time.Millisecond}})
	vs := []string{"1.0.0", "2.0.0", "3.0.0", "4.0.0"}
	h.Origin.AddProvider(harness.NS, harness.Type, vs, []string{"linux_amd64"})
	h.ReadAll(vs...)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if last, ok := h.Engine.CacheChecker().LastCacheCheck(); ok && last.Checked == len(vs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no background check read the whole cache in 2 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A slow caller: its first package's report returns only once the
	// shutdown has begun, so that the check is under way then, with
	// every other package still to check.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	started := make(chan struct{})
	result := make(chan error, 1)
	var reports atomic.Int64
	go func() {
		result <- h.Engine.CacheChecker().VerifyCache(context.Background(), func(cachecheck.Result) {
			if reports.Add(1) == 1 {
				close(started)
				select {
				case <-h.Engine.CacheChecker().Stopping():
				case <-ctx.Done():
				}
			}
		})
	}()
	<-started
	if err := h.Engine.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a check under way: %v", err)
	}
	h.Closed = true
	h.Store.Close()
	if err := <-result; !errors.Is(err, records.ErrShutDown) {
		t.Errorf("the check under way ended with %v, want ErrShutDown", err)
	}
	if n := reports.Load(); n != 1 {
		t.Errorf("the check under way reported %d of its %d packages: it went on after the shutdown began", n, len(vs))
	}
}

// A module package cached before every package's links were checked, with
// a link that points out of it, is reported damaged by the check of the
// cache; one whose links stay inside is intact. Each is a package as such
// a cache holds it: its record and its bytes, put in place by hand.
func TestVerifyCacheFindsModuleLinksOut(t *testing.T) {
	t.Parallel()
	link := func(name, target string) fakeorigin.TarEntry {
		return fakeorigin.TarEntry{Name: name, Type: tar.TypeSymlink, Target: target}
	}
	main := fakeorigin.TarEntry{Name: "main.tf", Body: "# vpc\n"}
	for _, tc := range []struct {
		name    string
		entries []fakeorigin.TarEntry
		damaged bool
	}{
		{"link out", []fakeorigin.TarEntry{main, link("keys", "../../data")}, true},
		{"absolute link", []fakeorigin.TarEntry{main, link("passwd", "/etc/passwd")}, true},
		{"chain of links out", []fakeorigin.TarEntry{main, link("a", "b/c"), link("b/c", "../..")}, true},
		{"link made through a link back to the top", []fakeorigin.TarEntry{main,
			{Name: "d/d/", Type: tar.TypeDir}, link("d/d/up", "../.."), link("d/d/up/esc", "../victim")}, true},
		{"links inside", []fakeorigin.TarEntry{main, link("a", "b/c"), link("b/c", ".."), link("m", "main.tf")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := harness.New(t, harness.Options{})
			h.Origin.AddTarball("vpc-1.0.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
			h.Origin.AddModule("acme", "vpc", "aws", "1.0.0", h.Origin.TarballURL("vpc-1.0.0.tar.gz"))
			if _, _, err := h.ReadModule("1.0.0"); err != nil {
				t.Fatal(err)
			}
			h.WaitIdle()
			// The old package, in place of the one fetched.
			old := fakeorigin.TarGzEntries(tc.entries)
			sha, err := cachetest.PutBlob(h.Store, old)
			if err != nil {
				t.Fatal(err)
			}
			key := records.ModuleRecordKey(harness.Module, versions.MustParseVersion("1.0.0"))
			var rec records.ModuleRecord
			if _, err := h.Store.GetMeta(key, &rec); err != nil {
				t.Fatal(err)
			}
			rec.SHA256, rec.Size = sha, int64(len(old))
			if err := h.Store.PutMeta(key, rec); err != nil {
				t.Fatal(err)
			}

			var got []cachecheck.Result
			if err := h.Engine.CacheChecker().VerifyCache(t.Context(), func(c cachecheck.Result) { got = append(got, c) }); err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].SHA256 != sha {
				t.Fatalf("checked %+v, want the module package %s", got, sha)
			}
			c := got[0]
			if !tc.damaged {
				if c.Problem != "" {
					t.Errorf("links inside reported damaged: %+v", c)
				}
				return
			}
			if c.Problem == "" || c.Reason != string(verify.ReasonBadArchive) || !strings.Contains(c.Problem, "outside") {
				t.Errorf("%+v, want damaged (bad_archive) for its link out", c)
			}
			if last, _ := h.Engine.CacheChecker().LastCacheCheck(); last.Failed != 1 {
				t.Errorf("last check %+v, want 1 failed", last)
			}
		})
	}
}

// A module version stored before a rule of today's was added (a package
// holding .GIT/config; a record whose //SUBDIR climbs out with
// backslashes) is reported damaged (bad_archive) by the check of the
// cache, and kept; the next request for it, its origin reachable, makes
// it again, and the check after that finds it intact.
func TestVerifyCacheFindsModulesRefusedToday(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		entries []fakeorigin.TarEntry
		subdir  string // the record's, as an earlier release kept it
	}{
		{"package holding .GIT", []fakeorigin.TarEntry{{Name: "x/main.tf", Body: "# vpc\n"}, {Name: ".GIT/config", Body: "[core]\n"}}, "x"},
		{"subdirectory climbing with backslashes", []fakeorigin.TarEntry{{Name: "x/main.tf", Body: "# vpc\n"}}, `..\..\x`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := harness.New(t, harness.Options{})
			pkgURL := h.Origin.TarballURL("vpc-1.0.0.tar.gz")
			h.Origin.AddTarball("vpc-1.0.0.tar.gz", fakeorigin.TarGzEntries(tc.entries))
			h.Origin.AddModule("acme", "vpc", "aws", "1.0.0", pkgURL+"//x")
			old := fakeorigin.TarGzEntries(tc.entries)
			sha, err := cachetest.PutBlob(h.Store, old)
			if err != nil {
				t.Fatal(err)
			}
			key := records.ModuleRecordKey(harness.Module, versions.MustParseVersion("1.0.0"))
			rec := records.ModuleRecord{Schema: records.Schema, Module: harness.Module.String(), Version: "1.0.0",
				Location: pkgURL + "//" + tc.subdir, Kind: modsource.KindArchive, Package: pkgURL, Subdir: tc.subdir,
				SHA256: sha, Size: int64(len(old)), Provenance: records.ProvenanceOrigin}
			if err := h.Store.PutMeta(key, rec); err != nil {
				t.Fatal(err)
			}
			check := func() []cachecheck.Result {
				t.Helper()
				var got []cachecheck.Result
				if err := h.Engine.CacheChecker().VerifyCache(t.Context(), func(c cachecheck.Result) { got = append(got, c) }); err != nil {
					t.Fatal(err)
				}
				return got
			}
			got := check()
			if len(got) != 1 || got[0].SHA256 != sha || got[0].Problem == "" || got[0].Reason != string(verify.ReasonBadArchive) {
				t.Fatalf("checked %+v, want the module package %s damaged (bad_archive)", got, sha)
			}
			if _, err := h.Store.StatBlob(sha); err != nil {
				t.Errorf("the damaged package after the check: %v, want it kept", err)
			}
			pkg, _, err := h.ReadModule("1.0.0")
			if err != nil {
				t.Fatal(err)
			}
			if pkg.SHA256 == sha || pkg.Record.Subdir != "x" {
				t.Errorf("served %s, subdir %q: want the version made again", pkg.SHA256, pkg.Record.Subdir)
			}
			h.WaitIdle()
			if got := check(); len(got) != 1 || got[0].Problem != "" || got[0].SHA256 != pkg.SHA256 {
				t.Errorf("checked %+v after the version was made again, want it intact", got)
			}
		})
	}
}

// A module version's zip (the layer of its OCI artifact) is checked with
// the packages: against the sha256 recorded when it was made, reported
// damaged when its bytes changed, and kept; a zip, or a module package,
// that the cache lost and that cannot be had again (its version was
// imported: the package cannot be fetched again, nor the zip made again
// of it) is reported too, while one that can (a package fetched from its
// origin) is not.
func TestVerifyCacheFindsModuleZips(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	h.Origin.AddTarball("vpc-1.0.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	h.Origin.AddModule("acme", "vpc", "aws", "1.0.0", h.Origin.TarballURL("vpc-1.0.0.tar.gz"))
	mod, _, err := h.ReadModule("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	v := versions.MustParseVersion("1.0.0")
	openZip := func() error {
		z, err := h.Engine.Modules().Zips().OpenModuleZip(t.Context(), harness.Module, v)
		if err == nil {
			z.Close()
		}
		return err
	}
	if err := openZip(); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle()
	var zr records.ModuleZipRecord
	if _, err := h.Store.GetMeta(records.ModuleZipKey(harness.Module, v), &zr); err != nil {
		t.Fatal(err)
	}

	check := func() map[string]cachecheck.Result {
		t.Helper()
		got := map[string]cachecheck.Result{}
		if err := h.Engine.CacheChecker().VerifyCache(t.Context(), func(c cachecheck.Result) {
			got[c.Kind] = c
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := check()
	if c, ok := got[cachecheck.KindModuleZip]; !ok || c.SHA256 != zr.SHA256 || c.Problem != "" || c.By != cachecheck.CheckedSHA256 || c.Bytes != zr.Size {
		t.Fatalf("the module zip %s: %+v (checked: %v), want it checked intact against its sha256", zr.SHA256, c, ok)
	}
	if last, _ := h.Engine.CacheChecker().LastCacheCheck(); last.Checked != 2 || last.Failed != 0 {
		t.Errorf("last check %+v, want the package and its zip checked, none failed", last)
	}

	// Changed where only its sha256 tells: reported, kept.
	if err := cachetest.AlterBlobByte(h.Store, zr.SHA256, 10); err != nil {
		t.Fatal(err)
	}
	got = check()
	if c := got[cachecheck.KindModuleZip]; c.Problem == "" || c.Reason != string(verify.ReasonChecksum) {
		t.Errorf("the damaged module zip: %+v, want checksum_mismatch", c)
	}
	if c := got[cachecheck.KindModule]; c.Problem != "" {
		t.Errorf("the module package, intact: %+v", c)
	}
	if _, err := h.Store.StatBlob(zr.SHA256); err != nil {
		t.Errorf("the damaged zip after the check: %v, want it kept", err)
	}
	if err := cachetest.DeleteBlob(h.Store, zr.SHA256); err != nil {
		t.Fatal(err)
	}
	if err := openZip(); err != nil { // made again of its package
		t.Fatal(err)
	}
	h.WaitIdle()

	// The package gone, fetched from its origin: the zip is made again
	// of it when asked for, and the package fetched again; nothing is
	// reported.
	if err := cachetest.DeleteBlob(h.Store, mod.SHA256); err != nil {
		t.Fatal(err)
	}
	got = check()
	if c, ok := got[cachecheck.KindModuleZip]; !ok || c.Problem != "" {
		t.Errorf("the zip of a package that can be fetched again: %+v (checked: %v), want intact", c, ok)
	}
	if c, ok := got[cachecheck.KindModule]; ok {
		t.Errorf("a module package not cached that can be fetched again was reported: %+v", c)
	}
	if _, _, err := h.ReadModule("1.0.0"); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle()

	// Imported: its package gone is gone for good, and so is its zip.
	key := records.ModuleRecordKey(harness.Module, v)
	var rec records.ModuleRecord
	if _, err := h.Store.GetMeta(key, &rec); err != nil {
		t.Fatal(err)
	}
	rec.Location, rec.Package, rec.Provenance = "", "", records.ProvenanceUnsigned
	if err := h.Store.PutMeta(key, rec); err != nil {
		t.Fatal(err)
	}
	if err := cachetest.DeleteBlob(h.Store, mod.SHA256); err != nil {
		t.Fatal(err)
	}
	if err := openZip(); err == nil {
		t.Fatal("the zip of an imported version whose package is gone was served")
	}
	got = check()
	if c := got[cachecheck.KindModuleZip]; c.SHA256 != zr.SHA256 || !strings.Contains(c.Problem, "cannot be fetched again") {
		t.Errorf("the zip of an imported version whose package is gone: %+v, want it reported", c)
	}
	if c := got[cachecheck.KindModule]; c.SHA256 != mod.SHA256 || !strings.Contains(c.Problem, "cannot be fetched again") {
		t.Errorf("the package of an imported version, gone: %+v, want it reported", c)
	}
	if err := cachetest.DeleteBlob(h.Store, zr.SHA256); err != nil {
		t.Fatal(err)
	}
	got = check()
	if c := got[cachecheck.KindModuleZip]; c.SHA256 != zr.SHA256 || !strings.Contains(c.Problem, "cannot be fetched again") {
		t.Errorf("the zip of an imported version, gone with its package: %+v, want it reported", c)
	}
	if last, _ := h.Engine.CacheChecker().LastCacheCheck(); last.Checked != 2 || last.Failed != 2 {
		t.Errorf("last check %+v, want 2 checked, 2 failed", last)
	}
}

// An imported archive (no origin to fetch it again from) that a read
// found damaged stays marked after a restart: refused before a byte is
// sent, kept (never removed for it), reported by every check, until an
// import of it again replaces the damaged copy and clears the mark.
func TestVerifyCacheKeepsDamagedImportAcrossRestarts(t *testing.T) {
	t.Parallel()
	opts := harness.Options{CacheDir: t.TempDir(), Config: harness.Config{ScratchDir: t.TempDir()}}
	h := harness.New(t, opts)
	local := addrs.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	in, sha := harness.UnsignedImport(t, local, "2.0.0")
	if _, err := h.Engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle()
	if err := cachetest.MarkDamaged(h.Store, sha); err != nil {
		t.Fatal(err)
	}
	v, pl := harness.MustVersion(t, "2.0.0"), harness.MustPlatform(t, "linux_amd64")
	for i := range 2 { // restarted twice: the mark holds, and is not lost by the first start
		h.Stop()
		h.Start(opts)
		if a, err := h.Engine.OpenArchive(t.Context(), local, v, pl); err == nil {
			a.Close()
			t.Fatalf("start %d: the damaged import was opened to be served", i+1)
		}
		if _, err := h.Store.StatBlob(sha); !errors.Is(err, cache.ErrDamaged) {
			t.Fatalf("start %d: the damaged import: %v, want it kept, marked (cache.ErrDamaged)", i+1, err)
		}
		if n := h.Store.DamagedArchives(); n != 1 {
			t.Errorf("start %d: DamagedArchives = %d, want 1", i+1, n)
		}
		var got []cachecheck.Result
		if err := h.Engine.CacheChecker().VerifyCache(t.Context(), func(c cachecheck.Result) { got = append(got, c) }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].SHA256 != sha || got[0].Reason != string(verify.ReasonChecksum) {
			t.Fatalf("start %d: checked %+v, want the import reported damaged (checksum_mismatch)", i+1, got)
		}
	}

	// Imported again: the verified copy replaces the damaged one.
	if _, err := h.Engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle()
	h.Stop()
	h.Start(opts)
	a, err := h.Engine.OpenArchive(t.Context(), local, v, pl)
	if err != nil {
		t.Fatalf("the import after it was imported again: %v", err)
	}
	a.Close()
	var got []cachecheck.Result
	if err := h.Engine.CacheChecker().VerifyCache(t.Context(), func(c cachecheck.Result) { got = append(got, c) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Problem != "" {
		t.Errorf("checked %+v once imported again, want it intact", got)
	}
	if n := h.Store.DamagedArchives(); n != 0 {
		t.Errorf("DamagedArchives = %d once imported again, want 0", n)
	}
}

// With a tier shared with other replicas behind the cache, an imported
// module's package the cache lacks may be had from the tier: the check
// does not report it lost.
func TestVerifyCacheSharedTierLostIsNotReported(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{Shared: harness.NewMemTier()}})
	h.Origin.AddTarball("vpc-1.0.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	h.Origin.AddModule("acme", "vpc", "aws", "1.0.0", h.Origin.TarballURL("vpc-1.0.0.tar.gz"))
	mod, _, err := h.ReadModule("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	h.WaitIdle()
	key := records.ModuleRecordKey(harness.Module, versions.MustParseVersion("1.0.0"))
	var rec records.ModuleRecord
	if _, err := h.Store.GetMeta(key, &rec); err != nil {
		t.Fatal(err)
	}
	rec.Location, rec.Package, rec.Provenance = "", "", records.ProvenanceUnsigned
	if err := h.Store.PutMeta(key, rec); err != nil {
		t.Fatal(err)
	}
	if err := cachetest.DeleteBlob(h.Store, mod.SHA256); err != nil {
		t.Fatal(err)
	}
	var got []cachecheck.Result
	if err := h.Engine.CacheChecker().VerifyCache(t.Context(), func(c cachecheck.Result) { got = append(got, c) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("checked %+v, want the package the shared tier may hold passed over", got)
	}
}

// An imported provider package the cache lost (an earlier release's size
// limit evicted it, or a copy of the data directory left it out) cannot be
// fetched again: the version is listed and never served. The check
// reports it as it reports an imported module's lost package, rather
// than passing over it as if it could be fetched again.
func TestVerifyCacheReportsLostImportedProviderPackage(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{ScratchDir: t.TempDir()}})
	local := addrs.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	in, sha := harness.UnsignedImport(t, local, "2.0.0")
	if _, err := h.Engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle()
	if err := cachetest.DeleteBlob(h.Store, sha); err != nil {
		t.Fatal(err)
	}
	var got []cachecheck.Result
	if err := h.Engine.CacheChecker().VerifyCache(t.Context(), func(c cachecheck.Result) { got = append(got, c) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].SHA256 != sha || !strings.Contains(got[0].Problem, "cannot be fetched again") {
		t.Errorf("checked %+v, want the lost import reported (cannot be fetched again)", got)
	}
}
