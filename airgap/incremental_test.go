package airgap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// denyNetAndTarball is a policy denying acme/net 1.0.0 and the tarball
// module 0.1.0 (cachedNetAndTarball's versions).
func denyNetAndTarball(p addrs.Provider) string {
	return `
deny_version "` + tarballModule.String() + `" {
  versions = "= 0.1.0"
  reason   = "CVE-2026-0002"
}
deny_version "` + p.String() + `" {
  versions = "= 1.0.0"
  reason   = "CVE-2026-0003"
}
`
}

// exportedNetAndTarball exports the cache of cachedNetAndTarball's engine
// to a directory: the engine, its provider, the directory and the key
// that signed it.
func exportedNetAndTarball(t *testing.T) (*mirror.Engine, addrs.Provider, string, *ExportKey) {
	t.Helper()
	engine, p := cachedNetAndTarball(t)
	out, key := filepath.Join(t.TempDir(), "out"), newKey(t, "exporter")
	if sum, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(string) {}); err != nil || sum.Written != 1 || sum.Modules != 1 {
		t.Fatalf("first export: %+v %v", sum, err)
	}
	return engine, p, out, key
}

// TestIncrementalExportDropsDenied: an export into the directory of an
// earlier one, after a deny_version, carries what the mirror serves now:
// the versions denied since are not in its signed manifest nor its
// index.json, and their files are gone, though the earlier export by
// the same key wrote and signed them.
func TestIncrementalExportDropsDenied(t *testing.T) {
	engine, p, out, key := exportedNetAndTarball(t)
	ctx := context.Background()
	engine.SetPolicy(enginetest.DecodePolicy(t, denyNetAndTarball(p)))
	var reports []string
	sum, err := Export(ctx, engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(s string) { reports = append(reports, s) })
	if err != nil || sum.Held != 2 {
		t.Fatalf("export after the deny: %+v %v %q", sum, err, reports)
	}
	m, err := readManifest(out, key.keyring())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		if strings.Contains(f.Path, "_1.0.0_") || strings.Contains(f.Path, "/1.0.0.json") || strings.HasPrefix(f.Path, modulesDir+"/") || strings.HasSuffix(f.Path, "index.json") {
			t.Errorf("the manifest signs %s, of a version denied since the earlier export", f.Path)
		}
	}
	providerDir := filepath.Join(out, p.Hostname.ForDisplay(), p.Namespace, p.Type)
	for _, path := range []string{
		filepath.Join(providerDir, addrs.ArchiveName(p.Type, "1.0.0", "linux_amd64")),
		filepath.Join(providerDir, "index.json"),
		filepath.Join(moduleDir(out, tarballModule), "0.1.0.tar.gz"),
	} {
		if fileExists(path) {
			t.Errorf("%s is still in the export", path)
		}
	}
}

// TestIncrementalOCILayoutDropsDenied: the same for an OCI layout
// export: the tags of the versions denied since the earlier export into
// the same directory are not in the repositories' index.json nor in
// push.sh.
func TestIncrementalOCILayoutDropsDenied(t *testing.T) {
	engine, p := cachedNetAndTarball(t)
	ctx := context.Background()
	side, names := ociLayoutParts(t, engine)
	out := filepath.Join(t.TempDir(), "layout")
	if sum, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{}, out, func(string) {}); err != nil || sum.Tags != 2 {
		t.Fatalf("first export: %+v %v", sum, err)
	}
	engine.SetPolicy(enginetest.DecodePolicy(t, denyNetAndTarball(p)))
	sum, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{}, out, func(string) {})
	if err != nil || sum.Held != 2 {
		t.Fatalf("export after the deny: %+v %v", sum, err)
	}
	for _, repo := range []string{names.Provider(p), names.Module(tarballModule)} {
		idx, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(repo), "index.json"))
		if err == nil && strings.Contains(string(idx), `"org.opencontainers.image.ref.name"`) {
			t.Errorf("%s's index.json still tags a version denied since: %s", repo, idx)
		}
	}
	script, err := os.ReadFile(filepath.Join(out, PushScriptName))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(script), "\npush '") {
		t.Errorf("push.sh still pushes a version denied since:\n%s", script)
	}
	// Into a new directory, a refused version makes no repository.
	fresh := filepath.Join(t.TempDir(), "fresh")
	if sum, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{}, fresh, func(string) {}); err != nil || sum.Repositories != 0 {
		t.Errorf("export of refused versions alone: %+v %v, want no repository", sum, err)
	}
	if fileExists(filepath.Join(fresh, filepath.FromSlash(names.Provider(p)))) {
		t.Error("a repository was made for a refused version")
	}
}

// denyTofu is a policy denying tofu 1.8.0 (cachedCLI's).
const denyTofu = `
deny_version "get.opentofu.org/opentofu/tofu" {
  versions = "= 1.8.0"
  reason   = "CVE-2026-0004"
}
`

// tofuWithdrawn checks that the export in out no longer carries tofu
// 1.8.0 and still carries terraform 1.6.0: tofu's files are gone, and
// neither the manifest signed by key nor its releases section names them.
func tofuWithdrawn(t *testing.T, out string, key *ExportKey) {
	t.Helper()
	m, err := readManifest(out, key.keyring())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		if strings.HasPrefix(f.Path, tofuRelDir+"/") {
			t.Errorf("the manifest signs %s, of a version denied since the earlier export", f.Path)
		}
	}
	if m.Releases == nil || len(m.Releases.Versions) != 1 || m.Releases.Versions[0].Product != "terraform" {
		t.Errorf("the manifest's releases section: %+v, want terraform alone", m.Releases)
	}
	if fileExists(filepath.Join(out, filepath.FromSlash(tofuRelDir), tofuZipName)) {
		t.Error("the denied version's archive is still in the export")
	}
	if !fileExists(filepath.Join(out, filepath.FromSlash(tfRelDir), tfZipName)) {
		t.Error("the version still served is gone from the export")
	}
}

// exportedFrom exports the cache of side (cachedCLI's) to a directory:
// the engine exported from, the directory and the key that signed it.
func exportedFrom(t *testing.T, side *harness.ReleasesSide) (cliEng, string, *ExportKey) {
	t.Helper()
	cli, out, key := cliOf(side), filepath.Join(t.TempDir(), "out"), newKey(t, "exporter")
	if sum, err := Export(context.Background(), cli, servedBy(t, side.Engine, nil), cli, Selection{}, out, key, func(string) {}); err != nil || sum.CLIArchives != 2 {
		t.Fatalf("first export: %+v %v", sum, err)
	}
	return cli, out, key
}

// TestIncrementalExportDropsDeniedCLI: the same for a CLI version.
func TestIncrementalExportDropsDeniedCLI(t *testing.T) {
	_, side := cachedCLI(t)
	ctx := context.Background()
	cli, out, key := exportedFrom(t, side)
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, denyTofu))
	sum, err := Export(ctx, cli, servedBy(t, side.Engine, nil), cli, Selection{}, out, key, func(string) {})
	if err != nil || sum.Held != 1 {
		t.Fatalf("export after the deny: %+v %v", sum, err)
	}
	tofuWithdrawn(t, out, key)
}

// TestIncrementalOCILayoutDropsDeniedNotCached: a version an earlier
// export tagged and the cache no longer holds (removed since, or the
// earlier export made from another mirror's cache) is judged too: once
// the policy refuses it, an export into the same directory takes its tag
// out of index.json and push.sh, as it does for a cached version.
func TestIncrementalOCILayoutDropsDeniedNotCached(t *testing.T) {
	engine, p := cachedNetAndTarball(t)
	ctx := context.Background()
	side, names := ociLayoutParts(t, engine)
	out := filepath.Join(t.TempDir(), "layout")
	if sum, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{}, out, func(string) {}); err != nil || sum.Tags != 2 {
		t.Fatalf("first export: %+v %v", sum, err)
	}
	// Another mirror, which never cached either version, denies them and
	// exports into the same directory.
	other := newEngine(t, nil)
	otherSide, err := other.NewOCI()
	if err != nil {
		t.Fatal(err)
	}
	other.SetPolicy(enginetest.DecodePolicy(t, denyNetAndTarball(p)))
	var reports []string
	sum, err := ExportOCILayout(ctx, other, servedBy(t, other, otherSide), names, Selection{}, out, func(s string) { reports = append(reports, s) })
	if err != nil || sum.Held != 2 {
		t.Errorf("export after the deny: %+v %v (%q), want the 2 versions held", sum, err, reports)
	}
	for _, repo := range []string{names.Provider(p), names.Module(tarballModule)} {
		idx, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(repo), "index.json"))
		if err != nil || strings.Contains(string(idx), `"org.opencontainers.image.ref.name"`) {
			t.Errorf("%s's index.json still tags a version denied since: %s %v", repo, idx, err)
		}
	}
	script, err := os.ReadFile(filepath.Join(out, PushScriptName))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(script), "\npush '") {
		t.Errorf("push.sh still pushes a version denied since:\n%s", script)
	}
	// A version the policy lets through stays tagged though not cached.
	out2 := filepath.Join(t.TempDir(), "layout")
	if _, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{}, out2, func(string) {}); err != nil {
		t.Fatal(err)
	}
	other.SetPolicy(nil)
	if sum, err := ExportOCILayout(ctx, other, servedBy(t, other, otherSide), names, Selection{}, out2, func(string) {}); err != nil || sum.Held != 0 {
		t.Errorf("export with no policy: %+v %v", sum, err)
	}
	if script, err := os.ReadFile(filepath.Join(out2, PushScriptName)); err != nil || strings.Count(string(script), "\npush '") != 2 {
		t.Errorf("push.sh of versions allowed but not cached:\n%s %v", script, err)
	}
	// A layout under other prefixes cannot be judged: it is reported.
	otherNames, err := oci.NewNames("mirror/providers", "mirror/modules")
	if err != nil {
		t.Fatal(err)
	}
	out3 := filepath.Join(t.TempDir(), "layout")
	if _, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), otherNames, Selection{}, out3, func(string) {}); err != nil {
		t.Fatal(err)
	}
	reports = nil
	if _, err := ExportOCILayout(ctx, other, servedBy(t, other, otherSide), names, Selection{}, out3, func(s string) { reports = append(reports, s) }); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.Join(reports, "\n"), "not judged by the package policy"); n != 2 {
		t.Errorf("layouts under other prefixes: reports %q, want each of the 2 reported", reports)
	}
}

// TestIncrementalOCILayoutLeavesOutUnjudged: an earlier layout's tag
// whose version the policy layer cannot judge (here a layer without its
// view of the stored versions) is reported once as left out, and is,
// whether the cache holds it or not.
func TestIncrementalOCILayoutLeavesOutUnjudged(t *testing.T) {
	engine, _ := cachedNetAndTarball(t)
	ctx := context.Background()
	names, err := oci.NewNames("providers", "modules")
	if err != nil {
		t.Fatal(err)
	}
	sideOf := func(e *mirror.Engine) *mirror.OCI {
		side, err := e.NewOCI()
		if err != nil {
			t.Fatal(err)
		}
		return side
	}
	side := sideOf(engine)
	for _, e := range []struct {
		what   string
		engine *mirror.Engine
	}{{"another mirror's cache, which never held them", newEngine(t, nil)}, {"the exporting mirror's cache", engine}} {
		out := filepath.Join(t.TempDir(), "layout")
		if sum, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{}, out, func(string) {}); err != nil || sum.Tags != 2 {
			t.Fatalf("first export: %+v %v", sum, err)
		}
		eSide := side
		if e.engine != engine {
			eSide = sideOf(e.engine)
		}
		blind, err := served.New(served.Parts{Providers: e.engine, Modules: e.engine.Modules(), Zips: e.engine.Modules().Zips(), OCI: eSide})
		if err != nil {
			t.Fatal(err)
		}
		var reports []string
		sum, err := ExportOCILayout(ctx, e.engine, blind, names, Selection{}, out, func(s string) { reports = append(reports, s) })
		if err != nil || sum.Failed != 2 || strings.Count(strings.Join(reports, "\n"), "could not judge") != 2 {
			t.Errorf("from %s, an export by a layer that cannot judge: %+v %v %q, want each version reported once", e.what, sum, err, reports)
		}
		if script, err := os.ReadFile(filepath.Join(out, PushScriptName)); err != nil || strings.Contains(string(script), "\npush '") {
			t.Errorf("from %s, push.sh pushes versions not judged:\n%s %v", e.what, script, err)
		}
	}
}

// TestIncrementalExportDropsDeniedNotCached: a version an earlier export
// wrote and the cache no longer holds (removed since, by retention or
// `cache prune`, or the earlier export made from another mirror's cache) is
// judged too, and so is one this export's selection leaves out. While the
// policy lets it through, an export into the same directory keeps it,
// signed again: that is what an incremental export is for. Once the
// policy refuses it, the export takes its files out of the directory and
// its signed manifest, and reports it as held back, as it does a cached
// version; before, it signed it again and reported nothing.
func TestIncrementalExportDropsDeniedNotCached(t *testing.T) {
	engine, p, out, key := exportedNetAndTarball(t)
	ctx := context.Background()
	inv := engine.Inventory()
	if err := inv.RemoveVersion("provider", p.String(), "1.0.0"); err != nil {
		t.Fatal(err)
	}
	if err := inv.RemoveVersion("module", tarballModule.String(), "0.1.0"); err != nil {
		t.Fatal(err)
	}
	providerDir := filepath.Join(out, p.Hostname.ForDisplay(), p.Namespace, p.Type)
	archive := filepath.Join(providerDir, addrs.ArchiveName(p.Type, "1.0.0", "linux_amd64"))
	modulePkg := filepath.Join(moduleDir(out, tarballModule), "0.1.0.tar.gz")
	signed := func() map[string]bool {
		t.Helper()
		m, err := readManifest(out, key.keyring())
		if err != nil {
			t.Fatal(err)
		}
		listed := map[string]bool{}
		for _, f := range m.Files {
			listed[f.Path] = true
		}
		return listed
	}

	// Allowed, no longer cached: kept and signed again.
	var reports []string
	sum, err := Export(ctx, engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(s string) { reports = append(reports, s) })
	if err != nil || sum.Held != 0 || sum.Failed != 0 || sum.Unlisted != 0 || len(reports) != 0 {
		t.Fatalf("export with the versions allowed and no longer cached: %+v %v %q", sum, err, reports)
	}
	listed := signed()
	for _, path := range []string{archive, filepath.Join(providerDir, "index.json"), filepath.Join(providerDir, "1.0.0.json"), modulePkg} {
		rel, _ := filepath.Rel(out, path)
		if !fileExists(path) || !listed[filepath.ToSlash(rel)] {
			t.Errorf("%s, of a version allowed and no longer cached, is not kept and signed", path)
		}
	}

	// Denied, no longer cached: withdrawn and reported as held back.
	engine.SetPolicy(enginetest.DecodePolicy(t, denyNetAndTarball(p)))
	reports = nil
	sum, err = Export(ctx, engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(s string) { reports = append(reports, s) })
	if err != nil || sum.Held != 2 || sum.Failed != 0 || len(reports) != 2 {
		t.Fatalf("export after the deny: %+v %v %q, want the 2 versions held back", sum, err, reports)
	}
	for _, want := range []string{p.String() + " 1.0.0: left out, held back by the package policy", "module " + tarballModule.String() + " 0.1.0: left out, held back by the package policy"} {
		if !slices.ContainsFunc(reports, func(r string) bool { return strings.HasPrefix(r, want) }) {
			t.Errorf("reports %q do not say %q", reports, want)
		}
	}
	for rel := range signed() {
		if strings.Contains(rel, "_1.0.0_") || strings.Contains(rel, "/1.0.0.json") || strings.HasPrefix(rel, modulesDir+"/") || strings.HasSuffix(rel, "index.json") {
			t.Errorf("the new signed manifest vouches for %s, of a version the policy denies", rel)
		}
	}
	for _, path := range []string{archive, filepath.Join(providerDir, "index.json"), modulePkg} {
		if fileExists(path) {
			t.Errorf("%s is still in the export", path)
		}
	}

	// The same from another mirror's cache, which never held them.
	out = filepath.Join(t.TempDir(), "out")
	engine.SetPolicy(nil)
	fresh, _ := cachedNetAndTarball(t)
	if _, err := Export(ctx, fresh, servedBy(t, fresh, nil), nil, Selection{}, out, key, func(string) {}); err != nil {
		t.Fatal(err)
	}
	engine.SetPolicy(enginetest.DecodePolicy(t, denyNetAndTarball(p)))
	if sum, err := Export(ctx, engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(string) {}); err != nil || sum.Held != 2 || fileExists(filepath.Join(out, p.Hostname.ForDisplay(), p.Namespace, p.Type, addrs.ArchiveName(p.Type, "1.0.0", "linux_amd64"))) {
		t.Errorf("export from another mirror's cache after the deny: %+v %v, want the 2 versions held back and withdrawn", sum, err)
	}

	// And cached, but left out by the selection (a version no provider has).
	out = filepath.Join(t.TempDir(), "out")
	if _, err := Export(ctx, fresh, servedBy(t, fresh, nil), nil, Selection{}, out, key, func(string) {}); err != nil {
		t.Fatal(err)
	}
	fresh.SetPolicy(enginetest.DecodePolicy(t, denyNetAndTarball(p)))
	// A selection of nothing the cache holds is refused before anything
	// is written or withdrawn (checkSelection): OUT stays as signed.
	var unmatched *UnmatchedSelectionError
	if _, err := Export(ctx, fresh, servedBy(t, fresh, nil), nil, Selection{Versions: []string{"9.9.9"}}, out, key, func(string) {}); !errors.As(err, &unmatched) || !fileExists(filepath.Join(moduleDir(out, tarballModule), "0.1.0.tar.gz")) {
		t.Errorf("export of a version not cached after the deny: %v, want it refused and OUT left as it was", err)
	}
}

// TestIncrementalExportDropsDeniedNotCachedCLI: the same for a CLI
// version: kept while allowed, though no longer cached; withdrawn, out of
// the manifest's files and releases section, and held back once denied.
func TestIncrementalExportDropsDeniedNotCachedCLI(t *testing.T) {
	_, side := cachedCLI(t)
	ctx := context.Background()
	cli, out, key := exportedFrom(t, side)
	if err := side.Releases.Inventory().RemoveVersion(releases.Kind, releases.Address(releases.OpenTofu, "tofu"), "1.8.0"); err != nil {
		t.Fatal(err)
	}
	tofuZip := filepath.Join(out, filepath.FromSlash(tofuRelDir), tofuZipName)
	var reports []string
	sum, err := Export(ctx, cli, servedBy(t, side.Engine, nil), cli, Selection{}, out, key, func(s string) { reports = append(reports, s) })
	if err != nil || sum.Held != 0 || sum.Failed != 0 || sum.CLIPresent != 1 || len(reports) != 0 {
		t.Fatalf("export with tofu allowed and no longer cached: %+v %v %q", sum, err, reports)
	}
	m, err := readManifest(out, key.keyring())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(m.Files, func(f manifestFile) bool { return f.Path == tofuRelDir+"/"+tofuZipName }) || m.Releases == nil ||
		!slices.ContainsFunc(m.Releases.Versions, func(r manifestRelease) bool { return r.Product == "tofu" }) || !fileExists(tofuZip) {
		t.Errorf("tofu 1.8.0, allowed and no longer cached, is not kept and signed: %+v", m)
	}

	side.Engine.SetPolicy(enginetest.DecodePolicy(t, denyTofu))
	reports = nil
	sum, err = Export(ctx, cli, servedBy(t, side.Engine, nil), cli, Selection{}, out, key, func(s string) { reports = append(reports, s) })
	if err != nil || sum.Held != 1 || len(reports) != 1 || !strings.HasPrefix(reports[0], "cli get.opentofu.org/opentofu/tofu 1.8.0: left out, held back by the package policy") {
		t.Fatalf("export after the deny: %+v %v %q, want tofu held back", sum, err, reports)
	}
	tofuWithdrawn(t, out, key)
}

// TestIncrementalExportLeavesOutUnjudged: a version an earlier export
// wrote whose answer the policy layer cannot give (here a layer without
// its view of the stored versions) is reported once as left out, and
// withdrawn, whether the cache holds it or not.
func TestIncrementalExportLeavesOutUnjudged(t *testing.T) {
	engine, p := cachedNetAndTarball(t)
	ctx := context.Background()
	key := newKey(t, "exporter")
	archive := func(out string) string {
		return filepath.Join(out, p.Hostname.ForDisplay(), p.Namespace, p.Type, addrs.ArchiveName(p.Type, "1.0.0", "linux_amd64"))
	}
	for _, e := range []struct {
		what   string
		engine *mirror.Engine
	}{{"the exporting mirror's cache", engine}, {"another mirror's cache, which never held them", newEngine(t, nil)}} {
		out := filepath.Join(t.TempDir(), "out")
		if sum, err := Export(ctx, engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(string) {}); err != nil || sum.Written != 1 || sum.Modules != 1 {
			t.Fatalf("first export: %+v %v", sum, err)
		}
		blind, err := served.New(served.Parts{Providers: e.engine, Modules: e.engine.Modules(), Zips: e.engine.Modules().Zips()})
		if err != nil {
			t.Fatal(err)
		}
		var reports []string
		sum, err := Export(ctx, e.engine, blind, nil, Selection{}, out, key, func(s string) { reports = append(reports, s) })
		if err != nil || sum.Failed != 2 || sum.Held != 0 || strings.Count(strings.Join(reports, "\n"), "could not judge") != 2 {
			t.Errorf("from %s, an export by a layer that cannot judge: %+v %v %q, want each version reported once", e.what, sum, err, reports)
		}
		if fileExists(archive(out)) || fileExists(filepath.Join(moduleDir(out, tarballModule), "0.1.0.tar.gz")) {
			t.Errorf("from %s, versions not judged are still in the export", e.what)
		}
	}
}
