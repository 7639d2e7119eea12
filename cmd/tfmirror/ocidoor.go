package main

import (
	"fmt"
	"log/slog"
	"net/http"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/proxy"
	"github.com/tfmirror/tfmirror/v2/proxy/ocidoor"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

// openOCIDoor wires the OCI distribution front door over the engine's OCI
// side. mirrorURL is the mirror's URL in force for a request
// (proxy.Server.MirrorURL), whose host its token realm names.
func openOCIDoor(cfg settings.Config, logger *slog.Logger, parts *engineParts, auth *proxy.Auth, mirrorURL func(*http.Request) string) (*ocidoor.Door, error) {
	names, err := oci.NewNames(cfg.OCIProviderPrefix, cfg.OCIModulePrefix)
	if err != nil {
		return nil, err
	}
	pkgs, err := parts.packages()
	if err != nil {
		return nil, err
	}
	dcfg := ocidoor.Config{Names: names, Auth: auth, Logger: logger, Modules: pkgs, MirrorURL: mirrorURL}
	return ocidoor.New(dcfg, pkgs)
}

// ociBlock returns the status page's ready-to-paste oci_mirror block, for
// the mirror's host as the page names it (the public URL's, else the
// request's).
func ociBlock(cfg settings.Config) func(host string) string {
	return func(host string) string {
		return fmt.Sprintf("provider_installation {\n  oci_mirror {\n    repository_template = \"%s/%s/${hostname}/${namespace}/${type}\"\n  }\n}\n", host, cfg.OCIProviderPrefix)
	}
}

// ociSide returns the engine's OCI side, made once: the OCI front door
// and OCI layout exports share it, so that both keep the same documents
// through one record writer.
func (p *engineParts) ociSide() (*mirror.OCI, error) {
	p.ociOnce.Do(func() { p.oci, p.ociErr = p.engine.NewOCI() })
	return p.oci, p.ociErr
}

// packages returns the engine's package API behind the package policy
// (package mirror/served), over the engine and its OCI side, made once:
// every front door, sync and every export reach packages through it.
func (p *engineParts) packages() (*served.Packages, error) {
	p.pkgsOnce.Do(func() {
		side, err := p.ociSide()
		if err != nil {
			p.pkgsErr = err
			return
		}
		p.pkgs, p.pkgsErr = served.New(served.Parts{Providers: p.engine, Modules: p.engine.Modules(), Zips: p.engine.Modules().Zips(), OCI: side, Stored: p.engine.Inventory()})
	})
	return p.pkgs, p.pkgsErr
}

// ociLayoutOption is the admin API's OCILayout option: the engine's
// packages behind the package policy (over its OCI side) and the
// repository names cfg sets; nil when cfg sets none.
func ociLayoutOption(cfg settings.Config, parts *engineParts) (*admin.OCILayout, error) {
	if cfg.OCIProviderPrefix == "" && cfg.OCIModulePrefix == "" {
		return nil, nil // a command that exports nothing (sync): not configured
	}
	names, err := oci.NewNames(cfg.OCIProviderPrefix, cfg.OCIModulePrefix)
	if err != nil {
		return nil, err
	}
	pkgs, err := parts.packages()
	if err != nil {
		return nil, err
	}
	return &admin.OCILayout{Artifacts: pkgs, Names: names}, nil
}

// ociModuleSource returns the status page's example oci:// module
// source, for the host the page is reached at: a module of an allowed
// origin, OpenTofu's registry when it is one (the clients of the OCI
// door are OpenTofu's), else the first, its host written as the door's
// repository names write it (oci.HostComponent: a port as "__PORT").
func ociModuleSource(cfg settings.Config) func(host string) string {
	origin := oci.HostComponent(exampleOrigin(cfg.AllowedOrigins))
	return func(host string) string {
		return fmt.Sprintf("module \"vpc\" {\n  source = \"oci://%s/%s/%s/NAMESPACE/NAME/SYSTEM?tag=VERSION\"\n}\n", host, cfg.OCIModulePrefix, origin)
	}
}

// exampleOrigin is the allowed origin examples name: registry.opentofu.org
// when allowed, else the first allowed origin (as host names compare).
func exampleOrigin(allowed []string) svchost.Hostname {
	const opentofu = svchost.Hostname("registry.opentofu.org")
	if len(allowed) == 0 {
		allowed = discovery.DefaultAllowedOrigins()
	}
	var hosts []svchost.Hostname
	for _, o := range allowed {
		h, err := addrs.ParseHost(o)
		if err != nil {
			continue // refused at start
		}
		if h == opentofu {
			return h
		}
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return opentofu
	}
	return hosts[0]
}
