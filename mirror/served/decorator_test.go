package served_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	digest "github.com/opencontainers/go-digest"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// refusingEngine is the engine's package API with a policy that denies
// every address: its checks refuse, and it has nothing else (the nil
// interfaces it embeds panic when anything below the checks is asked).
type refusingEngine struct {
	served.Providers
	served.Modules
	served.OCI
}

func (refusingEngine) CheckOrigin(addrs.Provider) error     { return nil }
func (refusingEngine) CheckModuleOrigin(addrs.Module) error { return nil }
func (refusingEngine) CheckAddress(kind policy.Kind, address string) error {
	return &gate.PolicyError{Kind: kind, Address: address, Verdict: policy.Verdict{Rule: policy.RuleDeny}}
}

// TestAddressRulesDecideFirst: every method of Packages that names a
// provider or a module asks the address rules before it hands the call
// down, so that a refused address reaches nothing below the layer.
func TestAddressRulesDecideFirst(t *testing.T) {
	eng := refusingEngine{}
	pkgs, err := served.New(served.Parts{Providers: eng, Modules: eng, OCI: eng})
	if err != nil {
		t.Fatal(err)
	}
	p, err := addrs.ParseProvider("registry.test/acme/thing")
	if err != nil {
		t.Fatal(err)
	}
	x := target{p: p, v: harness.MustVersion(t, "1.0.0"), pl: harness.MustPlatform(t, "linux_amd64"), m: harness.Module, mv: "1.0.0",
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

// TestNewRequiresTheEngine: a Packages over no provider or module API is
// refused.
func TestNewRequiresTheEngine(t *testing.T) {
	eng := refusingEngine{}
	for _, parts := range []served.Parts{{}, {Providers: eng}, {Modules: eng}} {
		if _, err := served.New(parts); err == nil {
			t.Errorf("New(%+v) succeeded", parts)
		}
	}
}
