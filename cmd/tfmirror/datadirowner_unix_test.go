//go:build unix

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// foreignUID is the owner the tests give a data directory: nobody, a
// user other than root that every system has.
const foreignUID = 65534

// needRoot skips a test of what a command does run as root: only root
// can give a directory to another user, and only root is refused.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("run as root: the refusal is root's, and only root can give a directory to another user")
	}
}

// treeState lists each entry under dir with its type, mode, owner, size
// and modification time: what a command that wrote nothing leaves as it
// was.
func treeState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		fmt.Fprintf(&b, "%s %v uid=%d size=%d mtime=%d\n", path, info.Mode(), st.Uid, info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// ownerDataDir makes a data directory owned by uid holding the cache of
// a tfmirror that opened it (as the mirror's user leaves it), and
// returns it.
func ownerDataDir(t *testing.T, uid int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	cfg, err := parseServeFlags([]string{"--data-dir", dir, "--offline"}, func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	dd, err := openDataDir(t.Context(), "sync", cfg, discardLogger(), overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if err := dd.close(t.Context()); err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRootRefusesAnotherUsersDataDir: each command that writes the data
// directory (import, export, cache prune and verify, policy explain of a
// version under a minimum release age, sync, export-key, serve), run as
// root on one another user owns (the mirror's user's, as an operator's
// sudo tfmirror import finds it), is refused before it writes anything
// there: every file of the directory is as it was, and the refusal names
// the directory, its owner and the command to run as that user. On a
// directory root owns the same command opens it and goes on.
func TestRootRefusesAnotherUsersDataDir(t *testing.T) {
	needRoot(t)
	owner, runAs := foreignOwner()
	origin := syncOrigin(t)
	manifest := syncManifest(t, tfRegistry, "")
	policyConf := filepath.Join(t.TempDir(), "tfmirror.hcl")
	if err := os.WriteFile(policyConf, []byte("policy {\n  minimum_release_age = \"3d\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()

	commands := []struct {
		name string
		// run runs the command on dir; went says, on a directory root
		// owns, what of its output shows it got past opening it.
		run  func(dir string) (code int, stderr string)
		went string
	}{
		{"import", func(dir string) (int, string) {
			return runCmd("import", "--data-dir", dir, "--allow-unsigned", out)
		}, "opened the data directory"},
		{"export", func(dir string) (int, string) {
			return runCmd("export", "--data-dir", dir, filepath.Join(t.TempDir(), "export"))
		}, "opened the data directory"},
		{"cache prune", func(dir string) (int, string) {
			return runCmd("cache", "prune", "--data-dir", dir, "--keep-versions", "1")
		}, ""},
		{"cache verify", func(dir string) (int, string) {
			return runCmd("cache", "verify", "--data-dir", dir)
		}, "opened the data directory"},
		{"policy explain", func(dir string) (int, string) {
			return runCmd("policy", "explain", "--config", policyConf, "--data-dir", dir, "registry.terraform.io/hashicorp/random", "3.6.0")
		}, "answered from the cache"},
		{"export-key", func(dir string) (int, string) {
			return runCmd("export-key", "--data-dir", dir)
		}, "made a new export key"},
		{"sync", func(dir string) (int, string) {
			_, stderr, code := syncInProcess(t, origin, dir, manifest)
			return code, stderr
		}, "opened the data directory"},
		{"serve", func(dir string) (int, string) {
			cfg, err := parseServeFlags([]string{"--data-dir", dir, "--offline"}, func(string) (string, bool) { return "", false }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			m, err := newServer(cfg, discardLogger(), overrides{environ: []string{}})
			if err != nil {
				return 1, "tfmirror: " + err.Error()
			}
			m.shutdown(t.Context())
			return 0, ""
		}, ""},
	}
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			dir := ownerDataDir(t, foreignUID)
			before := treeState(t, dir)
			code, stderr := c.run(dir)
			if code == 0 {
				t.Errorf("run as root on a data directory %s owns: exit 0, want a refusal; stderr:\n%s", owner, stderr)
			}
			for _, want := range []string{
				"data directory " + dir + " is owned by " + owner + " and this runs as root",
				"nothing was written",
				runAs(c.name),
			} {
				if !strings.Contains(stderr, want) {
					t.Errorf("the refusal does not say %q; stderr:\n%s", want, stderr)
				}
			}
			if after := treeState(t, dir); after != before {
				t.Errorf("the refused command changed the data directory:\nbefore:\n%safter:\n%s", before, after)
			}

			// The same directory made root's: no refusal.
			rootDir := ownerDataDir(t, 0)
			code, stderr = c.run(rootDir)
			if strings.Contains(stderr, "runs as root") {
				t.Errorf("refused on a data directory root owns: exit %d\n%s", code, stderr)
			}
			if c.went != "" && !strings.Contains(stderr, c.went) {
				t.Errorf("on a data directory root owns, stderr does not say %q: exit %d\n%s", c.went, code, stderr)
			}
			if c.went == "" && code != 0 {
				t.Errorf("on a data directory root owns: exit %d\n%s", code, stderr)
			}
		})
	}
}

// foreignOwner is how a refusal names foreignUID, and the command it
// says to run as that user.
func foreignOwner() (owner string, runAs func(command string) string) {
	if u, err := user.LookupId(fmt.Sprint(foreignUID)); err == nil {
		return fmt.Sprintf("%s (uid %d)", u.Username, foreignUID),
			func(command string) string { return "sudo -u " + u.Username + " tfmirror " + command + " ..." }
	}
	return fmt.Sprintf("uid %d", foreignUID), func(command string) string {
		return fmt.Sprintf("setpriv --reuid %d --regid %d --clear-groups tfmirror %s ...", foreignUID, foreignUID, command)
	}
}

// TestRootRefusesToMakeADataDirInAnotherUsersDir: run as root, a command
// whose data directory is not there yet, to be made inside a directory
// another user owns (the mirror's user's state directory, as
// /var/lib/tfmirror with the data directory /var/lib/tfmirror/data), is
// refused before it makes anything, naming both directories, the owner
// and what to run: made, the directory would be root's, and the mirror
// running as its user could not open it. Inside a directory root owns,
// it is made.
func TestRootRefusesToMakeADataDirInAnotherUsersDir(t *testing.T) {
	needRoot(t)
	owner, runAs := foreignOwner()
	home := filepath.Join(t.TempDir(), "tfmirror")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, foreignUID, foreignUID); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, "cache", "data")
	origin, manifest := syncOrigin(t), syncManifest(t, tfRegistry, "")
	_, stderr, code := syncInProcess(t, origin, dir, manifest)
	if code == 0 {
		t.Errorf("sync making its data directory in one %s owns: exit 0, want a refusal", owner)
	}
	for _, want := range []string{
		"data directory " + dir + " is not there yet, and " + home + ", where it would be made, is owned by " + owner + ", and this runs as root",
		"nothing was made", runAs("sync"), "mkdir -p " + dir,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the refusal does not say %q; stderr:\n%s", want, stderr)
		}
	}
	if _, err := os.Lstat(filepath.Join(home, "cache")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused command made %s: %v", filepath.Join(home, "cache"), err)
	}
	var oe *dataDirOwnerError
	if err := prepareDataDir(dir, "serve", discardLogger()); !errors.As(err, &oe) || oe.Parent != home {
		t.Errorf("serve making its data directory in one %s owns: %v, want refused naming %s", owner, err, home)
	}

	// Made first by root, as the refusal says: opened.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := syncInProcess(t, origin, dir, manifest); code != 0 {
		t.Errorf("sync on the data directory root made: exit %d\n%s", code, stderr)
	}
}

// runCmd runs tfmirror with args in this process and returns its exit
// status and standard error.
func runCmd(args ...string) (int, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stderr.String()
}

// TestRootOpensItsOwnAndNewDataDirs: run as root, a command makes a data
// directory that is not there yet, and opens one root owns, as before:
// only another user's is refused.
func TestRootOpensItsOwnAndNewDataDirs(t *testing.T) {
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "new", "data")
	if err := prepareDataDir(dir, "sync", discardLogger()); err != nil {
		t.Fatalf("a data directory not there yet: %v", err)
	}
	if err := prepareDataDir(dir, "sync", discardLogger()); err != nil {
		t.Fatalf("a data directory root owns: %v", err)
	}
	if err := os.Chown(dir, foreignUID, foreignUID); err != nil {
		t.Fatal(err)
	}
	var oe *dataDirOwnerError
	if err := prepareDataDir(dir, "sync", discardLogger()); err == nil || !errors.As(err, &oe) || oe.UID != foreignUID {
		t.Fatalf("a data directory uid %d owns: %v, want a *dataDirOwnerError naming it", foreignUID, err)
	}
}

// TestDataDirOwnerErrorNamesWhatToRun: the refusal names the command to
// run as the directory's owner: through sudo, as the user the system
// names; through setpriv, as a uid no user has (a systemd DynamicUser's
// while its service is stopped), which sudo would not take.
func TestDataDirOwnerErrorNamesWhatToRun(t *testing.T) {
	named := (&dataDirOwnerError{Dir: "/var/lib/tfmirror", UID: 998, Name: "tfmirror", Command: "import"}).Error()
	for _, want := range []string{"data directory /var/lib/tfmirror is owned by tfmirror (uid 998)", "sudo -u tfmirror tfmirror import ...", "chown -R root /var/lib/tfmirror"} {
		if !strings.Contains(named, want) {
			t.Errorf("the refusal for a user the system names does not say %q:\n%s", want, named)
		}
	}
	unnamed := (&dataDirOwnerError{Dir: "/var/lib/private/tfmirror", UID: 61875, Command: "cache prune"}).Error()
	for _, want := range []string{"is owned by uid 61875 and", "setpriv --reuid 61875 --regid 61875 --clear-groups tfmirror cache prune ...", "--user 61875"} {
		if !strings.Contains(unnamed, want) {
			t.Errorf("the refusal for a uid no user has does not say %q:\n%s", want, unnamed)
		}
	}
	if strings.Contains(unnamed, "sudo") {
		t.Errorf("the refusal for a uid no user has names sudo, which does not take it:\n%s", unnamed)
	}
}

// TestRootRefusedOnADynamicUsersStateDirSaysStartTheService: run as root on
// the state directory of a stopped systemd service with DynamicUser=yes
// (/var/lib/tfmirror, a link to private/tfmirror, which only root may
// enter), a command is refused saying to start the service and run it
// again through it, not to run it as the service's uid (setpriv), which
// cannot enter the directory.
func TestRootRefusedOnADynamicUsersStateDirSaysStartTheService(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	root := t.TempDir()
	private := filepath.Join(root, "private")
	state := emptyCacheIn(t, filepath.Join(private, "tfmirror")) // the service's, which ran
	if err := os.Chown(state, foreignUID, foreignUID); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "tfmirror")
	if err := os.Symlink("private/tfmirror", link); err != nil {
		t.Fatal(err)
	}
	saved := systemdPrivateDirs
	systemdPrivateDirs = []string{private + string(filepath.Separator)}
	defer func() { systemdPrivateDirs = saved }()
	for _, dir := range []string{link, state} {
		code, _, stderr := runCommand("cache", "verify", "--data-dir", dir)
		if code != 1 || !strings.Contains(stderr, "systemctl start") || !strings.Contains(stderr, "dynamic user") || strings.Contains(stderr, "setpriv") {
			t.Errorf("cache verify on %s: exit %d\n%s", dir, code, stderr)
		}
	}
	// Elsewhere, the uid's own command line, as before.
	other := emptyCacheIn(t, filepath.Join(root, "other"))
	if err := os.Chown(other, foreignUID, foreignUID); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCommand("cache", "verify", "--data-dir", other); code != 1 || strings.Contains(stderr, "systemctl start") {
		t.Errorf("cache verify on %s: exit %d\n%s", other, code, stderr)
	}
}

// TestHandToDataDirOwnerHandsOverOnlyTheDirectory: what root makes in
// another user's data directory for that user's serve to write into
// (a sync's module work) is handed over as the directory it opens. That
// user may write the data directory: a hard link to a file of root's, or
// a link to a directory of root's, put in the directory's place is
// refused, and the file or directory stays root's, where the hard link's
// file was chowned by name and became that user's.
func TestHandToDataDirOwnerHandsOverOnlyTheDirectory(t *testing.T) {
	needRoot(t)
	dataDir := t.TempDir()
	if err := os.Chown(dataDir, foreignUID, foreignUID); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	file := filepath.Join(outside, "roots-file")
	if err := os.WriteFile(file, []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(outside, "roots-dir")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	hardLink, link := filepath.Join(dataDir, "work-hard"), filepath.Join(dataDir, "work-link")
	if err := os.Link(file, hardLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	owner := func(path string) uint32 {
		t.Helper()
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return info.Sys().(*syscall.Stat_t).Uid
	}
	for _, p := range []string{hardLink, link} {
		if err := handToDataDirOwner(p, dataDir); err == nil {
			t.Errorf("handToDataDirOwner(%s): no error, want a file or link in the directory's place refused", p)
		}
	}
	if uid := owner(file); uid != 0 {
		t.Errorf("root's file, hard-linked where the directory was, is now uid %d's, want root's", uid)
	}
	if uid := owner(dir); uid != 0 {
		t.Errorf("root's directory, linked where the directory was, is now uid %d's, want root's", uid)
	}

	work := filepath.Join(dataDir, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := handToDataDirOwner(work, dataDir); err != nil {
		t.Fatal(err)
	}
	if uid := owner(work); uid != foreignUID {
		t.Errorf("the directory made is uid %d's, want the data directory owner's (%d)", uid, foreignUID)
	}
}
