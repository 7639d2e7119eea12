package airgap

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// layoutIndex reads the index.json of repo's layout under out: tag ->
// descriptor.
func layoutIndex(t *testing.T, out, repo string) map[string]ocispec.Descriptor {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(repo), "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	tags := map[string]ocispec.Descriptor{}
	for _, d := range idx.Manifests {
		tags[d.Annotations[ocispec.AnnotationRefName]] = d
	}
	if layout, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(repo), "oci-layout")); err != nil || !strings.Contains(string(layout), `"imageLayoutVersion":"1.0.0"`) {
		t.Errorf("%s/oci-layout: %q, %v", repo, layout, err)
	}
	return tags
}

// layoutBlob reads blob d of repo's layout, checking its digest.
func layoutBlob(t *testing.T, out, repo string, d digest.Digest) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(repo), "blobs", "sha256", d.Encoded()))
	if err != nil {
		t.Fatalf("%s: blob %s: %v", repo, d, err)
	}
	if digest.FromBytes(b) != d {
		t.Fatalf("%s: blob %s has other bytes", repo, d)
	}
	return b
}

// An OCI layout export holds, per repository, each cached version's tag
// and every blob its documents name. A provider version with a platform
// not cached gets an index of the cached ones (reported); once every
// platform is cached, the front door's own index, digest for digest; a
// module version, the front door's manifest over its zip. A second
// export into the same directory writes only what changed, and push.sh
// has one push line per tag.
func TestExportOCILayout(t *testing.T) {
	o := enginetest.StartOrigin(t, fakeorigin.Options{})
	o.AddProvider("acme", "net", []string{"1.0.0"}, []string{"linux_amd64", "darwin_arm64"})
	o.AddTarball("tarball-0.1.0.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# tarball\n")}))
	o.AddModule("acme", "tarball", "aws", "0.1.0", o.TarballURL("tarball-0.1.0.tar.gz"))
	engine := newEngine(t, o)
	ctx := context.Background()
	p := addrs.Provider{Hostname: enginetest.OriginHost, Namespace: "acme", Type: "net"}
	v, err := addrs.ParseSemver("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	cacheArchive(t, engine, p, "1.0.0", "linux_amd64")
	moduleBytes(t, engine, tarballModule, "0.1.0")
	side, names := ociLayoutParts(t, engine)
	served, err := side.Index(ctx, p, v)
	if err != nil {
		t.Fatal(err)
	}
	module, err := engine.Modules().Zips().ModuleManifest(ctx, tarballModule, enginetest.MustModuleVersion(t, "0.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	providerRepo, moduleRepo := names.Provider(p), names.Module(tarballModule)

	out := filepath.Join(t.TempDir(), "layout")
	var reports []string
	sum, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{}, out, func(s string) { reports = append(reports, s) })
	if err != nil || sum.Failed != 0 || sum.Partial != 1 || sum.Repositories != 2 || sum.Tags != 2 {
		t.Fatalf("first export: %+v, %v, %q", sum, err, reports)
	}
	if len(reports) != 1 || !strings.Contains(reports[0], "without darwin_arm64") {
		t.Errorf("reports %q, want the version exported without darwin_arm64", reports)
	}
	partial := layoutIndex(t, out, providerRepo)["1.0.0"]
	if partial.Digest == served.Digest || partial.MediaType != ocispec.MediaTypeImageIndex {
		t.Errorf("the partial index: %+v (the front door's is %s)", partial, served.Digest)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(layoutBlob(t, out, providerRepo, partial.Digest), &idx); err != nil || len(idx.Manifests) != 1 ||
		idx.Manifests[0].Platform.OS != "linux" {
		t.Fatalf("the partial index: %+v, %v", idx, err)
	}
	checkManifestBlobs(t, out, providerRepo, idx.Manifests[0].Digest)
	if got := layoutIndex(t, out, moduleRepo)["0.1.0"]; got.Digest != module.Digest || got.Size != int64(len(module.Bytes)) {
		t.Errorf("the module's tag: %+v, want the front door's %s", got, module.Digest)
	}
	checkManifestBlobs(t, out, moduleRepo, module.Digest)

	cacheArchive(t, engine, p, "1.0.0", "darwin_arm64")
	reports = nil
	again, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{}, out, func(s string) { reports = append(reports, s) })
	if err != nil || again.Partial != 0 || again.Failed != 0 || len(reports) != 0 {
		t.Fatalf("second export: %+v, %v, %q", again, err, reports)
	}
	if again.BlobsPresent == 0 || again.Blobs == 0 {
		t.Errorf("second export: %+v, want the first's blobs present and the new ones written", again)
	}
	full := layoutIndex(t, out, providerRepo)
	if len(full) != 1 || full["1.0.0"].Digest != served.Digest {
		t.Errorf("the provider's tags after the second export: %+v, want 1.0.0 at the front door's %s", full, served.Digest)
	}
	if err := json.Unmarshal(layoutBlob(t, out, providerRepo, served.Digest), &idx); err != nil || len(idx.Manifests) != 2 {
		t.Fatalf("the full index: %+v, %v", idx, err)
	}
	for _, d := range idx.Manifests {
		doc, err := side.Manifest(ctx, p, d.Digest)
		if err != nil || string(layoutBlob(t, out, providerRepo, d.Digest)) != string(doc.Bytes) {
			t.Errorf("manifest %s: not the front door's (%v)", d.Digest, err)
		}
		checkManifestBlobs(t, out, providerRepo, d.Digest)
	}

	script, err := os.ReadFile(filepath.Join(out, PushScriptName))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for line := range strings.SplitSeq(string(script), "\n") {
		if strings.HasPrefix(line, "push ") {
			lines = append(lines, line)
		}
	}
	want := []string{
		`push '` + moduleRepo + `' '0.1.0'`,
		`push '` + providerRepo + `' '1.0.0'`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("push.sh lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// checkManifestBlobs checks that the manifest d of repo's layout, its
// config and its layer are blobs of the layout.
func checkManifestBlobs(t *testing.T, out, repo string, d digest.Digest) {
	t.Helper()
	var m ocispec.Manifest
	if err := json.Unmarshal(layoutBlob(t, out, repo, d), &m); err != nil || len(m.Layers) != 1 {
		t.Fatalf("manifest %s: %+v, %v", d, m, err)
	}
	layoutBlob(t, out, repo, m.Config.Digest)
	layoutBlob(t, out, repo, m.Layers[0].Digest)
}

// An OCI layout export leaves out what the package policy in effect
// refuses, as the bundle export does: a module version and a provider
// version cached before a deny_version are reported and counted as held,
// and no tag, manifest or zip of them is written.
func TestExportOCILayoutLeavesOutDenied(t *testing.T) {
	engine, p := cachedNetAndTarball(t)
	ctx := context.Background()
	module, err := engine.Modules().Zips().ModuleManifest(ctx, tarballModule, enginetest.MustModuleVersion(t, "0.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	side, names := ociLayoutParts(t, engine)
	engine.SetPolicy(enginetest.DecodePolicy(t, `
deny_version "`+tarballModule.String()+`" {
  versions = "= 0.1.0"
  reason   = "CVE-2026-0002"
}
deny_version "`+p.String()+`" {
  versions = "= 1.0.0"
  reason   = "CVE-2026-0003"
}
`))
	out := filepath.Join(t.TempDir(), "layout")
	var reports []string
	sum, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{}, out, func(s string) { reports = append(reports, s) })
	if err != nil {
		t.Fatal(err)
	}
	if sum.Held != 2 || sum.Tags != 0 || sum.Failed != 0 {
		t.Errorf("export: %+v %q, want both versions held and nothing written", sum, reports)
	}
	joined := strings.Join(reports, "\n")
	if !strings.Contains(joined, "CVE-2026-0002") || !strings.Contains(joined, "CVE-2026-0003") {
		t.Errorf("reports %q, want both reasons", reports)
	}
	if _, err := os.Stat(filepath.Join(out, filepath.FromSlash(names.Module(tarballModule)), "blobs", "sha256", module.Digest.Encoded())); err == nil {
		t.Error("the denied module's manifest was written")
	}
	var layer ocispec.Manifest
	if err := json.Unmarshal(module.Bytes, &layer); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, filepath.FromSlash(names.Module(tarballModule)), "blobs", "sha256", layer.Layers[0].Digest.Encoded())); err == nil {
		t.Error("the denied module's zip was written")
	}
}

// ociLayoutParts returns engine's OCI side and the repository names the
// tests export layouts under (providers/, modules/).
func ociLayoutParts(t *testing.T, engine *mirror.Engine) (*mirror.OCI, oci.Names) {
	t.Helper()
	side, err := engine.NewOCI()
	if err != nil {
		t.Fatal(err)
	}
	names, err := oci.NewNames("providers", "modules")
	if err != nil {
		t.Fatal(err)
	}
	return side, names
}

// servedBy is engine and its OCI side (nil: none) behind the package
// policy, as exports take them.
func servedBy(t *testing.T, engine *mirror.Engine, side *mirror.OCI) *served.Packages {
	t.Helper()
	parts := served.Parts{Providers: engine, Modules: engine.Modules(), Zips: engine.Modules().Zips(), Stored: engine.Inventory()}
	if side != nil {
		parts.OCI = side
	}
	p, err := served.New(parts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPushScriptTakesOnlyRepositoryNames: push.sh lists the layouts found
// in the export's directory, those of earlier exports included, so what
// else the directory holds (a layout copied in from elsewhere) names
// lines of it; a directory whose name is not a repository name (here one
// holding a shell command) is left out of it, and running push.sh runs
// nothing but oras.
func TestPushScriptTakesOnlyRepositoryNames(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip(err)
	}
	engine := newEngine(t, nil)
	side, names := ociLayoutParts(t, engine)
	out := filepath.Join(t.TempDir(), "layout")
	pwned := filepath.Join(t.TempDir(), "pwned")
	for _, repo := range []string{"good/repo", "x$(touch " + pwned + ")", "q'$(touch " + pwned + ")'"} {
		writeTaggedLayout(t, filepath.Join(out, repo), ocispec.MediaTypeImageManifest, "1.0.0")
	}
	sum, err := ExportOCILayout(context.Background(), engine, servedBy(t, engine, side), names, Selection{}, out, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatalf("export: %+v, %v", sum, err)
	}
	script, err := os.ReadFile(filepath.Join(out, PushScriptName))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("push.sh:\n%s", script)
	bin := t.TempDir()
	write(t, filepath.Join(bin, "oras"), "#!/bin/sh\nexit 0\n")
	if err := os.Chmod(filepath.Join(bin, "oras"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", filepath.Join(out, PushScriptName), "registry.example")
	cmd.Env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Logf("sh push.sh: %v\n%s", err, b)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Error("running push.sh ran a command a directory's name held")
	}
	if !strings.Contains(string(script), "\npush 'good/repo' '1.0.0'\n") || strings.Contains(string(script), "touch") {
		t.Error("push.sh does not list the layout good/repo alone")
	}
}

// An export killed (or out of disk space) between a new layout's
// oci-layout and its index.json leaves a directory that is a layout
// without tags; one written to a medium pulled out too early may leave an
// index.json that is not an index (cut short). A later export that does
// not tag that repository again (another --provider, or the version
// refused since) still writes push.sh, with the other layouts' lines: the
// directory stays usable, and is not refused by every export until the
// operator finds the layout and removes it. A torn index.json is
// reported, naming the layout.
func TestExportOCILayoutAfterLayoutWithoutIndex(t *testing.T) {
	for _, tc := range []struct {
		name, index string // the broken layout's index.json, "" for none
		wantReport  bool
	}{
		{name: "half"},
		{name: "torn", index: `{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.in`, wantReport: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			engine := newEngine(t, nil)
			side, names := ociLayoutParts(t, engine)
			out := filepath.Join(t.TempDir(), "layout")
			broken := filepath.Join(out, "providers", "example.com", "acme", tc.name)
			write(t, filepath.Join(broken, ocispec.ImageLayoutFile), `{"imageLayoutVersion":"1.0.0"}`)
			if tc.index != "" {
				write(t, filepath.Join(broken, ocispec.ImageIndexFile), tc.index)
			}
			writeTaggedLayout(t, filepath.Join(out, "providers", "example.com", "acme", "good"), ocispec.MediaTypeImageIndex, "1.0.0")

			var reports []string
			sum, err := ExportOCILayout(context.Background(), engine, servedBy(t, engine, side), names, Selection{}, out, func(s string) { reports = append(reports, s) })
			if err != nil {
				t.Fatalf("export into a directory holding a broken layout: %+v, %v", sum, err)
			}
			script, err := os.ReadFile(filepath.Join(out, PushScriptName))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(script), "\npush 'providers/example.com/acme/good' '1.0.0'\n") || strings.Contains(string(script), tc.name) {
				t.Errorf("push.sh:\n%s\nwant the line of the layout with its tag alone", script)
			}
			joined := strings.Join(reports, "\n")
			if named := strings.Contains(joined, "providers/example.com/acme/"+tc.name) && strings.Contains(joined, "index.json"); named != tc.wantReport {
				t.Errorf("reports %q; want the broken layout's index.json named: %v", reports, tc.wantReport)
			}
		})
	}
}

// An OCI layout export adds to a directory written before, as the bundle
// export does: a platform an earlier export wrote into a version's tag,
// whose manifest and archive the layout still holds, stays in the tag
// when a later export does not select it (another --platforms) or the
// cache no longer holds it (evicted since). Otherwise push.sh would
// replace the registry's tag with an index without it, and the clients of
// that platform inside the gap would lose the version.
func TestExportOCILayoutKeepsEarlierPlatforms(t *testing.T) {
	o := enginetest.StartOrigin(t, fakeorigin.Options{})
	o.AddProvider("acme", "net", []string{"1.0.0"}, []string{"linux_amd64", "darwin_arm64"})
	engine := newEngine(t, o)
	ctx := context.Background()
	p := addrs.Provider{Hostname: enginetest.OriginHost, Namespace: "acme", Type: "net"}
	v, err := addrs.ParseSemver("1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	cacheArchive(t, engine, p, "1.0.0", "linux_amd64")
	cacheArchive(t, engine, p, "1.0.0", "darwin_arm64")
	side, names := ociLayoutParts(t, engine)
	door, err := side.Index(ctx, p, v)
	if err != nil {
		t.Fatal(err)
	}
	repo := names.Provider(p)
	out := filepath.Join(t.TempDir(), "layout")
	for _, pl := range []string{"linux_amd64", "darwin_arm64"} {
		var reports []string
		sum, err := ExportOCILayout(ctx, engine, servedBy(t, engine, side), names, Selection{Platforms: []string{pl}}, out, func(s string) { reports = append(reports, s) })
		if err != nil || sum.Failed != 0 {
			t.Fatalf("export of %s: %+v, %v, %q", pl, sum, err, reports)
		}
		t.Logf("export of %s: %q", pl, reports)
	}
	tag := layoutIndex(t, out, repo)["1.0.0"]
	var idx ocispec.Index
	if err := json.Unmarshal(layoutBlob(t, out, repo, tag.Digest), &idx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range idx.Manifests {
		got = append(got, d.Platform.OS+"_"+d.Platform.Architecture)
		checkManifestBlobs(t, out, repo, d.Digest)
	}
	if len(got) != 2 || tag.Digest != door.Digest {
		t.Errorf("tag 1.0.0 after exports of linux_amd64, then darwin_arm64: %s with %q; want the front door's index %s with both", tag.Digest, got, door.Digest)
	}
}

// writeTaggedLayout writes at dir an OCI layout, as an earlier export
// left it, whose index.json tags one descriptor of mediaType with tag.
func writeTaggedLayout(t *testing.T, dir, mediaType, tag string) {
	t.Helper()
	write(t, filepath.Join(dir, ocispec.ImageLayoutFile), `{"imageLayoutVersion":"1.0.0"}`)
	idx := ocispec.Index{Manifests: []ocispec.Descriptor{{MediaType: mediaType,
		Digest: digest.FromString("m"), Size: 1, Annotations: map[string]string{ocispec.AnnotationRefName: tag}}}}
	idx.SchemaVersion = 2
	data, err := json.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, ocispec.ImageIndexFile), string(data))
}
