package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// TestTofuOCIZipWithoutItsPackage: an earlier release kept a module
// version's package holding .GIT/config (which tofu on macOS or Windows
// unpacks as a Git configuration) and the zip it made of it; the package
// was evicted since, the zip kept. tofu init of the version from an
// oci:// source on the mirror does not get that zip: it is judged with
// its package, fetched again by today's rules (which leave .GIT out), and
// refused because that package is not the one first mirrored.
func TestTofuOCIZipWithoutItsPackage(t *testing.T) {
	t.Parallel()
	e := newClientE2E(t, tofuBinary(t), fakeorigin.Options{})
	o := e.origin
	files := map[string][]byte{"main.tf": []byte("# dotgit\n"), ".GIT/config": []byte("[core]\n\tfsmonitor = touch /tmp/pwned\n")}
	pkg := fakeorigin.TarGz(files)
	o.AddTarball("dotgit-1.0.0.tar.gz", pkg)
	loc := o.TarballURL("dotgit-1.0.0.tar.gz")
	o.AddModule("acme", "dotgit", "aws", "1.0.0", loc)
	m, err := addrs.ParseModule(tofuRegistry + "/acme/dotgit/aws")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := addrs.ParseModuleVersion("1.0.0")

	// What an earlier release kept: the records and the zip; the
	// package's blob is gone.
	e.stop()
	store, err := cache.Open(cache.Options{Dir: filepath.Join(e.dataDir, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	for _, name := range []string{".GIT/config", "main.tf"} {
		f, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(files[name])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zsum, psum := sha256.Sum256(zb.Bytes()), sha256.Sum256(pkg)
	zsha, psha := hex.EncodeToString(zsum[:]), hex.EncodeToString(psum[:])
	w, err := store.NewBlobWriter(zsha)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(zb.Bytes()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(""); err != nil {
		t.Fatal(err)
	}
	w.Close()
	for key, doc := range map[string]any{
		records.ModuleRecordKey(m, v): records.ModuleRecord{Schema: records.Schema, Module: m.String(), Version: "1.0.0", Location: loc,
			Kind: modsource.KindArchive, Package: loc, SHA256: psha, Size: int64(len(pkg)), FetchedAt: time.Now().UTC()},
		records.ModuleZipKey(m, v): records.ModuleZipRecord{Schema: records.Schema, Module: m.String(), Version: "1.0.0",
			Package: psha, SHA256: zsha, Size: int64(zb.Len())},
		records.ModuleVersionsKey(m): records.ModuleVersionList{Schema: records.Schema, Versions: []string{"1.0.0"}, ListedAt: time.Now().UTC()},
	} {
		if err := store.PutMeta(key, doc); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	e.startMirror(e.dataDir)

	names, err := oci.NewNames("providers", "modules")
	if err != nil {
		t.Fatal(err)
	}
	mirrorHost := strings.TrimSuffix(strings.TrimPrefix(e.url, "https://"), "/")
	root := fmt.Sprintf("module \"g\" {\n  source = \"oci://%s/%s?tag=1.0.0\"\n}\n", mirrorHost, names.Module(m))
	dir, out, err := tofuInitResult(t, e.tf, root, writeTemp(t, "cli.tfrc", ""), e.caFile)
	if err == nil {
		t.Errorf("tofu init installed the zip of a package that is not the one first mirrored:\n%s", out)
	}
	_ = filepath.WalkDir(filepath.Join(dir, ".terraform", "modules"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.EqualFold(d.Name(), ".git") {
			t.Errorf("tofu installed %s", p)
		}
		return nil
	})
	if !strings.Contains(out, "changed") && !strings.Contains(out, "502") {
		t.Errorf("tofu init did not say why:\n%s", out)
	}
}
