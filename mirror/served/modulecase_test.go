package served_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
)

// packagesOf is the policy layer over h's engine.
func packagesOf(t *testing.T, h *harness.Harness) *served.Packages {
	t.Helper()
	side, err := h.Engine.NewOCI()
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := served.New(served.Parts{Providers: h.Engine, Modules: h.Engine.Modules(), Zips: h.Engine.Modules().Zips(), OCI: side, Stored: h.Engine.Inventory()})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func mustModule(t *testing.T, s string) addrs.Module {
	t.Helper()
	m, err := addrs.ParseModule(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// keysUnder returns the keys the cache holds under prefix.
func keysUnder(t *testing.T, h *harness.Harness, prefix string) []string {
	t.Helper()
	var keys []string
	if err := h.Store.ScanMeta(prefix, func(key string, _ time.Time, _ json.RawMessage) error {
		keys = append(keys, key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// storeBlob stores data as a blob and returns its sha256.
func storeBlob(t *testing.T, h *harness.Harness, data []byte) string {
	t.Helper()
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	w, err := h.Store.NewBlobWriter(sha)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(""); err != nil {
		t.Fatal(err)
	}
	return sha
}

// readAll opens version of m through pkgs, reads it and closes it.
func readAll(t *testing.T, pkgs *served.Packages, m addrs.Module, version string) ([]byte, error) {
	t.Helper()
	pkg, err := pkgs.OpenModule(context.Background(), m, enginetest.MustModuleVersion(t, version))
	if err != nil {
		return nil, err
	}
	defer pkg.Close()
	return io.ReadAll(pkg.Content())
}

// Two spellings of one module are one module: the second is answered
// from what the first fetched (no origin request: one version list, one
// record, one package, one zip record), and the policy's deny of one
// spelling refuses the other.
func TestModuleSpellingsAreOneModule(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	o := h.Origin
	o.AddTarball("vpc-1.1.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	o.AddModule("acme", "vpc", "aws", "1.1.0", o.TarballURL("vpc-1.1.0.tar.gz"))
	pkgs := packagesOf(t, h)
	ctx := context.Background()
	lower := mustModule(t, harness.OriginHost+"/acme/vpc/aws")
	mixed := mustModule(t, harness.OriginHost+"/ACME/Vpc/AWS")
	v := enginetest.MustModuleVersion(t, "1.1.0")

	if _, _, err := pkgs.ModuleVersions(ctx, lower); err != nil {
		t.Fatal(err)
	}
	want, err := readAll(t, pkgs, lower, "1.1.0")
	if err != nil {
		t.Fatal(err)
	}
	z, err := pkgs.OpenModuleZip(ctx, lower, v)
	if err != nil {
		t.Fatal(err)
	}
	zsha := z.Record.SHA256
	z.Close()
	h.WaitIdle()
	hits := o.TotalHits()

	list, _, err := pkgs.ModuleVersions(ctx, mixed)
	if err != nil || len(list.Versions) != 1 {
		t.Fatalf("versions of %v: %v, %v", mixed, list, err)
	}
	got, err := readAll(t, pkgs, mixed, "1.1.0")
	if err != nil || string(got) != string(want) {
		t.Fatalf("package of the second spelling: %v", err)
	}
	z, err = pkgs.OpenModuleZip(ctx, mixed, v)
	if err != nil {
		t.Fatal(err)
	}
	if z.Record.SHA256 != zsha || z.Source != records.Hit {
		t.Errorf("zip of the second spelling: %s (%v), want the first's %s from the cache", z.Record.SHA256, z.Source, zsha)
	}
	z.Close()
	if n := o.TotalHits() - hits; n != 0 {
		t.Errorf("%d origin requests for the second spelling, want none", n)
	}
	for prefix, want := range map[string]int{"modversions/": 1, "module/": 1, "modzip/": 1} {
		if keys := keysUnder(t, h, prefix); len(keys) != want {
			t.Errorf("records under %s: %q, want %d", prefix, keys, want)
		}
	}

	// A deny in either spelling refuses both.
	for _, deny := range []string{lower.String(), harness.OriginHost + "/Acme/VPC/aws"} {
		h.Engine.SetPolicy(enginetest.DecodePolicy(t, `deny = ["`+deny+`"]`))
		for _, m := range []addrs.Module{lower, mixed} {
			if _, err := readAll(t, pkgs, m, "1.1.0"); !errors.Is(err, gate.ErrPolicy) {
				t.Errorf("deny %s: package of %v: %v, want the policy's refusal", deny, m.OriginPath(), err)
			}
			if _, _, err := pkgs.ModuleVersions(ctx, m); !errors.Is(err, gate.ErrPolicy) {
				t.Errorf("deny %s: versions of %v: %v, want the policy's refusal", deny, m.OriginPath(), err)
			}
		}
	}
}

// The origin is asked for a module as the client spelled it: a registry
// that matches names with their case (as Terraform allows one to) still
// answers the spelling it publishes, which is then keyed in its normal
// form and answered in any spelling from the cache.
func TestModuleAskedOfOriginAsSpelled(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	o := h.Origin
	o.AddTarball("net-1.0.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# net\n")}))
	o.AddModule("Acme", "Net", "aws", "1.0.0", o.TarballURL("net-1.0.0.tar.gz")) // matched with its case
	pkgs := packagesOf(t, h)
	spelled := mustModule(t, harness.OriginHost+"/Acme/Net/aws")
	if _, err := readAll(t, pkgs, spelled, "1.0.0"); err != nil {
		t.Fatalf("the origin's own spelling: %v", err)
	}
	if keys := keysUnder(t, h, "module/"); len(keys) != 1 || keys[0] != "module/"+harness.OriginHost+"/acme/net/aws/1.0.0" {
		t.Errorf("module records %q, want one under the normal form", keys)
	}
	hits := o.TotalHits()
	if _, err := readAll(t, pkgs, mustModule(t, harness.OriginHost+"/acme/net/aws"), "1.0.0"); err != nil {
		t.Errorf("another spelling, from the cache: %v", err)
	}
	if n := o.TotalHits() - hits; n != 0 {
		t.Errorf("%d origin requests for another spelling of a cached version", n)
	}
}

// Records an earlier release kept under the spelling a client used are
// read after an upgrade, in every spelling: moved to the module's normal
// form when the engine starts. An imported version, which no origin
// could give again, is served from what was kept; a record kept under
// both spellings keeps the one whose package is cached, and the other is
// set aside, not thrown away. What is moved is offered to the shared
// tier under the normal form.
func TestModuleRecordsOfEarlierSpellingRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := harness.New(t, harness.Options{CacheDir: dir})
	o := h.Origin
	pkg := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# imported\n")})
	sha := storeBlob(t, h, pkg)
	host := harness.OriginHost
	earlier := func(key string, doc any) {
		t.Helper()
		if err := h.Store.PutMeta(key, doc); err != nil {
			t.Fatal(err)
		}
	}
	// An imported version, kept as an earlier release keyed it: under
	// the client's spelling of the module. The origin has no such module.
	earlier("module/"+host+"/Corp/Base/aws/2.0.0", records.ModuleRecord{Schema: records.Schema, Module: host + "/Corp/Base/aws", Version: "2.0.0",
		Location: o.TarballURL("gone.tar.gz"), Kind: modsource.KindArchive, Package: o.TarballURL("gone.tar.gz"),
		SHA256: sha, Size: int64(len(pkg)), Provenance: records.ProvenanceImported})
	// The record of its zip, made of that package, whose manifest (and
	// its digest, handed out) names the zip as the module was spelled.
	earlier("modzip/"+host+"/Corp/Base/aws/2.0.0", records.ModuleZipRecord{Schema: records.Schema, Module: host + "/Corp/Base/aws", Version: "2.0.0",
		Package: sha, SHA256: strings.Repeat("ab", 32), Size: 100})
	earlier("modversions/"+host+"/Corp/Base/aws", records.ModuleVersionList{Schema: records.Schema, Versions: []string{"2.0.0"}, ListedAt: time.Now().UTC()})
	// A version recorded under two spellings: the normal one without its
	// package fetched, the other with it.
	earlier("module/"+host+"/corp/base/aws/1.0.0", records.ModuleRecord{Schema: records.Schema, Module: host + "/corp/base/aws", Version: "1.0.0",
		Location: o.TarballURL("base-1.0.0.tar.gz"), Kind: modsource.KindArchive, Package: o.TarballURL("base-1.0.0.tar.gz")})
	earlier("module/"+host+"/CORP/base/aws/1.0.0", records.ModuleRecord{Schema: records.Schema, Module: host + "/CORP/base/aws", Version: "1.0.0",
		Location: o.TarballURL("base-1.0.0.tar.gz"), Kind: modsource.KindArchive, Package: o.TarballURL("base-1.0.0.tar.gz"),
		SHA256: sha, Size: int64(len(pkg)), Provenance: records.ProvenanceImported})
	h.Stop()
	tier := harness.NewMemTier()
	h.Start(harness.Options{CacheDir: dir, Config: harness.Config{Shared: tier}})
	pkgs := packagesOf(t, h)
	o.ResetHits()

	for _, spelling := range []string{"Corp/Base/aws", "corp/base/aws", "CORP/BASE/AWS"} {
		m := mustModule(t, host+"/"+spelling)
		for _, v := range []string{"2.0.0", "1.0.0"} {
			got, err := readAll(t, pkgs, m, v)
			if err != nil || string(got) != string(pkg) {
				t.Errorf("%s %s: %v, want the package kept", spelling, v, err)
			}
		}
	}
	if n := o.TotalHits(); n > 1 { // at most the listing of a stale list
		t.Errorf("%d origin requests for versions the cache holds", n)
	}
	wantKeys := []string{"module/" + host + "/corp/base/aws/1.0.0", "module/" + host + "/corp/base/aws/2.0.0"}
	if keys := keysUnder(t, h, "module/"); len(keys) != 2 || keys[0] != wantKeys[0] || keys[1] != wantKeys[1] {
		t.Errorf("module records %q, want %q", keys, wantKeys)
	}
	// The normal key now holds the CORP record (its package is cached);
	// the one it held is set aside under its own key.
	if aside := keysUnder(t, h, records.ModuleKeyAside); len(aside) != 1 || aside[0] != records.ModuleKeyAside+wantKeys[0] {
		t.Errorf("set aside: %q, want the one record not kept under the normal key", aside)
	}
	doc, err := pkgs.ModuleManifest(context.Background(), mustModule(t, host+"/corp/base/aws"), enginetest.MustModuleVersion(t, "2.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	var man ocispec.Manifest
	if err := json.Unmarshal(doc.Bytes, &man); err != nil || len(man.Layers) != 1 || man.Layers[0].Annotations[ocispec.AnnotationTitle] != "Base-aws-2.0.0.zip" {
		t.Errorf("manifest of the zip recorded before: %s (%v); want its layer titled as then, Base-aws-2.0.0.zip", doc.Bytes, err)
	}
	// What was moved is offered to the replicas sharing a store, which
	// read it by the normal form too.
	h.WaitIdle()
	for _, key := range append(wantKeys, "modversions/"+host+"/corp/base/aws", "modzip/"+host+"/corp/base/aws/2.0.0") {
		if tier.Meta(key) == nil {
			t.Errorf("the shared tier has nothing under %s", key)
		}
	}
	var rec records.ModuleRecord
	if _, err := h.Store.GetMeta(wantKeys[0], &rec); err != nil || rec.SHA256 != sha || rec.Module != host+"/corp/base/aws" {
		t.Errorf("record kept under the normal key: %+v, %v; want the one with the package, naming the normal form", rec, err)
	}
}

// A module version an earlier release dated under two spellings (each
// spelling's listings, the latest that did not yet name it) is dated,
// once its records are moved to the module's normal form, by the later:
// a version listed an hour ago under one spelling is held by a minimum
// release age of three days, although the other spelling's listings
// lacked it a month ago.
func TestModuleReleaseTimeOfEarlierSpellingsIsTheLater(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := harness.New(t, harness.Options{CacheDir: dir})
	host := harness.OriginHost
	h.Origin.AddTarball("base-1.0.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# base\n")}))
	for _, v := range []string{"0.9.0", "1.0.0"} {
		h.Origin.AddModule("corp", "base", "aws", v, h.Origin.TarballURL("base-1.0.0.tar.gz"))
	}
	type absent struct {
		Schema int       `json:"schema"`
		At     time.Time `json:"at"`
	}
	now := time.Now().UTC()
	for key, doc := range map[string]any{
		"modversions/" + host + "/corp/base/aws":                 records.ModuleVersionList{Schema: records.Schema, Versions: []string{"0.9.0", "1.0.0"}, ListedAt: now},
		"release/absent/module/" + host + "/corp/base/aws/1.0.0": absent{1, now.Add(-30 * 24 * time.Hour)},
		"release/absent/module/" + host + "/Corp/Base/aws/1.0.0": absent{1, now.Add(-time.Hour)},
	} {
		if err := h.Store.PutMeta(key, doc); err != nil {
			t.Fatal(err)
		}
	}
	h.Stop()
	h.Start(harness.Options{CacheDir: dir})
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	pkgs := packagesOf(t, h)

	list, _, err := pkgs.ModuleVersions(context.Background(), mustModule(t, host+"/corp/base/aws"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(list.Versions, " ") != "0.9.0" {
		t.Errorf("versions %q; want 0.9.0 alone: 1.0.0 was listed an hour ago under another spelling, and is held", list.Versions)
	}
}
