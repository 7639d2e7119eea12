package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
)

// dataDirOwnerError refuses a command run as root on a data directory
// another user owns (the mirror's user's, as the systemd unit and the
// image make it): whatever the command wrote there (the cache's files,
// a key, an import's scratch files) would be root's, 0600, and the
// mirror running as that user could neither read nor write it again.
type dataDirOwnerError struct {
	Dir string
	// UID is the directory's owner; Name is that user's name, "" when
	// the system does not know it (a systemd DynamicUser while its
	// service is stopped, a uid of a container's image).
	UID  int64
	Name string
	// Command is the subcommand refused ("import", "cache prune").
	Command string
	// Private says Dir is a systemd DynamicUser's state directory (its
	// real path under systemdPrivateDirs), which only root may enter:
	// no command run as its uid reaches it, only its service does.
	Private bool
	// Parent, when set, is the directory another user owns where Dir,
	// not there yet, would be made (checkNewDataDirOwner); UID and Name
	// are then its owner.
	Parent string
}

func (e *dataDirOwnerError) Error() string {
	// sudo runs a command as a user it can name; a uid no user has (a
	// container image's) is setpriv's, its group taken as the uid. A
	// systemd DynamicUser's state directory (Private) no command of its
	// uid reaches: its service is the way in.
	who := fmt.Sprintf("uid %d", e.UID)
	runAs := fmt.Sprintf("setpriv --reuid %d --regid %d --clear-groups tfmirror %s ...", e.UID, e.UID, e.Command)
	if e.Name != "" {
		who = fmt.Sprintf("%s (uid %d)", e.Name, e.UID)
		runAs = fmt.Sprintf("sudo -u %s tfmirror %s ...", e.Name, e.Command)
	}
	if e.Private && e.Parent == "" {
		return fmt.Sprintf("data directory %s is the state directory of a systemd service's dynamic user, %s, and this runs as root: what tfmirror %s would write there would be root's, which the service could not read or write, so nothing was written; start the service (systemctl start ...) and run the command again: it then goes through the service's admin socket, and the service does the work as its user (no command run as %s reaches the directory: systemd keeps it where only root may enter)",
			e.Dir, who, e.Command, who)
	}
	if e.Parent != "" {
		return fmt.Sprintf("data directory %s is not there yet, and %s, where it would be made, is owned by %s, and this runs as root: the directory made would be root's, which tfmirror running as %s could not read or write, so nothing was made; run it as that directory's owner (%s, or a container's --user %d), or, when root is to run the mirror, make the data directory first (mkdir -p %s)",
			e.Dir, e.Parent, who, who, runAs, e.UID, e.Dir)
	}
	return fmt.Sprintf("data directory %s is owned by %s and this runs as root: what tfmirror %s would write there would be root's, which tfmirror running as %s could not read or write, so nothing was written; run it as the directory's owner (%s, or a container's --user %d), or, when root is to run the mirror from now on, make the directory root's first (chown -R root %s)",
		e.Dir, who, e.Command, who, runAs, e.UID, e.Dir)
}

// checkDataDirOwner returns a *dataDirOwnerError when this process runs
// as root (effective uid 0) and info, the data directory dir as it was
// just looked at, is owned by another user; nil otherwise: a process of
// any other user writes files it owns itself, as the mirror does, and a
// data directory root owns (a container's, where root is the norm) is
// root's to write. command names the subcommand that would write it, for
// the message. Windows has no owners to compare, and nothing is checked
// there.
func checkDataDirOwner(dir string, info fs.FileInfo, command string) error {
	if !rootAmongOwners() {
		return nil
	}
	uid, ok := inputfile.Owner(info)
	if !ok || uid == 0 {
		return nil
	}
	e := &dataDirOwnerError{Dir: dir, UID: uid, Command: command}
	if u, err := user.LookupId(strconv.FormatInt(uid, 10)); err == nil {
		e.Name = u.Username
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		e.Private = slices.ContainsFunc(systemdPrivateDirs, func(p string) bool {
			return strings.HasPrefix(real+string(filepath.Separator), p)
		})
	}
	return e
}

// rootAmongOwners reports whether this process runs as root on a system
// whose files have owners: where what it writes in another user's data
// directory would be root's, and the checks and hand-overs below apply.
// Windows has no owners to compare.
func rootAmongOwners() bool { return runtime.GOOS != "windows" && os.Geteuid() == 0 }

// systemdPrivateDirs are where systemd keeps the state, cache and log
// directories of a DynamicUser's service (StateDirectory= and the
// others), each 0700 and root's, reached through a link of the
// directory's name (/var/lib/tfmirror, to private/tfmirror).
var systemdPrivateDirs = []string{"/var/lib/private/", "/var/cache/private/", "/var/log/private/"}

// handToDataDirOwner makes path, which this process has just made in the
// data directory dataDir for a serve to write into, the data directory
// owner's, when this process runs as root and another user owns it. Root
// works on such a data directory only through that user's serve (its
// admin socket: checkDataDirOwner refuses the rest), which does the work
// as that user: a directory of root's, 0700, it could not write. Nothing
// is changed otherwise, nor where files have no owner.
func handToDataDirOwner(path, dataDir string) error {
	if !rootAmongOwners() {
		return nil
	}
	info, err := os.Stat(dataDir)
	if err != nil {
		return err
	}
	uid, gid, ok := inputfile.OwnerIDs(info)
	if !ok || uid == 0 {
		return nil
	}
	// The directory opened is the one handed over, never a link or a
	// file put in its place: that user may write where path is (the data
	// directory, or a directory handed over before), and a hard link to
	// a file of root's put there, changed by name, would be theirs.
	d, err := inputfile.OpenDir(path)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Chown(int(uid), int(gid))
}

// checkNewDataDirOwner is checkDataDirOwner of a data directory dir not
// there yet: run as root, it refuses to make one in a directory another
// user owns (the nearest on the way that is there: the mirror's user's
// home or state directory), where it would be root's, as one that is
// there and another user's is refused. nil when dir is there or nothing
// on the way can be looked at: making it then finds what is wrong.
func checkNewDataDirOwner(dir, command string) error {
	if !rootAmongOwners() {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	if _, err := os.Lstat(abs); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return nil
			}
			var e *dataDirOwnerError
			if errors.As(checkDataDirOwner(p, fi, command), &e) {
				e.Dir, e.Parent = dir, p
				return e
			}
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(p) == p {
			return nil
		}
	}
}
