//go:build unix

package inputfile

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ReadOperator reads a file up to its bound and refuses a longer one,
// naming it and the bound; it follows a link (a mounted Secret's), and
// refuses what is no regular file at once: a FIFO, whose open would wait,
// and a device, which never ends.
func TestReadOperator(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	mkfifo(t, fifo)

	for _, path := range []string{file, link} {
		data, err := ReadOperator(path, 10)
		if err != nil || string(data) != "0123456789" {
			t.Errorf("ReadOperator(%s, 10): %q, %v", path, data, err)
		}
	}
	_, err := ReadOperator(file, 9)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Path != file || tl.Max != 9 ||
		!strings.Contains(err.Error(), file+" is larger than 9 bytes") {
		t.Errorf("ReadOperator of 10 bytes bounded at 9: %v", err)
	}
	for path, want := range map[string]string{fifo: "is a FIFO", "/dev/zero": "is a device", dir: "is a directory"} {
		err := within(t, fifo, func() error { _, err := ReadOperator(path, 1<<20); return err })
		var ke *KindError
		if !errors.As(err, &ke) || !strings.Contains(err.Error(), path+" "+want+", not a regular file") {
			t.Errorf("ReadOperator(%s): %v, want %q", path, err, want)
		}
	}
	if _, err := ReadTrusted(fifo, 1<<20); !strings.Contains(errString(err), "is a FIFO") {
		t.Errorf("ReadTrusted of a FIFO: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// OpenTrusted and ReadTrusted refuse a file its group or all users may
// write, naming it, its mode and the chmod that makes it its owner's; a
// file others may only read is read, and so is one behind a link, whose
// own mode says nothing.
func TestOpenTrustedRefusesWhatOthersMayWrite(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []os.FileMode{0o600, 0o644, 0o444, 0o440, 0o755} {
		path := filepath.Join(dir, "ok-"+strconv.FormatUint(uint64(mode), 8))
		if err := os.WriteFile(path, []byte("key"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
		link := path + ".link"
		if err := os.Symlink(path, link); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{path, link} {
			if data, err := ReadTrusted(p, 3); err != nil || string(data) != "key" {
				t.Errorf("ReadTrusted(%s), mode %04o: %q, %v", p, mode, data, err)
			}
		}
	}
	for _, mode := range []os.FileMode{0o620, 0o602, 0o666, 0o777, 0o664} {
		path := filepath.Join(dir, "bad-"+strconv.FormatUint(uint64(mode), 8))
		if err := os.WriteFile(path, []byte("key"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		link := path + ".link"
		if err := os.Symlink(path, link); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{path, link} {
			f, _, err := OpenTrusted(p)
			if err == nil {
				f.Close()
			}
			var we *WritableError
			want := []string{p + " has mode " + "0" + strconv.FormatUint(uint64(mode), 8), "chmod go-w " + p}
			if !errors.As(err, &we) || !strings.Contains(err.Error(), want[0]) || !strings.Contains(err.Error(), want[1]) {
				t.Errorf("OpenTrusted(%s), mode %04o: %v, want %q", p, mode, err, want)
			}
			if _, err := ReadTrusted(p, 1<<20); !errors.As(err, &we) {
				t.Errorf("ReadTrusted(%s), mode %04o: %v", p, mode, err)
			}
			// Only the trusted files are refused for it.
			if _, err := ReadOperator(p, 1<<20); err != nil {
				t.Errorf("ReadOperator(%s), mode %04o: %v", p, mode, err)
			}
		}
	}
}

// OpenTrusted and ReadTrusted refuse a file owned by a user who is
// neither root nor the process's, whatever its mode (that user may write
// it, or chmod it), naming it, its owner and the chown to run, and the
// chmod too when its group or all users may also write it; one of the
// process's user is read (as every other test's files are). Giving a
// file to another user takes root.
func TestOpenTrustedRefusesAnotherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Log("not root: a file of another user is not tried")
		return
	}
	dir := t.TempDir()
	for _, mode := range []os.FileMode{0o600, 0o644, 0o444, 0o664} {
		path := filepath.Join(dir, "key-"+strconv.FormatUint(uint64(mode), 8))
		if err := os.WriteFile(path, []byte("key"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if data, err := ReadTrusted(path, 3); mode&0o022 == 0 && (err != nil || string(data) != "key") {
			t.Fatalf("ReadTrusted(%s), root's, mode %04o: %q, %v", path, mode, data, err)
		}
		if err := os.Chown(path, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		link := path + ".link"
		if err := os.Symlink(path, link); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{path, link} {
			f, _, err := OpenTrusted(p)
			if err == nil {
				f.Close()
			}
			var oe *OwnerError
			want := []string{p + " is owned by user 65534, neither root nor the user the mirror runs as (0)", "chown root " + p}
			if mode&0o022 != 0 {
				want = append(want, "chmod go-w "+p)
			}
			if !errors.As(err, &oe) || oe.UID != 65534 || oe.Path != p {
				t.Fatalf("OpenTrusted(%s), user 65534's, mode %04o: %v, want an *OwnerError", p, mode, err)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("OpenTrusted(%s), mode %04o: %v, want %q", p, mode, err, w)
				}
			}
			if mode&0o022 == 0 && strings.Contains(err.Error(), "chmod") {
				t.Errorf("OpenTrusted(%s), mode %04o: %v, a chmod that changes nothing", p, mode, err)
			}
			if _, err := ReadTrusted(p, 1<<20); !errors.As(err, &oe) {
				t.Errorf("ReadTrusted(%s), mode %04o: %v", p, mode, err)
			}
			// Only the trusted files are refused for it.
			if data, err := ReadOperator(p, 1<<20); err != nil || string(data) != "key" {
				t.Errorf("ReadOperator(%s), mode %04o: %q, %v", p, mode, data, err)
			}
		}
	}
}

// An OwnerError names the chown to the mirror's user beside the one to
// root when the mirror does not run as root, and the chmod only when
// others may also write the file. Judged as root (a config check run by
// root of a file the mirror's user owns), it says to run the command as
// the file's owner, whom a mirror running as that user reads it as.
func TestOwnerErrorSaysWhatToRun(t *testing.T) {
	for _, tc := range []struct {
		err        OwnerError
		want, none string
	}{
		{OwnerError{Path: "/etc/t", UID: 1000, Self: 65532, Mode: 0o600},
			"/etc/t is owned by user 1000, neither root nor the user the mirror runs as (65532): user 1000 may change what the mirror serves and trusts, so it is not read; make it root's or the mirror's user's: chown root /etc/t (or chown 65532 /etc/t)", "chmod"},
		{OwnerError{Path: "/etc/t", UID: 1000, Self: 0, Mode: 0o664},
			"chown root /etc/t, and writable by its owner only: chmod go-w /etc/t (it has mode 0664); this was judged as root: if the mirror runs as user 1000, run this command as that user", "chown 0"},
		{OwnerError{Path: "/etc/t", UID: 1000, Self: 65532, Mode: 0o600},
			"chown 65532 /etc/t)", "judged as root"},
	} {
		got := tc.err.Error()
		if !strings.Contains(got, tc.want) || strings.Contains(got, tc.none) {
			t.Errorf("%+v: %q, want %q and no %q", tc.err, got, tc.want, tc.none)
		}
	}
}
