package manifest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
)

// A pins directory gives the locked versions and the manifests'
// selections, is read again only when a file changes, and keeps
// reporting a file that does not parse.
func TestPinsDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mtime time.Time) {
		t.Helper()
		path := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(path, mtime, mtime)
	}
	t0 := time.Now().Add(-time.Hour)
	write("team-a/.terraform.lock.hcl", `provider "registry.terraform.io/hashicorp/aws" {
  version = "5.1.0"
  hashes  = []
}
`, t0)
	write("README.md", "not a pin", t0)
	d := NewPinsDir(dir)
	pins, changed, err := d.Pins()
	if err != nil || !changed {
		t.Fatalf("first read: changed %v, %v", changed, err)
	}
	sels := pins.Providers["registry.terraform.io/hashicorp/aws"]
	if len(sels) != 1 || !sels[0].Set.Has(versions.MustParseVersion("5.1.0")) || sels[0].Set.Has(versions.MustParseVersion("5.2.0")) {
		t.Fatalf("pins %+v", pins.Providers)
	}
	if _, changed, err := d.Pins(); changed || err != nil {
		t.Errorf("unchanged directory read again: changed %v, %v", changed, err)
	}
	write("keep.hcl", `provider "registry.terraform.io/hashicorp/random" {
  versions = ["~> 3.0"]
  latest   = 2
}
`, t0.Add(time.Minute))
	pins, changed, err = d.Pins()
	if err != nil || !changed {
		t.Fatalf("after a manifest was added: changed %v, %v", changed, err)
	}
	r := pins.Providers["registry.terraform.io/hashicorp/random"]
	if len(r) != 1 || r[0].Latest != 2 || !r[0].Set.Has(versions.MustParseVersion("3.4.0")) || len(pins.Providers) != 2 {
		t.Errorf("pins %+v", pins.Providers)
	}
	write("broken.hcl", `provider {`, t0.Add(2*time.Minute))
	if _, _, err := d.Pins(); err == nil {
		t.Error("a file that does not parse gave no error")
	}
	if _, _, err := d.Pins(); err == nil {
		t.Error("the error was reported once only")
	}
	// A file nested too deep to parse (3 MB, under the 4 MiB a pins file
	// may hold) is such a file, named with its line: it used to kill the
	// process.
	os.Remove(filepath.Join(dir, "broken.hcl"))
	deep := "a = " + strings.Repeat("[", 1500000) + strings.Repeat("]", 1500000) + "\n"
	write("deep.hcl", deep, t0.Add(3*time.Minute))
	if _, _, err := d.Pins(); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "deep.hcl")+":1: Nesting too deep") {
		t.Errorf("a file nested too deep: %v", err)
	}
}

// A pins file's cli blocks pin CLI versions, as a sync manifest's select
// them: by the product's address, HashiCorp's or OpenTofu's by its name,
// with latest and the file:line.
func TestPinsDirCLI(t *testing.T) {
	dir := t.TempDir()
	body := `cli "terraform" {
  versions = ["1.5.7", "~> 1.9.0"]
}
cli "tofu" {
  versions = [">= 1.8.0"]
  latest   = 1
}
provider "registry.terraform.io/hashicorp/random" {
  versions = ["3.6.0"]
}
`
	if err := os.WriteFile(filepath.Join(dir, "clis.hcl"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	pins, _, err := NewPinsDir(dir).Pins()
	if err != nil {
		t.Fatal(err)
	}
	tf := pins.CLIs["releases.hashicorp.com/hashicorp/terraform"]
	if len(tf) != 2 || !tf[0].Set.Has(versions.MustParseVersion("1.5.7")) || tf[0].Set.Has(versions.MustParseVersion("1.6.0")) ||
		!tf[1].Set.Has(versions.MustParseVersion("1.9.3")) || tf[1].Set.Has(versions.MustParseVersion("1.10.0")) ||
		tf[0].Where != filepath.Join(dir, "clis.hcl")+":2" {
		t.Errorf("terraform pins %+v", tf)
	}
	tofu := pins.CLIs["get.opentofu.org/opentofu/tofu"]
	if len(tofu) != 1 || tofu[0].Latest != 1 || !tofu[0].Set.Has(versions.MustParseVersion("1.9.0")) || tofu[0].Set.Has(versions.MustParseVersion("1.7.0")) {
		t.Errorf("tofu pins %+v", tofu)
	}
	if len(pins.CLIs) != 2 || len(pins.Providers) != 1 {
		t.Errorf("pins: %d CLI products, %d providers; want 2 and 1", len(pins.CLIs), len(pins.Providers))
	}
	os.WriteFile(filepath.Join(dir, "clis.hcl"), []byte(`cli "terraform-provider-aws" { versions = ["1.0.0"] }`), 0o644)
	os.Chtimes(filepath.Join(dir, "clis.hcl"), time.Now().Add(time.Minute), time.Now().Add(time.Minute))
	if _, _, err := NewPinsDir(dir).Pins(); err == nil || !strings.Contains(err.Error(), "clis.hcl:1") {
		t.Errorf("a provider named as a CLI product: %v", err)
	}
}

// A pins file its group or all users may write is refused as the
// operator's files of trust are: an error naming it, its mode and the
// chmod to run, and no pins of that reading taken (the caller keeps
// those read before), at every reading while it stays so; its owner's
// again, the pins read before stand. A file that grew past the bound
// since the directory was listed is refused naming it and the bound. So
// is one another user owns (as root, which may give it to them).
func TestPinsDirRefusesWhatOthersMayWrite(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no mode bits")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "team.hcl")
	if err := os.WriteFile(path, []byte("provider \"registry.terraform.io/hashicorp/random\" {\n  versions = [\"3.6.0\"]\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := NewPinsDir(dir)
	pins, changed, err := d.Pins()
	if err != nil || !changed || len(pins.Providers["registry.terraform.io/hashicorp/random"]) != 1 {
		t.Fatalf("first read: %+v, changed %v, %v", pins, changed, err)
	}
	for _, mode := range []os.FileMode{0o664, 0o646} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			pins, changed, err := d.Pins()
			var we *inputfile.WritableError
			if !errors.As(err, &we) || !strings.Contains(err.Error(), fmt.Sprintf("%s has mode %04o", path, mode)) ||
				!strings.Contains(err.Error(), "chmod go-w "+path) {
				t.Errorf("mode %04o, reading %d: %v, want it refused naming the file, its mode and the chmod", mode, i+1, err)
			}
			if pins != nil || changed {
				t.Errorf("mode %04o, reading %d: pins %+v taken (changed %v)", mode, i+1, pins, changed)
			}
		}
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if pins, changed, err := d.Pins(); err != nil || changed || pins != nil {
		t.Errorf("its owner's again: %+v, changed %v, %v; want the pins read before to stand", pins, changed, err)
	}
	// Another file, writable by its group, added beside it.
	other := filepath.Join(dir, "team-b.hcl")
	if err := os.WriteFile(other, []byte("provider \"registry.terraform.io/hashicorp/null\" {\n  versions = [\"3.2.0\"]\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(other, 0o620); err != nil {
		t.Fatal(err)
	}
	if pins, _, err := d.Pins(); err == nil || !strings.Contains(err.Error(), "chmod go-w "+other) || pins != nil {
		t.Errorf("a file its group may write added: %+v, %v", pins, err)
	}

	if err := os.Chmod(other, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Pins(); err != nil {
		t.Fatalf("both files their owner's: %v", err)
	}

	// A file of another user, whatever its mode, is refused as soon as
	// it is given to them (a chown is a change), and stands again once
	// it is root's or the mirror's user's. Giving it away takes root.
	if os.Geteuid() != 0 {
		t.Log("not root: a pins file of another user is not tried")
	} else {
		for _, uid := range []int{65534, os.Geteuid()} {
			if err := os.Chown(other, uid, -1); err != nil {
				t.Fatal(err)
			}
			pins, _, err := d.Pins()
			var oe *inputfile.OwnerError
			if uid != os.Geteuid() && (!errors.As(err, &oe) || pins != nil ||
				!strings.Contains(err.Error(), other+" is owned by user 65534") || !strings.Contains(err.Error(), "chown root "+other)) {
				t.Errorf("a pins file of user 65534: %+v, %v; want it refused naming it, its owner and the chown", pins, err)
			}
			if uid == os.Geteuid() && err != nil {
				t.Errorf("the pins file its owner's again: %v", err)
			}
		}
	}

	large := filepath.Join(t.TempDir(), "large.hcl")
	if err := os.WriteFile(large, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(large, maxPinFileBytes+1); err != nil {
		t.Fatal(err)
	}
	var tl *inputfile.TooLargeError
	if _, err := parsePinFile(large); !errors.As(err, &tl) || tl.Max != maxPinFileBytes || tl.Path != large {
		t.Errorf("a file past the bound: %v", err)
	}
}
