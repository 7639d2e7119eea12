package served_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/failure"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// refusingEngine is the engine's package API with a policy that denies
// every address: its checks refuse, and it has nothing else (the nil
// interfaces it embeds panic when anything below the checks is asked).
type refusingEngine struct {
	served.Providers
	served.Modules
	served.Zips
	served.OCI
	served.Stored
	denyAll *policy.Policy
}

func (e refusingEngine) Policy() *policy.Policy { return e.denyAll }

func (refusingEngine) CheckOrigin(addrs.Provider) error     { return nil }
func (refusingEngine) CheckModuleOrigin(addrs.Module) error { return nil }
func (refusingEngine) CheckAddress(kind policy.Kind, address string) error {
	return &gate.PolicyError{Kind: kind, Address: address, Verdict: policy.Verdict{Rule: policy.RuleDeny}}
}

// TestAddressRulesDecideFirst: every method of Packages that names a
// provider or a module asks the address rules before it hands the call
// down, so that a refused address reaches nothing below the layer.
func TestAddressRulesDecideFirst(t *testing.T) {
	eng := refusingEngine{denyAll: enginetest.DecodePolicy(t, `deny = ["*/*/*", "*/*/*/*"]`)}
	pkgs, err := served.New(served.Parts{Providers: eng, Modules: eng, Zips: eng, OCI: eng, Stored: eng})
	if err != nil {
		t.Fatal(err)
	}
	p, err := addrs.ParseProvider("registry.test/acme/thing")
	if err != nil {
		t.Fatal(err)
	}
	x := target{p: p, v: harness.MustVersion(t, "1.0.0"), pl: harness.MustPlatform(t, "linux_amd64"), m: harness.Module, mv: harness.MustVersion(t, "1.0.0"),
		index: digest.FromString("index"), manifest: digest.FromString("manifest"), blob: digest.FromString("blob"),
		mmanifest: digest.FromString("module manifest"), mblob: digest.FromString("module blob")}
	for name, c := range packageCases {
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("handed down past a refused address: %v", r)
				}
			}()
			return c.call(context.Background(), pkgs, x)
		}()
		var perr *gate.PolicyError
		if !errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleDeny {
			t.Errorf("%s: %v, want refused by the address rules", name, err)
		}
	}
}

// TestNewRequiresTheEngine: a Packages over no provider, module or
// module zip API is refused.
func TestNewRequiresTheEngine(t *testing.T) {
	eng := refusingEngine{}
	for _, parts := range []served.Parts{{}, {Providers: eng}, {Modules: eng}, {Zips: eng}, {Providers: eng, Modules: eng}, {Providers: eng, Zips: eng}} {
		if _, err := served.New(parts); err == nil {
			t.Errorf("New(%+v) succeeded", parts)
		}
	}
}

// failingEngine is the engine's package API before an origin whose
// circuit breaker is open: every address passes the policy, and every
// call that reaches below the checks fails with the origin client's
// error.
type failingEngine struct {
	served.Providers
	err error
}

func (f failingEngine) CheckOrigin(addrs.Provider) error       { return nil }
func (f failingEngine) CheckModuleOrigin(addrs.Module) error   { return nil }
func (f failingEngine) CheckAddress(policy.Kind, string) error { return nil }
func (f failingEngine) Versions(context.Context, addrs.Provider) (*records.VersionList, mirror.ListState, error) {
	return nil, mirror.ListState{}, f.err
}
func (f failingEngine) Package(context.Context, addrs.Provider, versions.Version, []addrs.Platform) (*mirror.Package, error) {
	return nil, f.err
}
func (f failingEngine) Evidence(context.Context, addrs.Provider, versions.Version, []addrs.Platform) (*records.Evidence, error) {
	return nil, f.err
}
func (f failingEngine) OpenArchive(context.Context, addrs.Provider, versions.Version, addrs.Platform) (*mirror.Archive, error) {
	return nil, f.err
}
func (f failingEngine) EnsureArchive(context.Context, addrs.Provider, versions.Version, addrs.Platform) (records.Source, error) {
	return 0, f.err
}
func (f failingEngine) ModuleVersions(context.Context, addrs.Module) (*records.ModuleVersionList, modules.ListState, error) {
	return nil, modules.ListState{}, f.err
}
func (f failingEngine) ModuleLocation(context.Context, addrs.Module, versions.Version) (*records.ModuleRecord, error) {
	return nil, f.err
}
func (f failingEngine) OpenModule(context.Context, addrs.Module, versions.Version) (*modules.Package, error) {
	return nil, f.err
}
func (f failingEngine) OpenModuleZip(context.Context, addrs.Module, versions.Version) (*modules.Zip, error) {
	return nil, f.err
}
func (f failingEngine) ModuleManifest(context.Context, addrs.Module, versions.Version) (oci.Document, error) {
	return oci.Document{}, f.err
}
func (f failingEngine) ModuleDocument(context.Context, addrs.Module, digest.Digest) (oci.Document, error) {
	return oci.Document{}, f.err
}
func (f failingEngine) ModuleBlob(context.Context, addrs.Module, digest.Digest) (*modules.Zip, error) {
	return nil, f.err
}
func (f failingEngine) ListCachedModulesAfter(string, string, func(modules.Cached) error) error {
	return f.err
}
func (f failingEngine) Index(context.Context, addrs.Provider, versions.Version) (oci.Document, error) {
	return oci.Document{}, f.err
}
func (f failingEngine) IndexAnswer(context.Context, addrs.Provider, versions.Version) (oci.Document, func() bool, error) {
	return oci.Document{}, nil, f.err
}
func (f failingEngine) Manifest(context.Context, addrs.Provider, digest.Digest) (oci.Document, error) {
	return oci.Document{}, f.err
}
func (f failingEngine) ManifestAnswer(context.Context, addrs.Provider, digest.Digest) (oci.Document, func() bool, error) {
	return oci.Document{}, nil, f.err
}
func (f failingEngine) Blob(context.Context, addrs.Provider, digest.Digest) (*mirror.Archive, error) {
	return nil, f.err
}

// TestOriginFailuresInTheEnginesKinds: every method of Packages that
// reaches below the layer (all but those that ask no origin, noOrigin)
// reports an origin's failure in the engine's
// kinds (mirror/failure.OriginError, with the wait an open circuit
// breaker asks for), its message unchanged, so that the front doors map
// the engine's errors only; so does the check of an origin host the
// engine does not serve.
func TestOriginFailuresInTheEnginesKinds(t *testing.T) {
	origin := &discovery.OriginError{Host: "registry.test", Op: discovery.OpVersions,
		Err: &discovery.CircuitOpenError{Failures: 5, RetryAfter: time.Minute}}
	eng := failingEngine{err: fmt.Errorf("listing: %w", origin)}
	pkgs, err := served.New(served.Parts{Providers: eng, Modules: eng, Zips: eng, OCI: eng})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := addrs.ParseProvider("registry.test/acme/thing")
	x := target{p: p, v: harness.MustVersion(t, "1.0.0"), pl: harness.MustPlatform(t, "linux_amd64"), m: harness.Module, mv: harness.MustVersion(t, "1.0.0"),
		index: digest.FromString("index"), manifest: digest.FromString("manifest"), blob: digest.FromString("blob"),
		mmanifest: digest.FromString("module manifest"), mblob: digest.FromString("module blob")}
	cases := map[string]call{
		"ListCachedModulesAfter": func(ctx context.Context, s *served.Packages, x target) error {
			return s.ListCachedModulesAfter("", "", func(modules.Cached) error { return nil })
		},
	}
	for name, c := range packageCases {
		if !c.addressOnly && !c.noOrigin {
			cases[name] = c.call
		}
	}
	for name, c := range cases {
		err := c(context.Background(), pkgs, x)
		var fe *failure.OriginError
		switch {
		case !errors.As(err, &fe):
			t.Errorf("%s: %v (%T), want a failure.OriginError", name, err, err)
		case fe.Kind != failure.CircuitOpen || !fe.Wait || fe.RetryAfter != time.Minute:
			t.Errorf("%s: %+v, want the circuit open for a minute", name, fe)
		case err.Error() != eng.err.Error():
			t.Errorf("%s: %q, want the origin's message %q", name, err, eng.err)
		}
	}
	refused := refusingHost{failingEngine: eng}
	pkgs, err = served.New(served.Parts{Providers: refused, Modules: refused, Zips: refused})
	if err != nil {
		t.Fatal(err)
	}
	var fe *failure.OriginError
	if err := pkgs.CheckOrigin(p); !errors.As(err, &fe) || fe.Kind != failure.HostNotAllowed {
		t.Errorf("CheckOrigin of a host not served: %v, want failure.HostNotAllowed", err)
	}
	if err := pkgs.CheckModuleOrigin(x.m); !errors.As(err, &fe) || fe.Kind != failure.HostNotAllowed {
		t.Errorf("CheckModuleOrigin of a host not served: %v, want failure.HostNotAllowed", err)
	}
}

// refusingHost serves no origin host.
type refusingHost struct{ failingEngine }

func (refusingHost) CheckOrigin(p addrs.Provider) error {
	return fmt.Errorf("%w: %s", discovery.ErrHostNotAllowed, p.Hostname)
}

func (refusingHost) CheckModuleOrigin(m addrs.Module) error {
	return fmt.Errorf("%w: %s", discovery.ErrHostNotAllowed, m.Hostname)
}
