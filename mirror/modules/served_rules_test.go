package modules_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// A sealed mirror's version list offers only the versions its doors
// serve (as TestModuleListOffersWhatTheDoorsServe asks of an origin's
// list): a version whose stored package today's rules refuse (.GIT/config,
// kept by an earlier release) is answered 502 at every door, so listing it
// makes "terraform init" with "~> 1.0" pick it as the newest and fail,
// where the version below it would install.
func TestSealedModuleListLeavesOutRefusedPackages(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{Offline: true}})
	earlierDotGIT(t, h, records.ProvenanceOrigin) // 1.1.0, refused today

	// 1.0.0, a package today's rules take.
	good := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# good\n")})
	sha := storeBlob(t, h, good)
	loc := h.Origin.TarballURL("vpc-1.0.0.tar.gz")
	rec := records.ModuleRecord{Schema: records.Schema, Module: harness.Module.String(), Version: "1.0.0",
		Location: loc, Kind: modsource.KindArchive, Package: loc, SHA256: sha, Size: int64(len(good)),
		FetchedAt: time.Now().UTC(), Provenance: records.ProvenanceOrigin}
	if err := h.Store.PutMeta(records.ModuleRecordKey(harness.Module, enginetest.MustModuleVersion(t, "1.0.0")), &rec); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	list, _, err := h.Engine.Modules().ModuleVersions(ctx, harness.Module)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range list.Versions {
		v := enginetest.MustModuleVersion(t, raw)
		pkg, err := h.Engine.Modules().OpenModule(ctx, harness.Module, v)
		if err != nil {
			t.Errorf("sealed list offers %s, whose package is not served: %v", raw, err)
			continue
		}
		pkg.Close()
	}
	if !slices.Contains(list.Versions, "1.0.0") {
		t.Errorf("sealed list %q lacks 1.0.0, whose package is served", list.Versions)
	}
}

// A stored record that today's rules refuse is made again from the
// origin's answer, and "the zip made of the old package is made again
// too" (docs/modules.md): the OCI door serves the zip of the package the
// module registry door serves. When the download answer (ModuleLocation)
// is what made the record again, before the new package was fetched, the
// zip made of the old record's package must not be served as the
// version's: the origin now names another package.
func TestZipOfRefusedRecordNotServedAfterTheRecordIsMadeAgain(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	o := h.Origin
	ctx := context.Background()
	v := enginetest.MustModuleVersion(t, "1.1.0")

	o.AddTarball("vpc-1.1.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"x/main.tf": []byte("# earlier\n")}))
	o.AddModule("acme", "vpc", "aws", "1.1.0", o.TarballURL("vpc-1.1.0.tar.gz")+"//x")
	old, _, err := readModuleZip(t, h, "1.1.0")
	if err != nil {
		t.Fatal(err)
	}
	// As an earlier release kept it: a //SUBDIR today's rules refuse.
	var rec records.ModuleRecord
	if _, err := h.Store.GetMeta(storedKey(t), &rec); err != nil {
		t.Fatal(err)
	}
	early := earlierSubdirRecord(o)
	rec.Location, rec.Subdir = early.Location, early.Subdir
	if err := h.Store.PutMeta(storedKey(t), &rec); err != nil {
		t.Fatal(err)
	}

	// The origin now names another package for the version.
	o.AddTarball("vpc-1.1.0-r2.tar.gz", fakeorigin.TarGz(map[string][]byte{"x/main.tf": []byte("# republished\n")}))
	o.AddModule("acme", "vpc", "aws", "1.1.0", o.TarballURL("vpc-1.1.0-r2.tar.gz")+"//x")

	// A client of the registry door asks for the download answer: the
	// record is made again (not yet fetched).
	if r, err := h.Engine.Modules().ModuleLocation(ctx, harness.Module, v); err != nil || r.Subdir != "x" {
		t.Fatalf("download answer: %+v, %v", r, err)
	}
	// A client of the OCI door asks for the zip.
	z, _, err := readModuleZip(t, h, "1.1.0")
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := h.Engine.Modules().OpenModule(ctx, harness.Module, v)
	if err != nil {
		t.Fatal(err)
	}
	pkg.Close()
	if z.Record.Package != pkg.SHA256 {
		t.Errorf("OCI door served zip %s made of package %s (the refused record's: %v); the registry door serves package %s",
			z.Record.SHA256, z.Record.Package, z.Record.Package == old.Record.Package, pkg.SHA256)
	}
}

// A registry may match a module's names with their case (docs/operations.md:
// "its 404 for Acme/VPC/aws says nothing of acme/vpc/aws"): a client
// spelling the module as the registry does is answered with its versions
// even while another client's request in another spelling, which the
// registry does not know, is on its way to the origin.
func TestModuleVersionsNotFoundOfOneSpellingIsNotAnothers(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{}) // the fake registry matches names with their case
	o := h.Origin
	o.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# m\n")}))
	o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("m.tar.gz"))
	o.SetLatency(300 * time.Millisecond)
	ctx := context.Background()
	other, err := addrs.NewModule(harness.OriginHost, "Acme", "VPC", "aws")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := h.Engine.Modules().ModuleVersions(ctx, other)
		done <- err
	}()
	// The other spelling's request is at the origin, held there by its
	// latency.
	for deadline := time.Now().Add(time.Minute); o.Hits(fakeorigin.ModuleVersions) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the other spelling's request did not reach the origin")
		}
	}
	list, _, err := h.Engine.Modules().ModuleVersions(ctx, harness.Module)
	if err != nil || !slices.Contains(list.Versions, "1.0.0") {
		t.Errorf("versions of %s, as the registry spells it: %v, %v; want 1.0.0", harness.Module, list, err)
	}
	t.Logf("the other spelling: %v", <-done)
}
