package airgap

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/oci"
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

// TestIncrementalExportDropsDenied: an export into the directory of an
// earlier one, after a deny_version, carries what the mirror serves now:
// the versions denied since are not in its signed manifest nor its
// index.json, and their files are gone, though the earlier export by
// the same key wrote and signed them.
func TestIncrementalExportDropsDenied(t *testing.T) {
	engine, p := cachedNetAndTarball(t)
	ctx := context.Background()
	key := newKey(t, "exporter")
	out := filepath.Join(t.TempDir(), "out")
	if sum, err := Export(ctx, engine, servedBy(t, engine, nil), Selection{}, out, key, func(string) {}); err != nil || sum.Written != 1 || sum.Modules != 1 {
		t.Fatalf("first export: %+v %v", sum, err)
	}
	engine.SetPolicy(enginetest.DecodePolicy(t, denyNetAndTarball(p)))
	var reports []string
	sum, err := Export(ctx, engine, servedBy(t, engine, nil), Selection{}, out, key, func(s string) { reports = append(reports, s) })
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
	side, err := engine.NewOCI()
	if err != nil {
		t.Fatal(err)
	}
	names, err := oci.NewNames("providers", "modules")
	if err != nil {
		t.Fatal(err)
	}
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
	if strings.Contains(string(script), "oras cp") {
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

// TestIncrementalExportDropsDeniedCLI: the same for a CLI version.
func TestIncrementalExportDropsDeniedCLI(t *testing.T) {
	_, side := cachedCLI(t)
	ctx := context.Background()
	key := newKey(t, "exporter")
	out := filepath.Join(t.TempDir(), "out")
	cli := cliOf(side)
	if sum, err := Export(ctx, cli, servedBy(t, side.Engine, nil), Selection{}, out, key, func(string) {}); err != nil || sum.CLIArchives != 2 {
		t.Fatalf("first export: %+v %v", sum, err)
	}
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `
deny_version "get.opentofu.org/opentofu/tofu" {
  versions = "= 1.8.0"
  reason   = "CVE-2026-0004"
}
`))
	sum, err := Export(ctx, cli, servedBy(t, side.Engine, nil), Selection{}, out, key, func(string) {})
	if err != nil || sum.Held != 1 {
		t.Fatalf("export after the deny: %+v %v", sum, err)
	}
	m, err := readManifest(out, key.keyring())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		if strings.HasPrefix(f.Path, tofuRelDir+"/") {
			t.Errorf("the manifest signs %s, of a version denied since the earlier export", f.Path)
		}
	}
	if m.Releases != nil {
		for _, r := range m.Releases.Versions {
			if r.Product == "tofu" {
				t.Errorf("the manifest's releases name %s", r)
			}
		}
	}
	if fileExists(filepath.Join(out, filepath.FromSlash(tofuRelDir), tofuZipName)) {
		t.Error("the denied version's archive is still in the export")
	}
	if !fileExists(filepath.Join(out, filepath.FromSlash(tfRelDir), tfZipName)) {
		t.Error("the version still served is gone from the export")
	}
}

// TestIncrementalOCILayoutDropsDeniedNotCached: a version an earlier
// export tagged and the cache no longer holds (removed since, or the
// earlier export made from another mirror's cache) is judged too: once
// the policy refuses it, an export into the same directory takes its tag
// out of index.json and push.sh, as it does for a cached version.
func TestIncrementalOCILayoutDropsDeniedNotCached(t *testing.T) {
	engine, p := cachedNetAndTarball(t)
	ctx := context.Background()
	side, err := engine.NewOCI()
	if err != nil {
		t.Fatal(err)
	}
	names, err := oci.NewNames("providers", "modules")
	if err != nil {
		t.Fatal(err)
	}
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
	if strings.Contains(string(script), "oras cp") {
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
	if script, err := os.ReadFile(filepath.Join(out2, PushScriptName)); err != nil || strings.Count(string(script), "oras cp") != 2 {
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
// view of the stored versions) is reported as left out, and is.
func TestIncrementalOCILayoutLeavesOutUnjudged(t *testing.T) {
	engine, _ := cachedNetAndTarball(t)
	ctx := context.Background()
	side, err := engine.NewOCI()
	if err != nil {
		t.Fatal(err)
	}
	names, err := oci.NewNames("providers", "modules")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "layout")
	if sum, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{}, out, func(string) {}); err != nil || sum.Tags != 2 {
		t.Fatalf("first export: %+v %v", sum, err)
	}
	other := newEngine(t, nil)
	otherSide, err := other.NewOCI()
	if err != nil {
		t.Fatal(err)
	}
	blind, err := served.New(served.Parts{Providers: other, Modules: other.Modules(), Zips: other.Modules().Zips(), OCI: otherSide})
	if err != nil {
		t.Fatal(err)
	}
	var reports []string
	sum, err := ExportOCILayout(ctx, other, blind, names, Selection{}, out, func(s string) { reports = append(reports, s) })
	if err != nil || sum.Failed != 2 || strings.Count(strings.Join(reports, "\n"), "could not judge") != 2 {
		t.Errorf("export by a layer that cannot judge: %+v %v %q", sum, err, reports)
	}
	if script, err := os.ReadFile(filepath.Join(out, PushScriptName)); err != nil || strings.Contains(string(script), "oras cp") {
		t.Errorf("push.sh pushes versions not judged:\n%s %v", script, err)
	}
}
