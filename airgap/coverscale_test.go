package airgap

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// coversManifest is a trusted manifest of versions versions of one
// provider, perVersion files each, as an export of a large cache lists.
func coversManifest(versions, perVersion int) (*bundle, func(v, i int) string) {
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
	return &bundle{dir: "/in", shown: "IN", manifest: m, signer: "0123456789ABCDEF"}, name
}

// TestListedUnderTakesTheVersionsFilesOnly: each version is checked
// against the files the manifest lists under its own prefix, taken from
// the manifest's paths sorted once: those of 1.0.1, not those of 1.0.10
// or 1.0.11 sorted beside them, and a file of the version left out of
// the bundle is named.
func TestListedUnderTakesTheVersionsFilesOnly(t *testing.T) {
	b, name := coversManifest(12, 3)
	got := b.listedUnder("h/n/t/terraform-provider-t_1.0.1_")
	want := []string{name(1, 0), name(1, 1), name(1, 2)}
	if !slices.Equal(got, want) {
		t.Fatalf("listedUnder(1.0.1) = %q, want %q", got, want)
	}
	if got := b.listedUnder("h/n/t/terraform-provider-t_1.0.99_"); len(got) != 0 {
		t.Fatalf("listedUnder of a version the manifest does not list = %q", got)
	}
	vf := &versionFiles{b: b, read: map[string]manifestFile{}, zips: map[string]int64{}}
	for _, i := range []int{0, 2} {
		vf.read[name(10, i)] = b.manifest[name(10, i)]
	}
	_, err := b.covers(vf, "h/n/t/terraform-provider-t_1.0.10_", "h/n/t/1.0.10.json")
	if err == nil || !strings.Contains(err.Error(), "terraform-provider-t_1.0.10_file1") {
		t.Fatalf("a version lacking a listed file: err = %v, want it named", err)
	}
	for i := range 3 {
		vf.read[name(11, i)] = b.manifest[name(11, i)]
	}
	vf.read[name(10, 1)] = b.manifest[name(10, 1)]
	delete(vf.read, name(11, 0))
	if _, err := b.covers(vf, "h/n/t/terraform-provider-t_1.0.10_", "h/n/t/1.0.10.json"); err != nil {
		t.Fatalf("1.0.10 whole, a file of 1.0.11 not read: %v", err)
	}
}

// BenchmarkCovers: checking 200 versions against a manifest of 100,000
// files, the manifest's paths sorted once in each round, as an import
// sorts them (BENCHMARKS.md has the figures).
func BenchmarkCovers(b *testing.B) {
	const perVersion = 50
	bd, name := coversManifest(2000, perVersion)
	for b.Loop() {
		bd.listed = nil
		for v := range 200 {
			vf := &versionFiles{b: bd, read: map[string]manifestFile{}, zips: map[string]int64{}}
			for i := range perVersion {
				vf.read[name(v, i)] = bd.manifest[name(v, i)]
			}
			if _, err := bd.covers(vf, fmt.Sprintf("h/n/t/terraform-provider-t_1.0.%d_", v), fmt.Sprintf("h/n/t/1.0.%d.json", v)); err != nil {
				b.Fatal(err)
			}
		}
	}
}
