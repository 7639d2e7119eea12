package airgap

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// layerRefusal is what a stand-in served layer answers for what it
// refuses: a deny_version with a reason no policy of the engine's has.
func layerRefusal(kind policy.Kind, address, version string) error {
	return &gate.PolicyError{Kind: kind, Address: address, Version: version,
		Verdict: policy.Verdict{Rule: policy.RuleDenyVersion, Detail: "the layer", Reason: "refused by the served layer"}}
}

// refusingLayer is the served layer in front of an engine that refuses
// the addresses it names, whatever the engine's own policy.
type refusingLayer struct {
	Served
	refused map[string]bool
}

func (l refusingLayer) StoredVersion(ctx context.Context, p addrs.Provider, v versions.Version) error {
	if l.refused[p.String()] {
		return layerRefusal(policy.Provider, p.String(), v.String())
	}
	return l.Served.StoredVersion(ctx, p, v)
}

func (l refusingLayer) StoredModuleVersion(ctx context.Context, m addrs.Module, version versions.Version) error {
	if l.refused[m.String()] {
		return layerRefusal(policy.Module, m.String(), version.String())
	}
	return l.Served.StoredModuleVersion(ctx, m, version)
}

// refusingCLILayer is refusingLayer for the CLI releases.
type refusingCLILayer struct {
	ServedCLI
	refused map[string]bool
}

func (l refusingCLILayer) StoredVersion(pub releases.Publisher, product, version string) error {
	if addr := releases.Address(pub, product); l.refused[addr] {
		return layerRefusal("cli", addr, version)
	}
	return l.ServedCLI.StoredVersion(pub, product, version)
}

// layeredCLI is a cliEng whose CLI releases are behind another layer.
type layeredCLI struct {
	cliEng
	layer ServedCLI
}

func (e layeredCLI) ServedCLI() ServedCLI { return e.layer }

// netProvider is the fake origin's acme/net, which most tests cache.
var netProvider = addrs.Provider{Hostname: enginetest.OriginHost, Namespace: "acme", Type: "net"}

// cacheArchive caches the archive of version of p for platform (os_arch)
// through engine, read whole, and waits for the engine's work to end.
func cacheArchive(t *testing.T, engine *mirror.Engine, p addrs.Provider, version, platform string) {
	t.Helper()
	v, err := addrs.ParseSemver(version)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := addrs.ParsePlatform(platform)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := engine.OpenArchive(ctx, p, v, pl)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(io.Discard, a)
	a.Close()
	if err != nil {
		t.Fatal(err)
	}
	mirror.WaitIdle(ctx, engine) //nolint:errcheck // a test's wait
}

// exportAll exports everything engine caches, signed by key, into a new
// directory, which it returns.
func exportAll(t *testing.T, engine *mirror.Engine, key *ExportKey) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(string) {}); err != nil {
		t.Fatal(err)
	}
	return out
}

// cachedNetAndTarball is an engine before a fake origin that has cached
// provider p (acme/net 1.0.0, linux_amd64) and the tarball module 0.1.0.
func cachedNetAndTarball(t *testing.T) (engine *mirror.Engine, p addrs.Provider) {
	t.Helper()
	o := enginetest.StartOrigin(t, fakeorigin.Options{})
	o.AddProvider("acme", "net", []string{"1.0.0"}, []string{"linux_amd64"})
	o.AddTarball("tarball-0.1.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# tarball\n")}))
	o.AddModule("acme", "tarball", "aws", "0.1.0", o.TarballURL("tarball-0.1.0.tar.gz"))
	engine = newEngine(t, o)
	cacheArchive(t, engine, netProvider, "1.0.0", "linux_amd64")
	moduleBytes(t, engine, tarballModule, "0.1.0")
	return engine, netProvider
}

// TestExportAsksTheServedLayer: the bundle export leaves out what the
// served layer refuses, and only that: on an engine with no policy of
// its own, a provider, a module and a CLI version the layer refuses are
// reported, counted as held and not written, while the rest is exported;
// with the layer over the engine's own policy, a deny_version on the
// module leaves it alone out. An export that judged versions by itself
// would export everything the first time.
func TestExportAsksTheServedLayer(t *testing.T) {
	engine, p := cachedNetAndTarball(t)
	ctx := context.Background()
	providerDir := filepath.Join(p.Hostname.ForDisplay(), p.Namespace, p.Type)

	layer := refusingLayer{Served: servedBy(t, engine, nil), refused: map[string]bool{p.String(): true, tarballModule.String(): true}}
	out := filepath.Join(t.TempDir(), "out")
	var reports []string
	sum, err := Export(ctx, engine, layer, nil, Selection{}, out, newKey(t, "exporter"), func(s string) { reports = append(reports, s) })
	if err != nil || sum.Held != 2 || sum.Written != 0 || sum.Modules != 0 || sum.Failed != 0 || len(reports) != 2 {
		t.Fatalf("export behind a refusing layer: %+v, %v, %q", sum, err, reports)
	}
	for _, r := range reports {
		if !strings.Contains(r, "refused by the served layer") {
			t.Errorf("report %q does not give the layer's reason", r)
		}
	}
	if fileExists(filepath.Join(out, providerDir)) || fileExists(filepath.Join(out, modulesDir)) {
		t.Error("what the layer refuses was written")
	}

	// The layer over the engine's policy: the module alone is denied.
	engine.SetPolicy(enginetest.DecodePolicy(t, `
deny_version "`+tarballModule.String()+`" {
  versions = "= 0.1.0"
  reason   = "CVE-2026-0005"
}
`))
	out = filepath.Join(t.TempDir(), "out")
	reports = nil
	sum, err = Export(ctx, engine, servedBy(t, engine, nil), nil, Selection{}, out, newKey(t, "exporter"), func(s string) { reports = append(reports, s) })
	if err != nil || sum.Held != 1 || sum.Written != 1 || sum.Modules != 0 || sum.Failed != 0 || len(reports) != 1 || !strings.Contains(reports[0], "CVE-2026-0005") {
		t.Fatalf("export behind the engine's policy: %+v, %v, %q", sum, err, reports)
	}
	if !fileExists(filepath.Join(out, providerDir, addrs.ArchiveName(p.Type, "1.0.0", "linux_amd64"))) || fileExists(filepath.Join(out, modulesDir)) {
		t.Error("want the provider exported and the denied module left out")
	}

	// The CLI releases: tofu refused by the layer, terraform exported.
	_, side := cachedCLI(t)
	cli := layeredCLI{cliEng: cliOf(side), layer: refusingCLILayer{ServedCLI: side.Served, refused: map[string]bool{releases.Address(releases.OpenTofu, "tofu"): true}}}
	out = filepath.Join(t.TempDir(), "out")
	reports = nil
	sum, err = Export(ctx, cli, servedBy(t, side.Engine, nil), cli, Selection{}, out, newKey(t, "exporter"), func(s string) { reports = append(reports, s) })
	if err != nil || sum.Held != 1 || sum.CLIArchives != 1 || len(reports) != 1 || !strings.Contains(reports[0], "refused by the served layer") {
		t.Fatalf("export of the CLI releases behind a refusing layer: %+v, %v, %q", sum, err, reports)
	}
	if fileExists(filepath.Join(out, filepath.FromSlash(tofuRelDir))) || !fileExists(filepath.Join(out, filepath.FromSlash(tfRelDir))) {
		t.Error("want terraform exported and tofu left out")
	}
}

// TestImportAsksTheServedLayer: an import stores what verifies whatever
// the policy says, and reports as held what the served layer refuses,
// not what the importing side judges by itself.
func TestImportAsksTheServedLayer(t *testing.T) {
	o, out, key := exportedCLI(t)
	b := sealedCLI(t, o)
	refusing := layeredCLI{cliEng: b, layer: refusingCLILayer{ServedCLI: b.served, refused: map[string]bool{releases.Address(releases.HashiCorp, "terraform"): true}}}
	sum, reports := importCLI(t, refusing, refusing, out, key)
	if sum.Failed != 0 || sum.CLIHeld != 1 || sum.CLIArchives != 2 || len(reports) != 1 || !strings.Contains(reports[0], "refused by the served layer") {
		t.Fatalf("import: %+v %q", sum, reports)
	}
}
