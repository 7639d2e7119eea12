package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/releases"
)

// TestReadArmoredKeys: a keys file holds one or more armored key blocks;
// a file with none is refused, and no file means the shipped keys.
func TestReadArmoredKeys(t *testing.T) {
	dir := t.TempDir()
	two := filepath.Join(dir, "two.asc")
	if err := os.WriteFile(two, []byte("# the publishers\n"+releases.HashiCorpKey+"\n"+releases.OpenTofuKey), 0o644); err != nil {
		t.Fatal(err)
	}
	keys, err := readArmoredKeys(two)
	if err != nil || len(keys) != 2 || !strings.Contains(keys[1], "END PGP PUBLIC KEY BLOCK") {
		t.Fatalf("%d keys, %v", len(keys), err)
	}
	none := filepath.Join(dir, "none.asc")
	if err := os.WriteFile(none, []byte("not a key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readArmoredKeys(none); err == nil {
		t.Error("a file without a key accepted")
	}
	if keys, err := readArmoredKeys(""); err != nil || keys != nil {
		t.Errorf("no file: %v %v", keys, err)
	}
}
