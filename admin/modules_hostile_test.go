package admin

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/safetree"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// TestUnpackRefusesHostileModules is the admin API's table of hostile
// module packages: the link chain fetched from the origin, and the same
// package cached before every package's links were checked. Unpacking
// either writes nothing outside the caller's directory or the engine's
// scratch directory (the victims beside each keep their bytes and mode),
// is refused, and leaves no link in the caller's directory.
func TestUnpackRefusesHostileModules(t *testing.T) {
	// The caller's directory is base/unpack (1 level below base); a
	// fetch unpacks in base/scratch/tfmirror-module-*/tree (3 levels).
	pkg := fakeorigin.LinkChainTarGz(1, 2, 3)
	const victimBytes = "operator's key\n"
	const mod = `"module":"registry.terraform.io/acme/vpc/aws"`
	for _, tc := range []struct {
		name   string
		cached bool // put in the cache by hand, as an older version kept it
	}{
		{"fetched from the origin", false},
		{"cached before", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			scratch, dir := filepath.Join(base, "scratch"), filepath.Join(base, "unpack")
			for _, d := range []string{scratch, dir, filepath.Join(base, "victim")} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			victims := []string{"victim.txt", "url-signing.key", "export-key.asc"}
			for _, name := range victims {
				if err := os.WriteFile(filepath.Join(base, name), []byte(victimBytes), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			h := newHarness(t, harnessOptions{engine: mirror.Config{ScratchDir: scratch}})
			o := h.origin
			if tc.cached {
				o.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# m\n")}))
			} else {
				o.AddTarball("m.tar.gz", pkg)
			}
			o.AddModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("m.tar.gz"))
			if tc.cached {
				putOldModulePackage(t, h, pkg)
				// The origin serves the hostile package now too: the one
				// cached before is refused and fetched again
				// (mirror/modules), and the refetch is refused in turn.
				o.AddTarball("m.tar.gz", pkg)
			}
			_, post := socket(t, h.newAPI(t, nil, nil, Options{}))
			status, body := post("/v1/module/unpack", "{"+mod+`,"version":"1.0.0","dir":`+strconv.Quote(dir)+"}")
			if status == http.StatusOK {
				t.Errorf("unpack: %d %s, want refused", status, body)
			}
			t.Logf("unpack: %d %s", status, body)

			if ents, err := os.ReadDir(filepath.Join(base, "victim")); err != nil || len(ents) > 0 {
				t.Errorf("the victim directory holds %v (%v)", ents, err)
			}
			for _, name := range victims {
				p := filepath.Join(base, name)
				b, err := os.ReadFile(p)
				fi, serr := os.Lstat(p)
				if err != nil || serr != nil || string(b) != victimBytes || fi.Mode() != 0o600 {
					t.Errorf("%s changed: %q (%v %v)", name, b, err, serr)
				}
			}
			if links, err := safetree.Links(os.DirFS(dir), 0); err != nil || len(links) > 0 {
				t.Errorf("links in the caller's directory: %v (%v)", links, err)
			}
		})
	}
}

// putOldModulePackage caches the module acme/vpc/aws 1.0.0 (from its
// origin) and puts pkg in place of its package, as a cache of an older
// version could hold it.
func putOldModulePackage(t *testing.T, h *harness, pkg []byte) {
	t.Helper()
	m, err := addrs.ParseModule("registry.terraform.io/acme/vpc/aws")
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.engine.Modules().OpenModule(t.Context(), m, versions.MustParseVersion("1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	sum := sha256.Sum256(pkg)
	sha := hex.EncodeToString(sum[:])
	w, err := h.store.NewBlobWriter(sha)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write(pkg); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(""); err != nil {
		t.Fatal(err)
	}
	key := "module/registry.terraform.io/acme/vpc/aws/1.0.0"
	var rec records.ModuleRecord
	if _, err := h.store.GetMeta(key, &rec); err != nil {
		t.Fatal(err)
	}
	rec.SHA256, rec.Size = sha, int64(len(pkg))
	if err := h.store.PutMeta(key, rec); err != nil {
		t.Fatal(err)
	}
}
