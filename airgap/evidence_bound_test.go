package airgap

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestReadEvidenceBounded: a bundle's evidence file is read before any
// key vouches for it, so what it makes the importer build is bounded: a
// 16 MiB file of empty document objects (which decoded to a gigabyte of
// structs), and one listing thousands of documents that all name the same
// SHA256SUMS file (each read and kept again), are refused with the memory
// taken bounded by the file's bytes.
func TestReadEvidenceBounded(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "terraform-provider-b_1.0.0_SHA256SUMS"), []byte(strings.Repeat("x", 256<<10)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "terraform-provider-b_1.0.0_SHA256SUMS.sig"), []byte("sig"), 0o644); err != nil {
		t.Fatal(err)
	}
	fill := func(elem string, n int) string {
		var b strings.Builder
		fmt.Fprintf(&b, `{"format":%d,"provider":"example.com/a/b","version":"1.0.0","documents":[`, evidenceFormat)
		for i := 0; i < n && b.Len() < maxEvidenceBytes-64; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(elem)
		}
		b.WriteString(`],"packages":{}}`)
		return b.String()
	}
	tests := []struct{ name, doc string }{
		{"empty documents", fill(`{}`, 1<<30)},
		{"one file named again and again", fill(`{"file":"terraform-provider-b_1.0.0_SHA256SUMS","signature_file":"terraform-provider-b_1.0.0_SHA256SUMS.sig"}`, 2000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, evidenceName("b", "1.0.0"))
			if err := os.WriteFile(path, []byte(tt.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			_, docs, err := readEvidence(dir, path, func(*evidenceFile) error { return nil }, readCapped)
			runtime.ReadMemStats(&m1)
			if err == nil {
				t.Errorf("an evidence file of %d documents was taken", len(docs))
			}
			// Reading the file takes its size, twice at most; other tests run
			// beside this one. Before the bounds: 3 GiB and 1.2 GiB.
			if a := m1.TotalAlloc - m0.TotalAlloc; a > 160<<20 {
				t.Errorf("refusing a %d KiB evidence file allocated %d MiB (%v)", len(tt.doc)>>10, a>>20, err)
			}
		})
	}
}

// TestVersionHashesBounded: a bundle's VERSION.json, read before any key
// vouches for it, is bounded in what it decodes to as the evidence is.
func TestVersionHashesBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"archives":{"linux_amd64":{"hashes":[`)
	for b.Len() < maxEvidenceBytes-64 {
		b.WriteString(`"",`)
	}
	b.WriteString(`""]}}}`)
	path := filepath.Join(t.TempDir(), "1.0.0.json")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	_, err := versionHashes(path, readCapped)
	runtime.ReadMemStats(&m1)
	if err == nil {
		t.Error("a VERSION.json of millions of hashes was taken")
	}
	if a := m1.TotalAlloc - m0.TotalAlloc; a > 160<<20 {
		t.Errorf("refusing a %d KiB VERSION.json allocated %d MiB (%v)", b.Len()>>10, a>>20, err)
	}
}
