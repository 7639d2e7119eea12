package airgap

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
)

// outsideFiles lists the files under dir (relative, with slashes).
func outsideFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// outFor is the export directory out, opened for the test's length.
func outFor(t *testing.T, out string) *outDir {
	t.Helper()
	dir, err := openOutDir(out, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	return dir
}

// symlink makes a symbolic link at link to target.
func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Skip(err)
	}
}

// TestExportWritesNothingThroughALinkInOut: an output directory that came
// back from the other side of the air gap with directory links in it
// (to the provider's host, the modules and the CLI releases) makes the
// export write no archive, evidence, index nor module package outside
// it: the versions whose directory is a link are reported as failed,
// naming the link, and the directory the links lead to is left as it
// was.
func TestExportWritesNothingThroughALinkInOut(t *testing.T) {
	engine, p := cachedNetAndTarball(t)
	out, elsewhere := filepath.Join(t.TempDir(), "out"), t.TempDir()
	host := filepath.Join(out, p.Hostname.ForDisplay())
	symlink(t, filepath.Join(elsewhere, "host"), host)
	symlink(t, filepath.Join(elsewhere, "modules"), filepath.Join(out, modulesDir))
	for _, d := range []string{"host", "modules"} {
		if err := os.Mkdir(filepath.Join(elsewhere, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var reports []string
	sum, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, newKey(t, "exporter"), func(s string) { reports = append(reports, s) })
	t.Logf("export: %+v %v %q", sum, err, reports)
	if got := outsideFiles(t, elsewhere); len(got) > 0 {
		t.Errorf("the export wrote outside its directory, through a link in it: %q", got)
	}
	if err == nil && sum.Failed == 0 {
		t.Errorf("the export into a directory with links in it counts no failure: %+v", sum)
	}
	all := strings.Join(append(reports, errString(err)), "\n")
	if !strings.Contains(all, host+" is a symbolic link") {
		t.Errorf("no report or error names the link %s: %q", host, all)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestExportWithdrawsNothingThroughALinkInOut: an incremental export that
// withdraws a version denied since does not remove its files where a
// link in the output directory leads: it stops, naming the link.
func TestExportWithdrawsNothingThroughALinkInOut(t *testing.T) {
	engine, p, out, key := exportedNetAndTarball(t)
	providerDir := filepath.Join(out, p.Hostname.ForDisplay(), p.Namespace, p.Type)
	moved := filepath.Join(t.TempDir(), "net")
	if err := os.Rename(providerDir, moved); err != nil {
		t.Fatal(err)
	}
	symlink(t, moved, providerDir)
	before := outsideFiles(t, moved)
	engine.SetPolicy(enginetest.DecodePolicy(t, denyNetAndTarball(p)))
	var reports []string
	sum, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(s string) { reports = append(reports, s) })
	t.Logf("export: %+v %v %q", sum, err, reports)
	if after := outsideFiles(t, moved); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("the withdrawal removed files outside the output directory, through a link: %q before, %q after", before, after)
	}
	if err == nil || !strings.Contains(err.Error(), providerDir+" is a symbolic link") {
		t.Errorf("the export does not stop at the link %s: %v", providerDir, err)
	}
}

// TestExportCountsNoLinkAsExported: an archive and an index.json each
// replaced by a link to a file outside the output directory with the same
// bytes are not counted as exported already nor signed as they are: the
// export writes each in its place, and leaves the files outside as they
// were.
func TestExportCountsNoLinkAsExported(t *testing.T) {
	engine, p, out, key := exportedNetAndTarball(t)
	dir := filepath.Join(out, p.Hostname.ForDisplay(), p.Namespace, p.Type)
	outsideDir := t.TempDir()
	var linked []string
	for _, name := range []string{addrs.ArchiveName(p.Type, "1.0.0", "linux_amd64"), "index.json"} {
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		outside := filepath.Join(outsideDir, name)
		if err := os.WriteFile(outside, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		symlink(t, outside, path)
		linked = append(linked, path)
	}
	sum, err := Export(context.Background(), engine, servedBy(t, engine, nil), nil, Selection{}, out, key, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Written != 1 || sum.Present != 0 {
		t.Errorf("export over a link to an outside copy of the archive: %+v, want it written, not present", sum)
	}
	for _, path := range linked {
		info, err := os.Lstat(path)
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm() != 0o644 {
			t.Errorf("%s in the export is %v (%v), want a regular file of mode 0644", path, info.Mode(), err)
		}
	}
	for _, f := range outsideFiles(t, outsideDir) {
		if fi, err := os.Stat(filepath.Join(outsideDir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("the file outside %s was changed: %v %v", f, fi.Mode(), err)
		}
	}
}

// TestOCILayoutWritesNothingThroughALinkInOut: the same for the OCI
// layout export: a repository whose directory is a link is not written
// to, and the link is named.
func TestOCILayoutWritesNothingThroughALinkInOut(t *testing.T) {
	engine, p := cachedNetAndTarball(t)
	side, names := ociLayoutParts(t, engine)
	out, elsewhere := filepath.Join(t.TempDir(), "layout"), t.TempDir()
	repo := filepath.Join(out, filepath.FromSlash(names.Provider(p)))
	symlink(t, elsewhere, repo)
	var reports []string
	sum, err := ExportOCILayout(context.Background(), engine, servedBy(t, engine, side), names, Selection{}, out, func(s string) { reports = append(reports, s) })
	t.Logf("export: %+v %v %q", sum, err, reports)
	if got := outsideFiles(t, elsewhere); len(got) > 0 {
		t.Errorf("the export wrote outside its directory, through a link in it: %q", got)
	}
	all := strings.Join(append(reports, errString(err)), "\n")
	if !strings.Contains(all, repo+" is a symbolic link") {
		t.Errorf("no report or error names the link %s: %q", repo, all)
	}
}
