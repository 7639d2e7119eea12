package inputfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A file on a file system mounted read-only cannot be written whatever
// its mode (the kubelet mounts a Secret's or ConfigMap's volume so, and
// may give its files mode 0664), nor can its owner, whoever it is:
// OpenTrusted reads it. Mounting needs the privilege to; without it the
// test is skipped.
func TestOpenTrustedReadsFromReadOnlyMount(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tfmirror-test", dir, "tmpfs", 0, "size=64k,mode=0755"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	path := filepath.Join(dir, "key")
	if err := os.WriteFile(path, []byte("key"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	others := filepath.Join(dir, "others")
	if err := os.WriteFile(others, []byte("key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(others, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	var we *WritableError
	if _, err := ReadTrusted(path, 3); !errors.As(err, &we) {
		t.Fatalf("mounted for writing, mode 0666: %v, want it refused", err)
	}
	var oe *OwnerError
	if _, err := ReadTrusted(others, 3); !errors.As(err, &oe) {
		t.Fatalf("mounted for writing, user 65534's: %v, want it refused", err)
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only: %v", err)
	}
	if data, err := ReadTrusted(path, 3); err != nil || string(data) != "key" {
		t.Errorf("mounted read-only, mode 0666: %q, %v, want it read", data, err)
	}
	if data, err := ReadTrusted(others, 3); err != nil || string(data) != "key" {
		t.Errorf("mounted read-only, user 65534's: %q, %v, want it read", data, err)
	}
}
