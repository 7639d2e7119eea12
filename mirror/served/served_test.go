package served_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// target is what the cases ask for: a provider version and a module
// version that were served (their documents and blobs handed out, so
// their digests are kept) before the policy changed.
type target struct {
	p                     addrs.Provider
	v                     versions.Version
	pl                    addrs.Platform
	index, manifest, blob digest.Digest
	m                     addrs.Module
	mv                    versions.Version
	mmanifest, mblob      digest.Digest
}

// errLeftOut is what a listing case returns when the version is left
// out of the list: the listing's refusal.
var errLeftOut = errors.New("left out of the list")

// closeIt closes c when the call opened something.
func closeIt(c io.Closer, err error) error {
	if err == nil && c != nil {
		c.Close()
	}
	return err
}

// both is the answer of two calls that must agree (the index and the
// platform manifest by digest): the second's error, or one saying that
// only one was served.
func both(first, second error) error {
	if (first == nil) != (second == nil) {
		return fmt.Errorf("the index by digest: %v; the platform manifest: %v", first, second)
	}
	return second
}

// call is a method of Packages as a case calls it.
type call func(ctx context.Context, s *served.Packages, x target) error

// packageCases has one case per method of Packages that serves, lists
// or resolves packages, or judges a stored version for the exports: each
// refuses the target version of a denied address, and a denied or
// age-held version (addressOnly: the method names no version, so only
// the address rules refuse it; noOrigin: the method never asks an
// origin, whatever the policy, so that an export costs no origin request).
var packageCases = map[string]struct {
	call        call
	addressOnly bool
	noOrigin    bool
}{
	"StoredVersion": {noOrigin: true, call: func(ctx context.Context, s *served.Packages, x target) error {
		return s.StoredVersion(ctx, x.p, x.v)
	}},
	"StoredModuleVersion": {noOrigin: true, call: func(ctx context.Context, s *served.Packages, x target) error {
		return s.StoredModuleVersion(ctx, x.m, x.mv)
	}},
	"CheckOrigin": {addressOnly: true, call: func(ctx context.Context, s *served.Packages, x target) error {
		return s.CheckOrigin(x.p)
	}},
	"CheckModuleOrigin": {addressOnly: true, call: func(ctx context.Context, s *served.Packages, x target) error {
		return s.CheckModuleOrigin(x.m)
	}},
	"Versions": {call: func(ctx context.Context, s *served.Packages, x target) error {
		list, _, err := s.Versions(ctx, x.p)
		if err != nil {
			return err
		}
		if slices.Contains(list.Names(), x.v.String()) {
			return nil
		}
		return errLeftOut
	}},
	"Package": {call: func(ctx context.Context, s *served.Packages, x target) error {
		_, err := s.Package(ctx, x.p, x.v, nil)
		return err
	}},
	"Evidence": {call: func(ctx context.Context, s *served.Packages, x target) error {
		_, err := s.Evidence(ctx, x.p, x.v, nil)
		return err
	}},
	"OpenArchive": {call: func(ctx context.Context, s *served.Packages, x target) error {
		a, err := s.OpenArchive(ctx, x.p, x.v, x.pl)
		return closeIt(a, err)
	}},
	"EnsureArchive": {call: func(ctx context.Context, s *served.Packages, x target) error {
		_, err := s.EnsureArchive(ctx, x.p, x.v, x.pl)
		return err
	}},
	"Index": {call: func(ctx context.Context, s *served.Packages, x target) error {
		_, err := s.Index(ctx, x.p, x.v)
		return err
	}},
	"IndexAnswer": {call: func(ctx context.Context, s *served.Packages, x target) error {
		_, _, err := s.IndexAnswer(ctx, x.p, x.v)
		return err
	}},
	"Manifest": {call: func(ctx context.Context, s *served.Packages, x target) error {
		_, ierr := s.Manifest(ctx, x.p, x.index)
		_, err := s.Manifest(ctx, x.p, x.manifest)
		return both(ierr, err)
	}},
	"ManifestAnswer": {call: func(ctx context.Context, s *served.Packages, x target) error {
		_, _, ierr := s.ManifestAnswer(ctx, x.p, x.index)
		_, _, err := s.ManifestAnswer(ctx, x.p, x.manifest)
		return both(ierr, err)
	}},
	"Blob": {call: func(ctx context.Context, s *served.Packages, x target) error {
		a, err := s.Blob(ctx, x.p, x.blob)
		return closeIt(a, err)
	}},
	"ModuleVersions": {call: func(ctx context.Context, s *served.Packages, x target) error {
		list, _, err := s.ModuleVersions(ctx, x.m)
		if err != nil {
			return err
		}
		if _, listed := list.OriginSpelling(x.mv); listed {
			return nil
		}
		return errLeftOut
	}},
	"ModuleLocation": {call: func(ctx context.Context, s *served.Packages, x target) error {
		_, err := s.ModuleLocation(ctx, x.m, x.mv)
		return err
	}},
	"OpenModule": {call: func(ctx context.Context, s *served.Packages, x target) error {
		pkg, err := s.OpenModule(ctx, x.m, x.mv)
		return closeIt(pkg, err)
	}},
	"OpenModuleZip": {call: func(ctx context.Context, s *served.Packages, x target) error {
		z, err := s.OpenModuleZip(ctx, x.m, x.mv)
		return closeIt(z, err)
	}},
	"ModuleManifest": {call: func(ctx context.Context, s *served.Packages, x target) error {
		_, err := s.ModuleManifest(ctx, x.m, x.mv)
		return err
	}},
	"ModuleDocument": {call: func(ctx context.Context, s *served.Packages, x target) error {
		_, err := s.ModuleDocument(ctx, x.m, x.mmanifest)
		return err
	}},
	"ModuleBlob": {call: func(ctx context.Context, s *served.Packages, x target) error {
		z, err := s.ModuleBlob(ctx, x.m, x.mblob)
		return closeIt(z, err)
	}},
}

// notServing are the methods of Packages that serve no package, each
// with why: what the cache holds and its state, listed for the status
// page and sync.
var notServing = map[string]string{
	"Config":                 "the engine's configuration",
	"Reuse":                  "whether an answer already given holds (a new policy ends it)",
	"Stats":                  "the cache's counts",
	"CachedSize":             "the size of a cached archive, by sha256, after sync's EnsureArchive",
	"ListCachedAfter":        "the status page's listing of the cache; what the policy holds back is shown as withheld",
	"ListCachedModulesAfter": "the status page's listing of the cache",
	"Withheld":               "what is not served, and why",
	"CacheChecker":           "the check of the whole cache",
}

// coveredMethods walks the method set of typ (a pointer to a type of the
// layer): every method must have a case in cases (named casesName) for a
// denied and an age-held version, or a reason in notServing (named
// skipName), and every case must name a method. It returns the method
// names, sorted.
func coveredMethods[C any](t *testing.T, typ reflect.Type, cases map[string]C, casesName string, notServing map[string]string, skipName string) []string {
	t.Helper()
	var names []string
	for i := range typ.NumMethod() {
		name := typ.Method(i).Name
		names = append(names, name)
		_, isCase := cases[name]
		_, skip := notServing[name]
		if !isCase && !skip {
			t.Errorf("%s.%s has no case in %s for a denied and an age-held version (nor a reason in %s)", typ.Elem(), name, casesName, skipName)
		}
	}
	for name := range cases {
		if !slices.Contains(names, name) {
			t.Errorf("%s names %s, which %s does not have", casesName, name, typ.Elem())
		}
	}
	sort.Strings(names)
	return names
}

// TestEveryMethodRefuses walks the method set of served.Packages: every
// method is either one that serves no package (notServing, with why)
// or has a case in packageCases, and every case refuses, on a mirror
// that served the versions before the policy changed: a denied address
// (with the origin stalled, and asked nothing), a deny_version, and a
// minimum release age that holds the versions. A method added later
// without a case fails here, so no way in can skip the layer.
func TestEveryMethodRefuses(t *testing.T) {
	names := coveredMethods(t, reflect.TypeOf(&served.Packages{}), packageCases, "packageCases", notServing, "notServing")
	if t.Failed() {
		return
	}
	for _, sc := range []struct {
		name, policy string
		rule         string
		address      bool // the address is refused
	}{
		{"deny", `deny = ["P", "M"]`, policy.RuleDeny, true},
		{"deny_version", `
deny_version "P" {
  versions = "= 1.0.0"
  reason   = "CVE-2026-0004"
}
deny_version "M" {
  versions = "= 1.0.0"
  reason   = "CVE-2026-0004"
}`, policy.RuleDenyVersion, false},
		{"min_release_age", `minimum_release_age = "72h"`, policy.RuleMinReleaseAge, false},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			h, pkgs, x, _ := servedRig(t)
			src := strings.NewReplacer(`"P"`, `"`+x.p.String()+`"`, `"M"`, `"`+x.m.String()+`"`).Replace(sc.policy)
			h.Engine.SetPolicy(enginetest.DecodePolicy(t, src))
			if sc.address {
				h.Origin.SetLatency(time.Minute)
			}
			h.Origin.ResetHits()
			for _, name := range names {
				c, ok := packageCases[name]
				if !ok {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				hits := h.Origin.TotalHits()
				err := c.call(ctx, pkgs, x)
				cancel()
				if n := h.Origin.TotalHits() - hits; c.noOrigin && n != 0 {
					t.Errorf("%s: %d origin requests, want none", name, n)
				}
				var perr *gate.PolicyError
				switch {
				case c.addressOnly && !sc.address:
					if err != nil {
						t.Errorf("%s: %v, want it to pass (it names no version)", name, err)
					}
				case errors.Is(err, errLeftOut) && !sc.address:
				case !errors.As(err, &perr):
					t.Errorf("%s: %v, want refused by the package policy (%s)", name, err, sc.rule)
				case perr.Verdict.Rule != sc.rule:
					t.Errorf("%s: refused by %s, want %s", name, perr.Verdict.Rule, sc.rule)
				}
			}
			if sc.address {
				if n := h.Origin.TotalHits(); n != 0 {
					t.Errorf("%d origin requests for a denied address, want none", n)
				}
			}
		})
	}
}

// servedRig is a mirror on a fake clock whose provider version 1.0.0 was
// signed an hour ago and whose module version 1.0.0 was first listed an
// hour ago (0.9.0 of each is a year old), each served whole through the
// layer with no policy: archive, index, manifest and blob; package, zip,
// manifest and zip blob.
func servedRig(t *testing.T) (*harness.Harness, *served.Packages, target, *enginetest.FakeClock) {
	t.Helper()
	clock := enginetest.NewFakeClock()
	now := time.Now().Truncate(time.Second).Add(time.Hour)
	clock.Set(now.Add(-time.Hour))
	h := harness.New(t, harness.Options{Config: mirror.Config{Now: clock.Now, VersionsTTL: time.Minute}})
	o := h.Origin
	o.AddProvider(harness.NS, harness.Type, []string{"0.9.0", "1.0.0"}, []string{"linux_amd64"})
	o.SetSignedAt(harness.NS, harness.Type, "0.9.0", now.Add(-365*24*time.Hour))
	o.SetSignedAt(harness.NS, harness.Type, "1.0.0", now.Add(-time.Hour))
	m := harness.Module
	for _, v := range []string{"0.9.0", "1.0.0"} {
		o.AddTarball("vpc-"+v+".tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# " + v + "\n")}))
	}
	o.AddModule(m.Namespace, m.Name, m.System, "0.9.0", o.TarballURL("vpc-0.9.0.tar.gz"))
	side, err := h.Engine.NewOCI()
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := served.New(served.Parts{Providers: h.Engine, Modules: h.Engine.Modules(), Zips: h.Engine.Modules().Zips(), OCI: side, Stored: h.Engine.Inventory()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := pkgs.ModuleVersions(ctx, m); err != nil { // the first listing, an hour ago
		t.Fatal(err)
	}
	// The origin spells the new version "v1.0.0": the one version 1.0.0
	// the cases ask for, its release time kept under it.
	o.AddModule(m.Namespace, m.Name, m.System, "v1.0.0", o.TarballURL("vpc-1.0.0.tar.gz"))
	clock.Set(now)
	x := target{p: h.Provider(), v: harness.MustVersion(t, "1.0.0"), pl: harness.MustPlatform(t, "linux_amd64"), m: m, mv: harness.MustVersion(t, "1.0.0")}
	if _, _, err := pkgs.ModuleVersions(ctx, m); err != nil { // 1.0.0 first listed now
		t.Fatal(err)
	}
	a, err := pkgs.OpenArchive(ctx, x.p, x.v, x.pl)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, a)
	a.Close()
	h.WaitIdle()
	index, err := pkgs.Index(ctx, x.p, x.v)
	if err != nil {
		t.Fatal(err)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(index.Bytes, &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("index %s: %v", index.Bytes, err)
	}
	x.index, x.manifest = index.Digest, idx.Manifests[0].Digest
	if _, err := pkgs.Manifest(ctx, x.p, x.manifest); err != nil {
		t.Fatal(err)
	}
	x.blob = digest.NewDigestFromEncoded(digest.SHA256, o.SHA256(harness.NS, harness.Type, "1.0.0", "linux_amd64"))
	doc, err := pkgs.ModuleManifest(ctx, m, x.mv)
	if err != nil {
		t.Fatal(err)
	}
	var man ocispec.Manifest
	if err := json.Unmarshal(doc.Bytes, &man); err != nil || len(man.Layers) != 1 {
		t.Fatalf("module manifest %s: %v", doc.Bytes, err)
	}
	x.mmanifest, x.mblob = doc.Digest, man.Layers[0].Digest
	// Everything a case asks answers with no policy.
	for name, c := range packageCases {
		if err := c.call(ctx, pkgs, x); err != nil {
			t.Fatalf("%s with no policy: %v", name, err)
		}
	}
	h.WaitIdle()
	return h, pkgs, x, clock
}

// TestVersionRulesDecideBeforeOrigin: a version that deny_version
// refuses is refused by every method given it, or a digest of it,
// before anything asks an origin, as an address the policy refuses is:
// with the version lists stale, a minimum release age in force (whose
// dating would relist) and the origin stalled, each answers the
// operator's refusal at once, with no origin request.
func TestVersionRulesDecideBeforeOrigin(t *testing.T) {
	h, pkgs, x, clock := servedRig(t)
	src := strings.NewReplacer(`"P"`, `"`+x.p.String()+`"`, `"M"`, `"`+x.m.String()+`"`).Replace(`
minimum_release_age = "72h"
deny_version "P" {
  versions = "= 1.0.0"
  reason   = "CVE-2026-0004"
}
deny_version "M" {
  versions = "= 1.0.0"
  reason   = "CVE-2026-0004"
}`)
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, src))
	clock.Add(time.Hour) // every version list stale
	h.Origin.SetLatency(time.Minute)
	h.Origin.ResetHits()
	listing := map[string]bool{"Versions": true, "ModuleVersions": true}
	for _, name := range slices.Sorted(maps.Keys(packageCases)) {
		c := packageCases[name]
		if c.addressOnly || listing[name] {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		hits := h.Origin.TotalHits()
		start := time.Now()
		err := c.call(ctx, pkgs, x)
		cancel()
		if n := h.Origin.TotalHits() - hits; n != 0 {
			t.Errorf("%s: %d origin requests for a version deny_version refuses, want none", name, n)
		}
		var perr *gate.PolicyError
		if !errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleDenyVersion {
			t.Errorf("%s: %v (after %s), want refused by deny_version at once", name, err, time.Since(start).Round(time.Millisecond))
		}
	}
	// Lifted, the versions refused undated are not listed as held for a
	// release time not known: the age gate lists them once it dates them.
	h.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	for _, w := range pkgs.Withheld() {
		if w.Rule != "" && w.AvailableAt.IsZero() && w.Version == "1.0.0" {
			t.Errorf("after deny_version was lifted, %s %s is listed as held with its release time not known", w.Provider, w.Version)
		}
	}
}
