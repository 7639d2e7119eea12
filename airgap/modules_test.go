package airgap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// newEngine returns an engine on a fresh in-memory cache: connected to
// origin (its client's configuration changed by mods), or sealed when
// origin is nil.
func newEngine(t *testing.T, origin *fakeorigin.Origin, mods ...func(*discovery.Config)) *mirror.Engine {
	t.Helper()
	store := enginetest.OpenStore(t, "", cache.Options{})
	cfg := mirror.Config{AllowedOrigins: []string{enginetest.OriginHost}, Logger: enginetest.Logger(t), ScratchDir: t.TempDir()}
	var o mirror.Origin
	if origin != nil {
		o = enginetest.OriginClient(t, origin, mods...)
	} else {
		cfg.Offline = true
		o = enginetest.OriginClient(t, enginetest.StartOrigin(t, fakeorigin.Options{}))
	}
	engine, err := mirror.New(cfg, o, store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		engine.Shutdown(ctx)
		store.Close()
	})
	return engine
}

var tarballModule = addrs.Module{Hostname: enginetest.OriginHost, Namespace: "acme", Name: "tarball", System: "aws"}

const tarballRel = "modules/registry.terraform.io/acme/tarball/aws/0.1.0"

// moduleBytes returns the package of version of m as engine serves it.
func moduleBytes(t *testing.T, engine *mirror.Engine, m addrs.Module, version string) (*modules.Package, []byte) {
	t.Helper()
	pkg, err := engine.Modules().OpenModule(context.Background(), m, enginetest.MustModuleVersion(t, version))
	if err != nil {
		t.Fatalf("OpenModule %s %s: %v", m, version, err)
	}
	defer pkg.Close()
	b, err := io.ReadAll(pkg.Content())
	if err != nil {
		t.Fatal(err)
	}
	return pkg, b
}

// exportedModule sets up a connected mirror that cached the tarball
// module (whose location has a //SUBDIR) and exports it to a directory.
func exportedModule(t *testing.T) (out string, key *ExportKey, want []byte) {
	t.Helper()
	origin := enginetest.StartOrigin(t, fakeorigin.Options{})
	origin.AddTarball("platform-0.1.0.tar.gz", fakeorigin.TarGz(map[string][]byte{
		"modules/app/main.tf":    []byte("module \"shared\" {\n  source = \"../shared\"\n}\n"),
		"modules/shared/main.tf": []byte("output \"x\" {\n  value = 1\n}\n"),
	}))
	origin.AddModule("acme", "tarball", "aws", "0.1.0", origin.TarballURL("platform-0.1.0.tar.gz")+"//modules/app")
	src := newEngine(t, origin)
	_, want = moduleBytes(t, src, tarballModule, "0.1.0")
	out, key = filepath.Join(t.TempDir(), "out"), newKey(t, "exporter")
	var reports []string
	sum, err := Export(context.Background(), src, servedBy(t, src, nil), nil, Selection{}, out, key, func(s string) { reports = append(reports, s) })
	if err != nil || sum.Failed != 0 || sum.Modules != 1 || sum.ModuleBytes != int64(len(want)) {
		t.Fatalf("export: %+v, %v, %q", sum, err, reports)
	}
	return out, key, want
}

func importInto(t *testing.T, engine *mirror.Engine, in string, opts ImportOptions) (ImportSummary, []string) {
	t.Helper()
	var reports []string
	if opts.ScratchDir == "" {
		opts.ScratchDir = t.TempDir()
	}
	sum, err := Import(context.Background(), engine, in, opts, func(s string) { reports = append(reports, s) })
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	return sum, reports
}

// An export carries each cached module package with its record, both in
// the signed manifest; a sealed mirror that imports it with the
// exporter's key serves the same package, at the same //SUBDIR.
func TestExportImportModules(t *testing.T) {
	out, key, want := exportedModule(t)
	m, err := readManifest(out, publicOf(t, key))
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(m); !slices.Contains(got, tarballRel+".tar.gz") || !slices.Contains(got, tarballRel+".json") {
		t.Errorf("the manifest lists %v, not the module's package and record", got)
	}
	data, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(tarballRel+".tar.gz")))
	if err != nil || string(data) != string(want) {
		t.Fatalf("the exported package is not the cached one (%v)", err)
	}

	sealed := newEngine(t, nil)
	sum, reports := importInto(t, sealed, out, ImportOptions{Trust: Trust{ExportKeys: publicOf(t, key)}})
	if sum.Modules != 1 || sum.Failed != 0 || sum.ModuleBytes != int64(len(want)) || len(reports) != 0 {
		t.Fatalf("import: %+v, %q", sum, reports)
	}
	list, _, err := sealed.Modules().ModuleVersions(context.Background(), tarballModule)
	if err != nil || !slices.Equal(list.Versions, []string{"0.1.0"}) {
		t.Fatalf("the sealed mirror lists %v, %v", list, err)
	}
	rec, err := sealed.Modules().ModuleLocation(context.Background(), tarballModule, enginetest.MustModuleVersion(t, "0.1.0"))
	if err != nil || rec.Subdir != "modules/app" || rec.Provenance != records.ProvenanceImported {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if _, got := moduleBytes(t, sealed, tarballModule, "0.1.0"); string(got) != string(want) {
		t.Error("the sealed mirror serves another package than the exporter's")
	}

	// Again: present; and an incremental export finds it present.
	if sum, reports := importInto(t, sealed, out, ImportOptions{Trust: Trust{ExportKeys: publicOf(t, key)}}); sum.ModulesPresent != 1 || sum.Modules != 0 || sum.Failed != 0 {
		t.Errorf("second import: %+v, %q", sum, reports)
	}
	again, err := Export(context.Background(), sealed, servedBy(t, sealed, nil), nil, Selection{}, out, key, func(s string) { t.Error(s) })
	if err != nil || again.ModulesPresent != 1 || again.Modules != 0 {
		t.Errorf("export into the same directory: %+v, %v", again, err)
	}
	// A selection of providers leaves modules out.
	other := filepath.Join(t.TempDir(), "providers-only")
	sel, err := Export(context.Background(), sealed, servedBy(t, sealed, nil), nil, Selection{Providers: []addrs.Provider{{Hostname: enginetest.OriginHost, Namespace: "acme", Type: "x"}}}, other, key, func(string) {})
	// (A provider the cache does not hold: the export is refused, and
	// writes nothing.)
	var unmatched *UnmatchedSelectionError
	if !errors.As(err, &unmatched) || sel.Modules != 0 || fileExists(filepath.Join(other, modulesDir)) {
		t.Errorf("an export of selected providers wrote modules: %+v, %v", sel, err)
	}
}

// A module version that no trusted key vouches for, or whose files differ
// from the signed manifest, is refused naming the module and the file,
// and nothing of it is served.
func TestImportModuleRefused(t *testing.T) {
	out, key, want := exportedModule(t)
	jsonPath := filepath.Join(out, filepath.FromSlash(tarballRel+".json"))
	record, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	trusted := Trust{ExportKeys: publicOf(t, key)}
	for _, tc := range []struct {
		name          string
		change        func(t *testing.T, dir string)
		trust         Trust
		allowUnsigned bool
		want          []string
	}{
		{"one byte of the package changed", func(t *testing.T, dir string) {
			b := []byte(string(want))
			b[len(b)/2] ^= 0xff
			write(t, filepath.Join(dir, filepath.FromSlash(tarballRel+".tar.gz")), string(b))
		}, trusted, false, []string{tarballRel + ".tar.gz", "the import vouches for"}},
		{"the package replaced by a longer one", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, filepath.FromSlash(tarballRel+".tar.gz")), string(want)+"more")
		}, trusted, false, []string{tarballRel + ".tar.gz", "differs from the manifest"}},
		{"the record's location changed", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, filepath.FromSlash(tarballRel+".json")), strings.Replace(string(record), "modules/app", "modules/eve", 1))
		}, trusted, false, []string{tarballRel + ".json", "differs from the manifest"}},
		{"the package missing", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, filepath.FromSlash(tarballRel+".tar.gz")))
		}, trusted, false, []string{tarballRel + ".tar.gz is missing"}},
		{"no export key trusted", nil, Trust{}, false, []string{"no export key is trusted", "--trusted-export-keys"}},
		{"another export key trusted", nil, Trust{ExportKeys: publicOf(t, newKey(t, "other"))}, false, []string{"not among the trusted export keys"}},
		{"a plain directory, --allow-unsigned", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, manifestName))
			os.Remove(filepath.Join(dir, manifestSigName))
		}, trusted, true, []string{"has no signed manifest", "--allow-unsigned from a directory without manifest"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "in")
			if err := os.CopyFS(dir, os.DirFS(out)); err != nil {
				t.Fatal(err)
			}
			if tc.change != nil {
				tc.change(t, dir)
			}
			sealed := newEngine(t, nil)
			sum, reports := importInto(t, sealed, dir, ImportOptions{Trust: tc.trust, AllowUnsigned: tc.allowUnsigned})
			if sum.Modules != 0 || sum.Failed != 1 || len(reports) != 1 {
				t.Fatalf("import: %+v, %q", sum, reports)
			}
			for _, w := range append([]string{"module registry.terraform.io/acme/tarball/aws 0.1.0 refused"}, tc.want...) {
				if !strings.Contains(reports[0], w) {
					t.Errorf("the report does not say %q:\n%s", w, reports[0])
				}
			}
			if _, _, err := sealed.Modules().ModuleVersions(context.Background(), tarballModule); !errors.Is(err, records.ErrOffline) {
				t.Errorf("the refused module is listed: %v", err)
			}
			if _, err := sealed.Modules().OpenModule(context.Background(), tarballModule, enginetest.MustModuleVersion(t, "0.1.0")); err == nil {
				t.Error("the refused module is served")
			}
		})
	}
}

// A plain directory of a local module's files is imported with
// --allow-unsigned only, under a host that is not an allowed origin; it is
// served from the cache (the host local-only, never contacted) and
// carried on by an export like any other module.
func TestImportLocalModule(t *testing.T) {
	local := addrs.Module{Hostname: "tf.corp.example", Namespace: "platform", Name: "network", System: "aws"}
	in := t.TempDir()
	dir := filepath.Join(in, modulesDir, "tf.corp.example", "platform", "network", "aws", "1.2.0")
	write(t, filepath.Join(dir, "main.tf"), "output \"cidr\" {\n  value = \"10.0.0.0/16\"\n}\n")
	write(t, filepath.Join(dir, "scripts", "run.sh"), "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(dir, "scripts", "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, ".git", "HEAD"), "ref: refs/heads/main\n")
	// The same under an allowed origin's host: refused even so.
	write(t, filepath.Join(in, modulesDir, enginetest.OriginHost, "acme", "vpc", "aws", "1.0.0", "main.tf"), "# shadow\n")

	engine := newEngine(t, enginetest.StartOrigin(t, fakeorigin.Options{}))
	sum, reports := importInto(t, engine, in, ImportOptions{})
	if sum.Modules != 0 || sum.Failed != 2 || !strings.Contains(strings.Join(reports, "\n"), "import with --allow-unsigned") {
		t.Fatalf("without --allow-unsigned: %+v, %q", sum, reports)
	}
	sum, reports = importInto(t, engine, in, ImportOptions{AllowUnsigned: true})
	if sum.Modules != 1 || sum.Failed != 1 || len(reports) != 1 ||
		!strings.Contains(reports[0], "module registry.terraform.io/acme/vpc/aws 1.0.0 refused") || !strings.Contains(reports[0], "is an allowed origin") {
		t.Fatalf("with --allow-unsigned: %+v, %q", sum, reports)
	}
	if _, _, err := engine.Modules().ModuleVersions(context.Background(), addrs.Module{Hostname: enginetest.OriginHost, Namespace: "acme", Name: "vpc", System: "aws"}); err == nil {
		t.Error("the refused module under the origin's host is listed")
	}

	list, _, err := engine.Modules().ModuleVersions(context.Background(), local)
	if err != nil || !slices.Equal(list.Versions, []string{"1.2.0"}) {
		t.Fatalf("the local module's versions: %v, %v", list, err)
	}
	pkg, data := moduleBytes(t, engine, local, "1.2.0")
	if pkg.Record.Provenance != records.ProvenanceUnsigned || pkg.Record.Location != "" {
		t.Errorf("record %+v", pkg.Record)
	}
	files := unpackModule(t, data)
	if !slices.Equal(files, []string{"main.tf", "scripts/", "scripts/run.sh 755"}) {
		t.Errorf("the package holds %v", files)
	}

	// Exported, the local module crosses to another mirror on the
	// exporting mirror's key.
	out, key := filepath.Join(t.TempDir(), "out"), newKey(t, "exporter")
	if s, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(s string) { t.Error(s) }); err != nil || s.Modules != 1 {
		t.Fatalf("export: %+v, %v", s, err)
	}
	sealed := newEngine(t, nil)
	if s, reports := importInto(t, sealed, out, ImportOptions{Trust: Trust{ExportKeys: publicOf(t, key)}}); s.Modules != 1 || s.Failed != 0 {
		t.Fatalf("import of the export: %+v, %q", s, reports)
	}
	if _, got := moduleBytes(t, sealed, local, "1.2.0"); string(got) != string(data) {
		t.Error("the second mirror serves another package")
	}
}

// unpackModule lists the entries of a package: files (with " 755" when
// executable) and directories (ending in "/").
func unpackModule(t *testing.T, data []byte) []string {
	t.Helper()
	dir := t.TempDir()
	if err := modsource.Unpack(context.Background(), strings.NewReader(string(data)), dir, modsource.Limits{}); err != nil {
		t.Fatal(err)
	}
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		info, _ := d.Info()
		switch {
		case d.IsDir():
			rel += "/"
		case info.Mode()&0o100 != 0:
			rel += " 755"
		}
		out = append(out, rel)
		return nil
	})
	return out
}

// TestImportReadsNothingOutsideTheDirectory: a directory to import whose
// directories are links to directories outside it (a victim's, holding a
// key beside a version-named directory) imports nothing of them: a local
// module is packed from the files under the input only, and neither a
// local module nor a provider version is read through a link to a
// directory elsewhere.
func TestImportReadsNothingOutsideTheDirectory(t *testing.T) {
	victim := t.TempDir()
	write(t, filepath.Join(victim, "aws", "1.0.0", "export-key.asc"), "-----BEGIN PGP PRIVATE KEY BLOCK-----\n")
	write(t, filepath.Join(victim, "1.0.0", "url-signing.key"), "secret\n")
	in := t.TempDir()
	write(t, filepath.Join(in, modulesDir, "tf.corp.example", "platform", "network", "aws", "1.2.0", "main.tf"), "# ok\n")
	for link, target := range map[string]string{
		// modules/HOST/NAMESPACE/NAME -> victim: its aws/1.0.0 is read as a version.
		filepath.Join(in, modulesDir, "tf.corp.example", "platform", "leak"): victim,
		// modules/HOST/NAMESPACE/NAME/SYSTEM -> victim: its 1.0.0.
		filepath.Join(in, modulesDir, "tf.corp.example", "platform", "keys", "aws"): victim,
		// a version's directory itself.
		filepath.Join(in, modulesDir, "tf.corp.example", "platform", "ver", "aws", "1.0.0"): filepath.Join(victim, "1.0.0"),
	} {
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	engine := newEngine(t, enginetest.StartOrigin(t, fakeorigin.Options{}))
	sum, reports := importInto(t, engine, in, ImportOptions{AllowUnsigned: true})
	t.Logf("%+v %q", sum, reports)
	if sum.Modules != 1 {
		t.Errorf("imported %d modules, want the one inside the directory", sum.Modules)
	}
	for _, name := range []string{"leak", "keys", "ver"} {
		m := addrs.Module{Hostname: "tf.corp.example", Namespace: "platform", Name: name, System: "aws"}
		if list, _, err := engine.Modules().ModuleVersions(context.Background(), m); err == nil {
			_, data := moduleBytes(t, engine, m, list.Versions[0])
			t.Errorf("module %s imported from outside the directory: %v", m, unpackModule(t, data))
		}
	}
}

// A module whose origin answered its download in OpenTofu's direct form
// (a package URL, here one without an extension, fetched with the
// origin's token where "use_registry_credentials" is true, without any
// where it is false) is exported with its record saying so, without the
// token, and imported as such: the importing mirror serves the same
// package, and would fetch it again the same way.
func TestExportImportModuleOfAPackageURL(t *testing.T) {
	const token = "registry-tok-airgap-3"
	for _, use := range []bool{true, false} {
		t.Run(fmt.Sprintf("use_registry_credentials %v", use), func(t *testing.T) {
			origin := enginetest.StartOrigin(t, fakeorigin.Options{})
			origin.AddTarball("vpc-0.1.0", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# private\n")}))
			if use {
				origin.RequireTarballToken("vpc-0.1.0", token)
			}
			origin.AddDirectModule("acme", "tarball", "aws", "0.1.0", origin.TarballURL("vpc-0.1.0"), use)
			src := newEngine(t, origin, func(cfg *discovery.Config) {
				cfg.Credentials = func(h svchost.Hostname) string { return token }
			})
			_, want := moduleBytes(t, src, tarballModule, "0.1.0")
			out, key := filepath.Join(t.TempDir(), "out"), newKey(t, "exporter")
			var reports []string
			sum, err := Export(context.Background(), src, servedBy(t, src, nil), nil, Selection{}, out, key, func(s string) { reports = append(reports, s) })
			if err != nil || sum.Failed != 0 || sum.Modules != 1 {
				t.Fatalf("export: %+v, %v, %q", sum, err, reports)
			}
			doc, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(tarballRel+".json")))
			var mf struct {
				Direct              bool `json:"direct"`
				RegistryCredentials bool `json:"registry_credentials"`
			}
			if err == nil {
				err = json.Unmarshal(doc, &mf)
			}
			if err != nil || !mf.Direct || mf.RegistryCredentials != use || strings.Contains(string(doc), token) {
				t.Errorf("the exported record is %s (%v); want direct, registry_credentials %v, and no token", doc, err, use)
			}

			sealed := newEngine(t, nil)
			isum, reports := importInto(t, sealed, out, ImportOptions{Trust: Trust{ExportKeys: publicOf(t, key)}})
			if isum.Modules != 1 || isum.Failed != 0 || len(reports) != 0 {
				t.Fatalf("import: %+v, %q", isum, reports)
			}
			rec, err := sealed.Modules().ModuleLocation(context.Background(), tarballModule, enginetest.MustModuleVersion(t, "0.1.0"))
			if err != nil || !rec.Direct || rec.RegistryCredentials != use || rec.Location != origin.TarballURL("vpc-0.1.0") {
				t.Fatalf("record %+v, %v", rec, err)
			}
			if _, got := moduleBytes(t, sealed, tarballModule, "0.1.0"); string(got) != string(want) {
				t.Error("the sealed mirror serves another package than the exporter's")
			}
		})
	}
}
