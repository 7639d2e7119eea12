package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// fileState is what the victims' check compares: bytes and mode, or
// absence.
type fileState struct {
	exists bool
	mode   fs.FileMode
	data   string
}

func stateOf(t *testing.T, p string) fileState {
	t.Helper()
	fi, err := os.Lstat(p)
	if os.IsNotExist(err) {
		return fileState{}
	}
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	return fileState{true, fi.Mode(), string(b)}
}

// victims is the directory beside a data directory (base/victim, empty)
// and the files the link chain aims at: beside it, and the data
// directory's keys.
type victims struct {
	base, dataDir string
	before        map[string]fileState
}

func (v *victims) paths() []string {
	return []string{filepath.Join(v.base, "victim.txt"),
		filepath.Join(v.dataDir, "url-signing.key"), filepath.Join(v.dataDir, "export-key.asc")}
}

// snapshot records the victims, first making the data directory's keys
// that are not there yet (the export key is made on an export's first
// use): the chain must find each to replace.
func (v *victims) snapshot(t *testing.T) {
	t.Helper()
	for _, name := range []string{"url-signing.key", "export-key.asc"} {
		p := filepath.Join(v.dataDir, name)
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			if err := os.WriteFile(p, []byte(strings.Repeat("k", 64)), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	v.before = map[string]fileState{}
	for _, p := range v.paths() {
		v.before[p] = stateOf(t, p)
	}
}

func (v *victims) untouched(t *testing.T) {
	t.Helper()
	for p, st := range v.before {
		if !st.exists {
			t.Errorf("%s was not there to be replaced", p)
		}
	}
	if ents, err := os.ReadDir(filepath.Join(v.base, "victim")); err != nil || len(ents) > 0 {
		t.Errorf("the victim directory beside the data directory holds %v (%v)", ents, err)
	}
	for _, p := range v.paths() {
		if got := stateOf(t, p); got != v.before[p] {
			t.Errorf("%s changed: %+v, was %+v", p, got, v.before[p])
		}
	}
}

func newVictims(t *testing.T) *victims {
	t.Helper()
	base := t.TempDir()
	v := &victims{base: base, dataDir: filepath.Join(base, "data")}
	if err := os.Mkdir(filepath.Join(base, "victim"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "victim.txt"), []byte("beside\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return v
}

// addHostileModules puts acme/tarchain/aws and acme/gitchain/aws 1.0.0 at
// o: the link chain as a tarball and as a Git tree. A fetch unpacks in
// DATA/tfmirror-module-*/tree: the data directory is 2 levels up, the
// directory beside it 3.
func addHostileModules(t *testing.T, o *fakeorigin.Origin) {
	t.Helper()
	o.AddTarball("chain.tar.gz", fakeorigin.LinkChainTarGz(1, 2, 3))
	o.AddModule("acme", "tarchain", "aws", "1.0.0", o.TarballURL("chain.tar.gz"))
	if _, err := o.AddGitTree("chain", fakeorigin.LinkChainGitTree(1, 2, 3), "v1.0.0"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "gitchain", "aws", "1.0.0", "git::"+o.GitURL("chain")+"?ref=v1.0.0")
}

// TestHostileModulesThroughTheFrontDoor: clients asking the mirror for a
// module whose package holds the link chain (a tarball, a Git tree) get
// no package; nothing beside the data directory, nor its keys, changes.
func TestHostileModulesThroughTheFrontDoor(t *testing.T) {
	if _, err := os.Stat("/usr/bin/git"); err != nil {
		t.Skip(err)
	}
	v := newVictims(t)
	e := newE2E(t, fakeorigin.Options{})
	e.stop()
	addHostileModules(t, e.origin)
	// A tarball with an entry nested 300,000 directories deep (a 600 kB
	// name in the tar file's extended header): making it took days.
	e.origin.AddTarball("deep.tar.gz", fakeorigin.TarGzEntries([]fakeorigin.TarEntry{{Name: strings.Repeat("a/", 300_000) + "main.tf", Body: "# deep\n"}}))
	e.origin.AddModule("acme", "tardeep", "aws", "1.0.0", e.origin.TarballURL("deep.tar.gz"))
	// A Git tree of 100,000 entries with names of 200 bytes (23 MiB, over
	// the 20 MiB a directory of the default 20,000 entries takes), in a
	// pack of three objects: refused from the pack's header for the tree.
	wide := fakeorigin.GitTree{Submodules: map[string]string{}}
	for i := range 100_000 {
		wide.Submodules[fmt.Sprintf("%0200d", i)] = "0123456789abcdef0123456789abcdef01234567"
	}
	if _, err := e.origin.AddGitTree("wide", wide, "v1.0.0"); err != nil {
		t.Fatal(err)
	}
	e.origin.AddModule("acme", "gitwide", "aws", "1.0.0", "git::"+e.origin.GitURL("wide")+"?ref=v1.0.0")
	e.startMirror(v.dataDir)
	v.snapshot(t)
	ca, err := os.ReadFile(e.caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer c.CloseIdleConnections()
	for name, why := range map[string]string{"tarchain": "link", "gitchain": "link", "tardeep": "unsafe tree entry",
		"gitwide": "its Git pack holds a tree object of 22800000 bytes, more than the 20481024 bytes a directory of the 20000 files and directories allowed takes"} {
		t.Run(name, func(t *testing.T) {
			base := e.url + "registry/" + tfRegistry + "/v1/modules/acme/" + name + "/aws/1.0.0/"
			resp, err := c.Get(base + "download")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			loc := resp.Header.Get("X-Terraform-Get")
			u, err := url.Parse(base)
			if err != nil || loc == "" {
				t.Fatalf("download answer %d, location %q", resp.StatusCode, loc)
			}
			rel, _, _ := strings.Cut(loc, "//")
			pkgURL, _ := u.Parse(strings.TrimPrefix(rel, "./"))
			if q := strings.SplitN(loc, "?", 2); len(q) == 2 {
				pkgURL.RawQuery = q[1]
			}
			resp, err = c.Get(pkgURL.String())
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Errorf("the package was served (%d bytes)", len(body))
			}
			if !bytes.Contains(body, []byte(why)) {
				t.Errorf("refused for another reason: %d %s", resp.StatusCode, body)
			}
			t.Logf("package answer: %d %s", resp.StatusCode, body)
			v.untouched(t)
		})
	}
}

// TestHostileModulesThroughSync: `tfmirror sync` of a configuration
// using the hostile modules fails for them; nothing beside its data
// directory, nor the directory's keys, changes.
func TestHostileModulesThroughSync(t *testing.T) {
	if _, err := os.Stat("/usr/bin/git"); err != nil {
		t.Skip(err)
	}
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: []string{tfRegistry}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	addHostileModules(t, origin)
	v := newVictims(t)
	config := t.TempDir()
	root := "module \"t\" {\n  source  = \"acme/tarchain/aws\"\n  version = \"1.0.0\"\n}\n" +
		"module \"g\" {\n  source  = \"acme/gitchain/aws\"\n  version = \"1.0.0\"\n}\n"
	if err := os.WriteFile(filepath.Join(config, "main.tf"), []byte(root), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(v.dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	v.snapshot(t)
	_, errOut, code := syncInProcess(t, origin, v.dataDir, "--platforms", "linux_amd64", config)
	if code == 0 {
		t.Errorf("sync of the hostile modules exited 0")
	}
	if !strings.Contains(errOut, "link") {
		t.Errorf("sync does not say the packages were refused for their links:\n%s", errOut)
	}
	v.untouched(t)
}

// hostileModuleBundle makes an export bundle as `tfmirror export` writes
// it, of a mirror that synced the module acme/chain/aws 1.0.0 from
// origin, then puts the link chain (fakeorigin.LinkChainTarGz(climbs...))
// in place of the module's package and signs the manifest again with the
// exporting mirror's own key, as that mirror signs what its cache holds.
// It returns the bundle, the package's path in it and the file of the
// exporter's public key.
func hostileModuleBundle(t *testing.T, origin *fakeorigin.Origin, climbs ...int) (bundle, pkg, exporter string) {
	t.Helper()
	origin.AddTarball("clean.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# clean\n")}))
	origin.AddModule("acme", "chain", "aws", "1.0.0", origin.TarballURL("clean.tar.gz"))
	config := t.TempDir()
	root := "module \"c\" {\n  source  = \"acme/chain/aws\"\n  version = \"1.0.0\"\n}\n"
	writeFile(t, filepath.Join(config, "main.tf"), []byte(root))
	connected := filepath.Join(t.TempDir(), "connected")
	if out, errOut, code := syncInProcess(t, origin, connected, "--platforms", "linux_amd64", config); code != 0 {
		t.Fatalf("sync exited %d:\n%s%s", code, out, errOut)
	}
	bundle = filepath.Join(t.TempDir(), "bundle")
	if code, out, errOut := runCommand("export", "--data-dir", connected, bundle); code != 0 || !strings.Contains(out, "modules: 1 packages exported") {
		t.Fatalf("export exited %d:\n%s%s", code, out, errOut)
	}
	exporter = exporterKey(t, connected)

	dir := filepath.Join(bundle, "modules", tfRegistry, "acme", "chain", "aws")
	pkg = filepath.Join(dir, "1.0.0.tar.gz")
	chain := fakeorigin.LinkChainTarGz(climbs...)
	writeFile(t, pkg, chain)
	var rec map[string]any
	readJSON(t, filepath.Join(dir, "1.0.0.json"), &rec)
	sum := sha256.Sum256(chain)
	rec["sha256"], rec["size"] = hex.EncodeToString(sum[:]), len(chain)
	writeJSON(t, filepath.Join(dir, "1.0.0.json"), rec)
	f, err := os.Open(filepath.Join(connected, "export-key.asc"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys, err := openpgp.ReadArmoredKeyRing(f)
	if err != nil || len(keys) != 1 {
		t.Fatalf("the exporter's key: %d keys, %v", len(keys), err)
	}
	signManifest(t, bundle, keys[0])
	return bundle, pkg, exporter
}

// TestHostileModuleBundleImported is the table of a module bundle whose
// package holds the link chain, signed by an export key the importing
// side trusts, imported by `tfmirror import` on its own and through a
// running serve's admin socket. The import checks a package in
// DATA/tfmirror-module-check-*: the chain climbs to the data directory
// (its keys) and to the directory beside it. The import refuses the
// package, naming it and its link; nothing beside the data directory,
// nor its keys, changes; the version is not served.
func TestHostileModuleBundleImported(t *testing.T) {
	e := newE2E(t, fakeorigin.Options{})
	e.stop()
	bundle, pkg, exporter := hostileModuleBundle(t, e.origin, 1, 2)
	for _, tc := range []struct {
		name     string
		viaServe bool
	}{
		{"standalone", false},
		{"through the admin socket", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVictims(t)
			args := []string{"import", "--data-dir", v.dataDir}
			if tc.viaServe {
				e.startMirror(v.dataDir, "--offline", "--trusted-export-keys", exporter)
				waitAdminSocket(t, v.dataDir)
			} else {
				if err := os.Mkdir(v.dataDir, 0o700); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--trusted-export-keys", exporter)
			}
			v.snapshot(t)
			code, out, errOut := runCommand(append(args, bundle)...)
			t.Logf("import exited %d:\n%s%s", code, out, errOut)
			if code != 1 || !strings.Contains(out, "imported 0 packages (0 bytes), 0 already present, 1 failed") {
				t.Errorf("import exited %d, want 1 with no module imported", code)
			}
			if via := strings.Contains(errOut, "admin socket"); via != tc.viaServe {
				t.Errorf("the import went through the admin socket: %v, want %v", via, tc.viaServe)
			}
			for _, w := range []string{"module " + tfRegistry + "/acme/chain/aws 1.0.0 refused", pkg, "link"} {
				if !strings.Contains(errOut, w) {
					t.Errorf("the import does not say %q", w)
				}
			}
			v.untouched(t)

			if !tc.viaServe {
				e.startMirror(v.dataDir, "--offline")
			}
			defer e.stop()
			c := trustingClient(t, e.caFile)
			base := e.url + "registry/" + tfRegistry + "/v1/modules/acme/chain/aws/"
			for _, path := range []string{"versions", "1.0.0/download"} {
				resp, err := c.Get(base + path)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 == 2 {
					t.Errorf("%s: %d %s, want the refused version not served", path, resp.StatusCode, body)
				}
			}
		})
	}
}

// TestSyncReadsNoConfigurationOutsideThePackage: a module package whose
// configuration calls a local source outside the package (a directory of
// the machine sync runs on, by enough "../") is refused, as Terraform
// refuses it; sync reads nothing there, and asks the origin for nothing
// the configuration there names.
func TestSyncReadsNoConfigurationOutsideThePackage(t *testing.T) {
	t.Parallel()
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: []string{tfRegistry}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	private := t.TempDir()
	writeFile(t, filepath.Join(private, "main.tf"), []byte("terraform {\n  required_providers {\n    secret = { source = \"acme/secretthing\" }\n  }\n}\n"+
		"module \"inner\" {\n  source  = \"acme/privatemodule/aws\"\n  version = \"1.0.0\"\n}\n"))
	climb := strings.Repeat("../", 40) + strings.TrimPrefix(filepath.ToSlash(private), "/")
	origin.AddTarball("climb.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("module \"up\" {\n  source = \"" + climb + "\"\n}\n")}))
	origin.AddModule("acme", "climb", "aws", "1.0.0", origin.TarballURL("climb.tar.gz"))
	config := t.TempDir()
	writeFile(t, filepath.Join(config, "main.tf"), []byte("module \"c\" {\n  source  = \"acme/climb/aws\"\n  version = \"1.0.0\"\n}\n"))
	out, errOut, code := syncInProcess(t, origin, filepath.Join(t.TempDir(), "data"), "--platforms", "linux_amd64", config)
	if code == 0 || !strings.Contains(errOut, "outside the module package") {
		t.Errorf("sync of a package calling a directory outside it: exit %d, want 1 saying the source is outside the package", code)
	}
	for _, name := range []string{"secretthing", "privatemodule"} {
		if strings.Contains(out+errOut, name) {
			t.Errorf("sync read the configuration outside the package and went for %s", name)
		}
	}
}
