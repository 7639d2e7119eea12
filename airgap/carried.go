package airgap

// The versions an export carries, as the package policy judges them and
// its reports name them: the OCI layout export judges every tag an
// earlier export into its directory wrote through them (judgeEarlier).

import (
	"context"
	"errors"
	"fmt"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// carriedKind is what a carried version is a version of.
type carriedKind int

const (
	carriedProvider carriedKind = iota + 1
	carriedModule
	carriedCLI
)

// carried names a version an export carries: its kind, the address the
// package policy judges it by (a provider's or module's normal form,
// releases.Address of a CLI product) and its version as the export's
// files spell it (a module's as its origin does).
type carried struct {
	kind    carriedKind
	address string
	version string
}

// providerCarried is the provider version of the provider address (its
// normal form) and the version (canonical).
func providerCarried(address, version string) carried {
	return carried{kind: carriedProvider, address: address, version: version}
}

// moduleCarried is the module version of the module address (in its
// normal form when it parses) and the version as its origin spells it.
func moduleCarried(address, version string) carried {
	if m, err := addrs.ParseModule(address); err == nil {
		address = m.String()
	}
	return carried{kind: carriedModule, address: address, version: version}
}

// String names the version as an export's reports do: "ADDRESS VERSION"
// for a provider version, "module ADDRESS VERSION", "cli ADDRESS
// VERSION".
func (c carried) String() string {
	switch c.kind {
	case carriedModule:
		return "module " + c.address + " " + c.version
	case carriedCLI:
		return "cli " + c.address + " " + c.version
	}
	return c.address + " " + c.version
}

// stored is the served layer's answer on c, which the cache may no longer
// hold (pkgs for provider and module versions, cli for CLI versions): nil
// when the package policy lets it be served now, its *gate.PolicyError
// when it refuses it, and another error when c cannot be judged (an
// address or version no door serves, no layer to ask).
func (c carried) stored(ctx context.Context, pkgs Served, cli ServedCLI) error {
	switch c.kind {
	case carriedProvider:
		p, perr := addrs.ParseProvider(c.address)
		v, verr := addrs.ParseSemver(c.version)
		if err := errors.Join(perr, verr); err != nil {
			return err
		}
		return pkgs.StoredVersion(ctx, p, v)
	case carriedModule:
		m, merr := addrs.ParseModule(c.address)
		v, verr := addrs.ParseModuleVersion(c.version)
		if err := errors.Join(merr, verr); err != nil {
			return err
		}
		return pkgs.StoredModuleVersion(ctx, m, v)
	case carriedCLI:
		mr, ok := c.release()
		if !ok {
			return fmt.Errorf("%s is not a CLI version this release serves", c)
		}
		return storedCLI(cli, mr)
	}
	return fmt.Errorf("%s: a version of no kind an export carries", c)
}

// release is the CLI version c names, when it can name a directory.
func (c carried) release() (manifestRelease, bool) {
	pub, product, ok := releases.ParseAddress(c.address)
	mr := manifestRelease{Publisher: string(pub), Product: product, Version: c.version}
	return mr, ok && mr.valid()
}
