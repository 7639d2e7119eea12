package airgap

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCoversScalesWithTheVersion: an import checks each version against
// the signed manifest, which lists every file of the export, up to a few
// hundred thousand for a large cache: each check takes the files of its
// version, not the manifest whole. Before, every version sorted the whole
// manifest again, an import of a large export taking hours.
func TestCoversScalesWithTheVersion(t *testing.T) {
	const versions, perVersion = 2000, 50
	m := map[string]manifestFile{}
	sha := strings.Repeat("a", 64)
	name := func(v, i int) string {
		return fmt.Sprintf("h/n/t/terraform-provider-t_1.0.%d_file%d", v, i)
	}
	for v := range versions {
		for i := range perVersion {
			m[name(v, i)] = manifestFile{Path: name(v, i), Size: 1, SHA256: sha}
		}
	}
	b := &bundle{dir: "/in", shown: "IN", manifest: m, signer: "0123456789ABCDEF"}
	start := time.Now()
	for v := range 200 {
		vf := &versionFiles{b: b, read: map[string]manifestFile{}, zips: map[string]int64{}}
		for i := range perVersion {
			vf.read[name(v, i)] = m[name(v, i)]
		}
		if _, err := b.covers(vf, fmt.Sprintf("h/n/t/terraform-provider-t_1.0.%d_", v), fmt.Sprintf("h/n/t/1.0.%d.json", v)); err != nil {
			t.Fatal(err)
		}
	}
	// Sorting 100,000 paths once takes some 40 ms; again for each of the
	// 200 versions, 7 s.
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("checking 200 versions against a manifest of %d files took %v", len(m), took)
	}
}
