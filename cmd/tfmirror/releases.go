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
	rcfg.StaleAfter = engine.Config().StaleAfter // as the providers' and modules' lists
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
// reach the CLI releases through it.
func servedReleases(rel *releases.Releases, engine *mirror.Engine, logger *slog.Logger, met *metrics.Metrics) (*served.Releases, error) {
	rcfg := served.ReleasesConfig{Releases: rel, Policy: engine, Logger: logger}
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
// (proxy.Server.MirrorURL), which its documents name.
func openReleasesDoor(logger *slog.Logger, rel *served.Releases, auth *proxy.Auth, mirrorURL func(*http.Request) string) (*releasesdoor.Door, error) {
	return releasesdoor.New(releasesdoor.Config{MirrorURL: mirrorURL, Auth: auth, Logger: logger}, rel)
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

// cliReleasesOff says why the CLI releases door serves neither publisher
// (the hosts of its URLs, cfg's or the defaults, are not among the
// allowed origins, as by default), for the status page, which then gives
// no installer settings that could only fail; "" when it serves one.
func cliReleasesOff(cfg settings.Config) string {
	allowed := map[svchost.Hostname]bool{}
	for _, h := range cfg.AllowedOrigins {
		if host, err := addrs.ParseHost(strings.TrimSpace(h)); err == nil {
			allowed[host] = true
		}
	}
	hosts := releasesConfig(cfg).PublisherHosts()
	var shown [2][]string
	for i, p := range []releases.Publisher{releases.HashiCorp, releases.OpenTofu} {
		all := len(hosts[p]) > 0
		for _, h := range hosts[p] {
			all = all && allowed[h]
			shown[i] = append(shown[i], h.ForDisplay())
		}
		if all {
			return ""
		}
	}
	return fmt.Sprintf("their publishers' hosts are not allowed origins: add %s (HashiCorp) or %s (OpenTofu) to allowed_origins", strings.Join(shown[0], " and "), strings.Join(shown[1], " and "))
}
