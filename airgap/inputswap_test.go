//go:build unix

package airgap

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// notBlocking runs read, which must not wait, and fails the test when it
// has not returned after a while; the FIFOs it may wait on are then
// opened for writing, so that it returns and the test ends.
func notBlocking[T any](t *testing.T, fifos []string, read func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- read() }()
	select {
	case v := <-done:
		return v
	case <-time.After(20 * time.Second):
		for _, fifo := range fifos {
			if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
		<-done
		t.Fatalf("the read blocked on a FIFO")
		panic("unreachable")
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
}

// A file or directory an import listed may be replaced before it is
// opened: by a FIFO, whose open would wait for a writer for ever, or by a
// link, which could lead out of the input. The archives the engine opens
// (openFile with bundle.open, made when the archive is listed and called later),
// the files read whole (bundle.readCapped) and the directories listed
// (bundle.readDir) refuse both, at once; and a directory above them made
// a link to a directory outside the input leads no read there.
func TestImportReadsRefuseSwappedFiles(t *testing.T) {
	in := t.TempDir()
	outside := filepath.Join(t.TempDir(), "export-key.asc")
	write(t, outside, "-----BEGIN PGP PRIVATE KEY BLOCK-----\n")
	elsewhere := t.TempDir()
	b := openBundle(in, ImportOptions{Shown: "in", MaxEntries: 100})
	defer b.close()

	tests := []struct {
		name string
		swap func(path string) // replaces the regular file or directory at path
		want string
	}{
		{"by a FIFO", func(path string) { os.RemoveAll(path); mkfifo(t, path) }, "is a FIFO"},
		{"by a link", func(path string) {
			os.RemoveAll(path)
			target := outside
			if strings.HasSuffix(path, "dir") {
				target = elsewhere
			}
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			zip := filepath.Join(in, strings.ReplaceAll(tc.name, " ", "-"), "terraform-provider-alpha_1.0.0_linux_amd64.zip")
			doc := filepath.Join(filepath.Dir(zip), "1.0.0.json")
			dir := filepath.Join(filepath.Dir(zip), "dir")
			write(t, zip, "PK")
			write(t, doc, "{}")
			write(t, filepath.Join(dir, "main.tf"), "# ok\n")
			fifos := []string{zip, doc, dir}

			open := openFile(b.open, zip) // as importVersion makes it, once the archive is listed
			tc.swap(zip)
			err := notBlocking(t, fifos, func() error {
				f, _, err := open(context.Background())
				if err == nil {
					f.Close()
				}
				return err
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("archive replaced %s: %v, want %q", tc.name, err, tc.want)
			}

			tc.swap(doc)
			err = notBlocking(t, fifos, func() error { _, err := b.readCapped(doc, 1<<20); return err })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("file read whole replaced %s: %v, want %q", tc.name, err, tc.want)
			}

			tc.swap(dir)
			err = notBlocking(t, fifos, func() error { _, err := b.readDir(dir); return err })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("directory replaced %s: %v, want %q", tc.name, err, tc.want)
			}
		})
	}

	// The provider's directory, checked to be one when it was listed, made
	// a link to a directory outside the input holding the same names.
	pdir := filepath.Join(in, "registry.terraform.io", "acme", "alpha")
	zip := filepath.Join(pdir, "terraform-provider-alpha_1.0.0_linux_amd64.zip")
	write(t, zip, "PK")
	write(t, filepath.Join(pdir, "1.0.0.json"), "{}")
	open := openFile(b.open, zip)
	victim := t.TempDir()
	write(t, filepath.Join(victim, filepath.Base(zip)), "outside the input")
	write(t, filepath.Join(victim, "1.0.0.json"), "outside the input")
	if err := os.RemoveAll(pdir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, pdir); err != nil {
		t.Fatal(err)
	}
	if f, _, err := open(context.Background()); err == nil {
		f.Close()
		t.Error("an archive opened through a directory made a link out of the input")
	}
	if data, err := b.readCapped(filepath.Join(pdir, "1.0.0.json"), 1<<20); err == nil {
		t.Errorf("read %q through a directory made a link out of the input", data)
	}
	if entries, err := b.readDir(pdir); err == nil {
		t.Errorf("listed %d entries of a directory out of the input", len(entries))
	}
}

// FIFOs in a directory import, where an archive, a provider's directory
// or a local module's file would be, are refused by name; the import
// finishes, and takes what else the directory holds.
func TestImportDirectoryWithFIFOs(t *testing.T) {
	in := t.TempDir()
	fifos := []string{
		filepath.Join(in, "registry.terraform.io", "acme", "alpha", "terraform-provider-alpha_1.0.0_linux_amd64.zip"),
		filepath.Join(in, "registry.terraform.io", "acme", "beta"),
		filepath.Join(in, modulesDir, "tf.corp.example", "platform", "piped", "aws", "1.0.0", "pipe.tf"),
	}
	write(t, filepath.Join(in, modulesDir, "tf.corp.example", "platform", "piped", "aws", "1.0.0", "main.tf"), "# ok\n")
	write(t, filepath.Join(in, modulesDir, "tf.corp.example", "platform", "network", "aws", "1.2.0", "main.tf"), "# ok\n")
	for _, fifo := range fifos {
		mkfifo(t, fifo)
	}
	engine := newEngine(t, enginetest.StartOrigin(t, fakeorigin.Options{}))
	type result struct {
		sum     ImportSummary
		reports []string
		err     error
	}
	res := notBlocking(t, fifos, func() result {
		var r result
		r.sum, r.err = Import(context.Background(), engine, in, ImportOptions{AllowUnsigned: true, ScratchDir: t.TempDir()},
			func(s string) { r.reports = append(r.reports, s) })
		return r
	})
	if res.err != nil {
		t.Fatalf("import: %v", res.err)
	}
	t.Logf("%+v %q", res.sum, res.reports)
	if res.sum.Modules != 1 {
		t.Errorf("imported %d modules, want the one without a FIFO", res.sum.Modules)
	}
	all := strings.Join(res.reports, "\n")
	for _, want := range []string{
		"terraform-provider-alpha_1.0.0_linux_amd64.zip is a FIFO; an import reads regular files only",
		"pipe.tf",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no report says %q:\n%s", want, all)
		}
	}
}
