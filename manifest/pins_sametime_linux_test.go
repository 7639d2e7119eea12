package manifest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"
)

// A pins file replaced by one of the same size and modification time
// (copied with its time kept: rsync -a, cp -p, a tool that sets the
// time of its source) is a change: the pin it now holds is read, where
// the version it pinned before stayed pinned and the new one was not.
func TestPinsDirReadsAFileReplacedWithTheSameTime(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "team.lock.hcl")
	mtime := time.Now().Add(-time.Hour).Truncate(time.Second)
	lock := func(version string) {
		t.Helper()
		body := "provider \"registry.terraform.io/hashicorp/aws\" {\n  version = \"" + version + "\"\n  hashes  = []\n}\n"
		// Written aside, then renamed over the file, its time kept.
		next := path + ".new"
		if err := os.WriteFile(next, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(next, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(next, path); err != nil {
			t.Fatal(err)
		}
	}
	lock("5.1.0")
	d := NewPinsDir(dir)
	if _, changed, err := d.Pins(); err != nil || !changed {
		t.Fatalf("first read: changed %v, %v", changed, err)
	}
	lock("5.2.0")
	pins, changed, err := d.Pins()
	if err != nil || !changed {
		t.Fatalf("a pins file replaced by another of the same size and time is not read again: changed %v, %v", changed, err)
	}
	sels := pins.Providers["registry.terraform.io/hashicorp/aws"]
	if len(sels) != 1 || !sels[0].Set.Has(versions.MustParseVersion("5.2.0")) {
		t.Errorf("pins %+v", pins.Providers)
	}
}
