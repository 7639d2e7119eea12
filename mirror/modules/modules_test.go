package modules_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// moduleRecorder records module fetch outcomes.
type moduleRecorder struct {
	enginetest.NoMetrics
	mu       sync.Mutex
	outcomes []string
}

func (r *moduleRecorder) ModuleFetch(kind, outcome string, _ int64, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes = append(r.outcomes, kind+"/"+outcome)
}

func (r *moduleRecorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.outcomes...)
}

// A module version is immutable once cached: when its package was
// evicted and the tag moved upstream, the refetch is refused, counted and
// nothing is cached; an unchanged source is fetched again. (OpenModule's
// path for a package the cache lacks: fetchMissing.)
func TestModuleImmutableOnceCached(t *testing.T) {
	t.Parallel()
	needGit(t)
	rec := &moduleRecorder{}
	h := harness.New(t, harness.Options{Config: harness.Config{Metrics: rec}})
	o := h.Origin
	first, err := o.AddGitRepo("vpc", map[string][]byte{"main.tf": []byte("# one\n")}, "v1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "vpc", "aws", "v1.0.0", "git::"+o.GitURL("vpc")+"?ref=v1.0.0")

	list, _, err := h.Engine.Modules().ModuleVersions(context.Background(), harness.Module)
	if err != nil || len(list.Versions) != 1 {
		t.Fatalf("versions: %v, %v", list, err)
	}
	// The client asks for the canonical "1.0.0" of the origin's "v1.0.0".
	pkg, want, err := h.ReadModule("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if pkg.Source != records.Miss || pkg.Record.Commit != first || pkg.Record.Version != "v1.0.0" {
		t.Errorf("first open: source %v, record %+v", pkg.Source, pkg.Record)
	}
	sha := pkg.SHA256

	// Evicted, source unchanged: fetched again, same bytes.
	if err := cachetest.DeleteBlob(h.Store, sha); err != nil {
		t.Fatal(err)
	}
	if _, got, err := h.ReadModule("1.0.0"); err != nil || string(got) != string(want) {
		t.Fatalf("refetch of an unchanged source: %v", err)
	}

	// Evicted, tag moved: refused.
	if _, err := o.AddGitRepo("vpc", map[string][]byte{"main.tf": []byte("# two\n")}, "v1.0.0"); err != nil {
		t.Fatal(err)
	}
	if err := cachetest.DeleteBlob(h.Store, sha); err != nil {
		t.Fatal(err)
	}
	_, _, err = h.ReadModule("1.0.0")
	if !errors.Is(err, modules.ErrChanged) || !errors.Is(err, verify.ErrIntegrity) {
		t.Fatalf("refetch after the tag moved: %v, want modules.ErrChanged", err)
	}
	if n, _ := h.Store.Stats(); n != 0 {
		t.Errorf("%d blobs cached after the refused refetch", n)
	}
	var r records.ModuleRecord
	if _, err := h.Store.GetMeta(records.ModuleRecordKey(harness.Module, versions.MustParseVersion("1.0.0")), &r); err != nil || r.SHA256 != sha || r.Commit != first {
		t.Errorf("record after the refused refetch: %+v, %v (want it unchanged)", r, err)
	}
	if got := rec.got(); len(got) != 3 || got[0] != "git/success" || got[2] != "git/changed" {
		t.Errorf("fetch outcomes %v", got)
	}
}

// A sealed mirror lists only the module versions whose package it holds
// and fails the others with records.ErrOffline.
func TestModulesOffline(t *testing.T) {
	t.Parallel()
	needGit(t)
	dir := filepath.Join(t.TempDir(), "cache")
	h := harness.New(t, harness.Options{CacheDir: dir})
	o := h.Origin
	if _, err := o.AddGitRepo("vpc", map[string][]byte{"main.tf": []byte("#\n")}, "v1", "v2"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "vpc", "aws", "1.0.0", "git::"+o.GitURL("vpc")+"?ref=v1")
	o.AddModule("acme", "vpc", "aws", "2.0.0", "git::"+o.GitURL("vpc")+"?ref=v2")
	if _, _, err := h.Engine.Modules().ModuleVersions(context.Background(), harness.Module); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.ReadModule("1.0.0"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Engine.Modules().ModuleLocation(context.Background(), harness.Module, enginetest.MustModuleVersion(t, "2.0.0")); err != nil {
		t.Fatal(err) // a record, no package
	}
	h.Stop()
	o.ResetHits()
	h.Start(harness.Options{CacheDir: dir, Config: harness.Config{Offline: true}})
	list, _, err := h.Engine.Modules().ModuleVersions(context.Background(), harness.Module)
	if err != nil || len(list.Versions) != 1 || list.Versions[0] != "1.0.0" {
		t.Errorf("sealed versions: %+v, %v; want only 1.0.0", list, err)
	}
	if pkg, _, err := h.ReadModule("1.0.0"); err != nil || pkg.Source != records.Hit {
		t.Errorf("sealed, cached: %v", err)
	}
	if _, _, err := h.ReadModule("2.0.0"); !errors.Is(err, records.ErrOffline) {
		t.Errorf("sealed, not cached: %v, want ErrOffline", err)
	}
	other := addrs.Module{Hostname: harness.OriginHost, Namespace: "acme", Name: "nope", System: "aws"}
	if _, _, err := h.Engine.Modules().ModuleVersions(context.Background(), other); !errors.Is(err, records.ErrOffline) {
		t.Errorf("sealed, unknown module: %v, want ErrOffline", err)
	}
	if n := o.TotalHits(); n != 0 {
		t.Errorf("the sealed engine made %d origin requests", n)
	}
}

// A module version's record and its package stored by an earlier
// release, under the key it wrote (the version without its leading "v"),
// are found by the parsed version in either spelling, with no origin
// request; the zip made of it is recorded under the key earlier releases
// read too.
func TestModuleRecordOfEarlierReleaseFound(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	o := h.Origin
	pkg := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# earlier\n")})
	sha, err := cachetest.PutBlob(h.Store, pkg)
	if err != nil {
		t.Fatal(err)
	}
	loc := o.TarballURL("vpc-1.1.0.tar.gz")
	rec := records.ModuleRecord{Schema: records.Schema, Module: harness.Module.String(), Version: "v1.1.0", Location: loc,
		Kind: modsource.KindArchive, Package: loc, SHA256: sha, Size: int64(len(pkg)), FetchedAt: time.Now().UTC()}
	if err := h.Store.PutMeta("module/"+harness.Module.String()+"/1.1.0", &rec); err != nil {
		t.Fatal(err)
	}
	o.ResetHits()
	for _, spelled := range []string{"v1.1.0", "1.1.0"} {
		got, body, err := h.ReadModule(spelled)
		if err != nil {
			t.Fatalf("%s: %v", spelled, err)
		}
		if got.Source != records.Hit || got.SHA256 != sha || string(body) != string(pkg) {
			t.Errorf("%s: source %v, sha256 %s; want the stored package, a hit", spelled, got.Source, got.SHA256)
		}
	}
	z, err := h.Engine.Modules().Zips().OpenModuleZip(context.Background(), harness.Module, enginetest.MustModuleVersion(t, "v1.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	z.Close()
	var zr records.ModuleZipRecord
	if _, err := h.Store.GetMeta("modzip/"+harness.Module.String()+"/1.1.0", &zr); err != nil || zr.SHA256 != z.Record.SHA256 {
		t.Errorf("the zip's record under the key of earlier releases: %+v, %v", zr, err)
	}
	if n := o.TotalHits(); n != 0 {
		t.Errorf("%d origin requests for a version whose record and package are stored", n)
	}
}

// A module package fetch that its time limit ends fails naming the
// setting that sets it (--module-timeout), in the log and in the error
// the client's answer carries, and is a timeout still (a 504, counted as
// one).
func TestModuleTimeoutNamesItsSetting(t *testing.T) {
	t.Parallel()
	needGit(t)
	rec := &moduleRecorder{}
	h := harness.New(t, harness.Options{Config: harness.Config{Metrics: rec, ModuleTimeout: 300 * time.Millisecond}})
	o := h.Origin
	if _, err := o.AddGitRepo("vpc", map[string][]byte{"main.tf": []byte("#\n")}, "v1.0.0"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "vpc", "aws", "1.0.0", "git::"+o.GitURL("vpc")+"?ref=v1.0.0")
	if _, err := h.Engine.Modules().ModuleLocation(context.Background(), harness.Module, enginetest.MustModuleVersion(t, "1.0.0")); err != nil {
		t.Fatal(err)
	}
	o.SetLatency(time.Second) // the source host, from now on
	_, _, err := h.ReadModule("1.0.0")
	var te *modules.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not done within 300ms (--module-timeout)") {
		t.Fatalf("ReadModule: %v, want a TimeoutError naming --module-timeout", err)
	}
	if got := rec.got(); len(got) != 1 || got[0] != "git/timeout" {
		t.Errorf("fetch outcomes %v, want one timeout", got)
	}
}
