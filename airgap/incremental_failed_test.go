package airgap

import (
	"archive/tar"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIncrementalExportFailsAVersionItNoLongerVouchesFor: an export into
// the directory of an earlier one, whose cache no longer holds a version
// the earlier export carried, finds that version's archive changed since
// (a bad copy, bit rot on the medium: here its SHA256SUMS, whose
// signature no longer verifies). It cannot write it again nor sign
// it, and an import of the result refuses the version: the export must
// count it as failed (tfmirror export exits 1), not succeed with a line
// on standard error that CI does not read.
func TestIncrementalExportFailsAVersionItNoLongerVouchesFor(t *testing.T) {
	engine, p, out, key := exportedNetAndTarball(t)
	ctx := context.Background()
	if err := engine.Inventory().RemoveVersion("provider", p.String(), "1.0.0"); err != nil {
		t.Fatal(err)
	}
	sums := filepath.Join(out, p.Hostname.ForDisplay(), p.Namespace, p.Type, "terraform-provider-net_1.0.0_SHA256SUMS")
	data, err := os.ReadFile(sums)
	if err != nil {
		t.Fatal(err)
	}
	data[0] ^= 0x01
	if err := os.WriteFile(sums, data, 0o644); err != nil {
		t.Fatal(err)
	}

	var reports []string
	sum, err := Export(ctx, engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(s string) { reports = append(reports, s) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("export: %+v %q", sum, reports)
	if sum.Failed == 0 {
		t.Errorf("the export counts no failure (exit status 0), though %s 1.0.0 is no longer vouched for: %q", p, reports)
	}
	if !strings.Contains(strings.Join(reports, "\n"), p.String()+" 1.0.0") {
		t.Errorf("no report names %s 1.0.0: %q", p, reports)
	}

	// What the export says must be what the import finds.
	isum, ireports := importInto(t, newEngine(t, nil), out, ImportOptions{Trust: Trust{ExportKeys: publicOf(t, key)}})
	t.Logf("import: %+v %q", isum, ireports)
	if isum.Failed == 0 {
		t.Fatalf("the import took the changed archive: %+v", isum)
	}
}

// TestIncrementalExportPassesOverAStrayZip: a file named as a provider
// archive that is no readable zip, in the directory of an earlier export
// (a stray file carried back), is left out of the mirror's index and of
// the signed manifest, said, and fails what it belongs to only: the
// export writes and signs everything else, and an import takes it. The
// export had stopped at the file, after a summary of no failure, and
// signed nothing.
func TestIncrementalExportPassesOverAStrayZip(t *testing.T) {
	engine, p, out, key := exportedNetAndTarball(t)
	ctx := context.Background()
	stray := filepath.Join(out, p.Hostname.ForDisplay(), "acme", "zeta", "terraform-provider-zeta_0.0.1_linux_amd64.zip")
	if err := os.MkdirAll(filepath.Dir(stray), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stray, []byte("junk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var reports []string
	sum, err := Export(ctx, engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(s string) { reports = append(reports, s) })
	if err != nil {
		t.Fatalf("export: %v (%q)", err, reports)
	}
	all := strings.Join(reports, "\n")
	if sum.Failed != 1 || !strings.Contains(all, stray+": left out of the mirror's index") || !strings.Contains(all, "acme/zeta 0.0.1: failed") {
		t.Errorf("export: %+v %q; want the stray zip left out, said, and its version failed", sum, reports)
	}
	isum, ireports := importInto(t, newEngine(t, nil), out, ImportOptions{Trust: Trust{ExportKeys: publicOf(t, key)}})
	if isum.Imported == 0 || !strings.Contains(strings.Join(ireports, "\n"), "zeta") {
		t.Errorf("import: %+v %q; want the export's packages, the stray zip refused", isum, ireports)
	}
}

// TestImportOfATarOfTheExportDirectory: a tar file made of an export's
// directory (`tar czf b.tgz OUT`), whose entries are one directory down,
// imports as one made of its contents (`tar -C OUT`) does. It had been
// read as a bundle whose top directory is a host, refused for invalid
// provider addresses, then for holding no package.
func TestImportOfATarOfTheExportDirectory(t *testing.T) {
	_, p, out, key := exportedNetAndTarball(t)
	var entries []tarEntry
	err := filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == out {
			return err
		}
		rel, _ := filepath.Rel(filepath.Dir(out), path)
		if d.IsDir() {
			entries = append(entries, tarEntry{hdr: tar.Header{Name: filepath.ToSlash(rel) + "/", Typeflag: tar.TypeDir, Mode: 0o755}})
			return nil
		}
		data, err := os.ReadFile(path)
		entries = append(entries, tarEntry{hdr: tar.Header{Name: filepath.ToSlash(rel), Typeflag: tar.TypeReg}, data: data})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	isum, reports := importInto(t, newEngine(t, nil), writeTar(t, entries...), ImportOptions{Trust: Trust{ExportKeys: publicOf(t, key)}})
	if isum.Failed != 0 || isum.Imported == 0 || len(reports) != 0 {
		t.Errorf("import of a tar of %s's directory: %+v %q; want its packages (%s among them)", filepath.Base(out), isum, reports, p)
	}
}
