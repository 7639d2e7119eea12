package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/airgap"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/metrics"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/proxy"
	"github.com/tfmirror/tfmirror/v2/proxy/releasesdoor"
	"github.com/tfmirror/tfmirror/v2/releases"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// releasesFlags are the flags of the CLI releases side that export and
// import take: the products served and the publisher keys, which decide
// what an export carries and what an import takes. Through a running
// serve, the serve's apply.
var releasesFlags = []string{"releases-hashicorp-products", "releases-hashicorp-keys", "releases-opentofu-keys"}

// releasesConfig is what cfg says of where the CLI releases come from:
// the publishers' URLs and HashiCorp's products.
func releasesConfig(cfg settings.Config) releases.Config {
	return releases.Config{
		HashiCorpURL:        cfg.ReleasesHashiCorpURL,
		HashiCorpProducts:   cfg.ReleasesHashiCorpProducts,
		OpenTofuDownloadURL: cfg.ReleasesOpenTofuURL,
		OpenTofuAPIURL:      cfg.ReleasesOpenTofuAPIURL,
	}
}

// openReleases builds the CLI releases side on the engine, its cache and
// its origin client (whose allowed origins decide which publishers it may
// reach).
func openReleases(cfg settings.Config, logger *slog.Logger, client *discovery.Client, engine *mirror.Engine, store *cache.Store, met *metrics.Metrics) (*releases.Releases, error) {
	rcfg := releasesConfig(cfg)
	rcfg.ListTTL = cfg.VersionsTTL
	rcfg.StaleAfter = engine.Config().StaleAfter       // as the providers' and modules' lists
	rcfg.OriginRefused = engine.Config().OriginRefused // the status page's origin rows
	rcfg.OriginTimeout = metadataStages * client.MaxRequestTime()
	rcfg.ArchiveLimits = verify.Limits{MaxUnpackedBytes: cfg.ArchiveMaxUnpacked, MaxEntries: cfg.ArchiveMaxEntries}
	rcfg.Offline = cfg.Offline
	rcfg.Logger = logger
	if met != nil {
		rcfg.Metrics = met
	}
	var err error
	if rcfg.HashiCorpKeys, err = readArmoredKeys(cfg.ReleasesHashiCorpKeys); err != nil {
		return nil, fmt.Errorf("--releases-hashicorp-keys: %w", err)
	}
	if rcfg.OpenTofuKeys, err = readArmoredKeys(cfg.ReleasesOpenTofuKeys); err != nil {
		return nil, fmt.Errorf("--releases-opentofu-keys: %w", err)
	}
	return releases.New(rcfg, client, engine, store)
}

// servedReleases is the CLI releases side rel behind the package policy
// in force in engine (package mirror/served): the releases door and sync
// reach the CLI releases through it. A version list's lookups of release
// dates wait rel.ListWait at most, all together (the wait before a list
// is served stale, at most one origin request's time limit).
func servedReleases(rel *releases.Releases, engine *mirror.Engine, logger *slog.Logger, met *metrics.Metrics) (*served.Releases, error) {
	rcfg := served.ReleasesConfig{Releases: rel, Policy: engine, ListWait: rel.ListWait(), Logger: logger}
	if met != nil {
		rcfg.Metrics = met
	}
	return served.NewReleases(rcfg)
}

// readArmoredKeys reads the ASCII-armored public key blocks of a file
// ("" : none, the shipped keys), as every file of keys is read
// (internal/inputfile.ReadTrusted): never waiting on a FIFO, within
// maxKeyringBytes, and refused when users other than its owner may write
// it.
func readArmoredKeys(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	data, err := inputfile.ReadTrusted(path, maxKeyringBytes)
	if err != nil {
		return nil, err
	}
	const begin = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
	var keys []string
	for _, block := range strings.Split(string(data), begin)[1:] {
		keys = append(keys, begin+block)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s holds no ASCII-armored public key", path)
	}
	return keys, nil
}

// openReleasesDoor is the front door of the CLI releases, under /releases/;
// mirrorURL is the mirror's URL in force for a request
// (proxy.Server.MirrorURL), which its documents name; it serves the
// publishers cliPublishers gives.
func openReleasesDoor(logger *slog.Logger, cfg settings.Config, rel *served.Releases, auth *proxy.Auth, mirrorURL func(*http.Request) string) (*releasesdoor.Door, error) {
	pubs, _ := cliPublishers(cfg)
	if pubs == nil {
		pubs = []releases.Publisher{} // none, not the default of both
	}
	return releasesdoor.New(releasesdoor.Config{MirrorURL: mirrorURL, Auth: auth, Logger: logger, Publishers: pubs}, rel)
}

// cliAirGap is the CLI releases side as export and import take it
// (airgap.CLISide): an export carries the cached CLI versions the package
// policy lets be served (asking served, the side behind the policy) and
// an import takes them, verified with the publisher keys this process is
// configured with.
type cliAirGap struct {
	rel    *releases.Releases
	served *served.Releases
}

var _ airgap.CLISide = cliAirGap{}

func (c cliAirGap) CLIReleases() airgap.CLIReleases { return c.rel.AirGap() }

func (c cliAirGap) ServedCLI() airgap.ServedCLI { return c.served }

// adminOptionsOf are the admin operations' options on p: o, with the CLI
// releases side that sync's cli blocks fill, exports carry and imports
// take.
func (p *engineParts) adminOptionsOf(o admin.Options) admin.Options {
	o.Releases = p.releases
	o.CLIAirGap = cliAirGap{rel: p.cliSide, served: p.releases}
	return o
}

// cliPublishers are the publishers the CLI releases door serves: those
// whose hosts (of cfg's URLs, or the defaults) are all allowed origins,
// or, sealed (--offline, when no origin is asked), both, whose releases
// it holds are served whatever the origins. off says, for the status
// page, which hosts to add for a publisher left out; none is served by
// default, and then the status page gives no installer settings, which
// could only fail, and says why instead.
func cliPublishers(cfg settings.Config) (served []releases.Publisher, off map[releases.Publisher]string) {
	all := []releases.Publisher{releases.HashiCorp, releases.OpenTofu}
	if cfg.Offline {
		return all, nil
	}
	allowed := map[svchost.Hostname]bool{}
	for _, h := range cfg.AllowedOrigins {
		if host, err := addrs.ParseHost(strings.TrimSpace(h)); err == nil {
			allowed[host] = true
		}
	}
	hosts := releasesConfig(cfg).PublisherHosts()
	off = map[releases.Publisher]string{}
	for _, p := range all {
		ok := len(hosts[p]) > 0
		var shown []string
		for _, h := range hosts[p] {
			ok = ok && allowed[h]
			shown = append(shown, h.ForDisplay())
		}
		if ok {
			served = append(served, p)
		} else {
			off[p] = strings.Join(shown, " and ")
		}
	}
	return served, off
}

// cliReleasesStatus is what the status page says of the CLI releases
// door (proxy.Config.CLIReleasesOff, CLIReleases): why it serves neither
// publisher, or each installer's settings for those it serves, after a
// line for the one it does not.
func cliReleasesStatus(cfg settings.Config) (off string, snippets func(mirrorURL string) string) {
	served, left := cliPublishers(cfg)
	if len(served) == 0 {
		return fmt.Sprintf("their publishers' hosts are not allowed origins: add %s (HashiCorp) or %s (OpenTofu) to allowed_origins",
			left[releases.HashiCorp], left[releases.OpenTofu]), nil
	}
	var note string
	for _, p := range []struct {
		pub  releases.Publisher
		name string
	}{{releases.HashiCorp, "HashiCorp"}, {releases.OpenTofu, "OpenTofu"}} {
		if hosts, ok := left[p.pub]; ok {
			note += fmt.Sprintf("# %s's releases are not served: add %s to allowed_origins\n\n", p.name, hosts)
		}
	}
	return "", func(mirrorURL string) string { return note + releasesdoor.Snippets(mirrorURL, served...) }
}
