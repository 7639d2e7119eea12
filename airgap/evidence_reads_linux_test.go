package airgap

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// readBytes is what this process has read so far (rchar of
// /proc/self/io: every byte read(2) returned, from the disk or its cache).
func readBytes(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no rchar in /proc/self/io")
	return 0
}

// TestImportReadsEvidenceDocumentsOnce: an evidence file is read before
// any key vouches for it, and names the SHA256SUMS documents to read
// with it. A bundle of a few MiB whose versions' evidence files each
// name one SHA256SUMS file 64 times (another version's, or their own)
// made the import read and hash a GiB, and as much again for every few
// versions more, however small the bundle. Each version reads the files
// of its own only (named terraform-provider-TYPE_VERSION_..., as exports
// name them), each once: the import reads about what the bundle holds.
func TestImportReadsEvidenceDocumentsOnce(t *testing.T) {
	const versions, sumsBytes = 16, 1 << 20
	in := t.TempDir()
	dir := filepath.Join(in, "tf.corp.example", "acme", "amp")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sums := strings.Repeat("0", sumsBytes)
	write(t, filepath.Join(dir, "terraform-provider-amp_1.0.0_SHA256SUMS"), sums)
	write(t, filepath.Join(dir, "terraform-provider-amp_1.0.0_SHA256SUMS.sig"), "sig")
	for i := range versions {
		version := fmt.Sprintf("1.0.%d", i)
		doc := "terraform-provider-amp_1.0.0_SHA256SUMS" // another version's, but for 1.0.0
		if i%2 == 1 {
			doc = "terraform-provider-amp_" + version + "_SHA256SUMS" // its own
			write(t, filepath.Join(dir, doc), sums)
			write(t, filepath.Join(dir, doc+".sig"), "sig")
		}
		ef := evidenceFile{Format: evidenceFormat, Provider: "tf.corp.example/acme/amp", Version: version, Packages: map[string]evidencePackage{}}
		for range maxEvidenceDocuments {
			ef.Documents = append(ef.Documents, evidenceDocument{File: doc, SignatureFile: doc + ".sig"})
		}
		data, err := json.Marshal(ef)
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, evidenceName("amp", version)), string(data))
		write(t, filepath.Join(dir, "terraform-provider-amp_"+version+"_linux_amd64.zip"), "zip")
	}
	held := int64(versions/2+1) * sumsBytes // the bundle's SHA256SUMS files

	sealed := newEngine(t, nil)
	before := readBytes(t)
	sum, reports := importInto(t, sealed, in, ImportOptions{Shown: "IN"})
	read := readBytes(t) - before
	if sum.Failed != versions || sum.Imported != 0 {
		t.Errorf("import: %+v, %q; want every version refused", sum, reports)
	}
	if read > 4*held {
		t.Errorf("the import read %d MiB of a bundle holding %d MiB of SHA256SUMS files", read>>20, held>>20)
	}
}
