package main

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
)

// A data directory left open to its group or all users (made by hand, or
// by an older release's umask) is the mirror's user's alone once the
// mirror opens it, as SECURITY.md says: anyone who can write it could
// replace its keys.
func TestDataDirOpenToOthersIsTightened(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no permission bits on Windows")
	}
	for _, mode := range []os.FileMode{0o777, 0o755, 0o770, 0o700} {
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		if err := prepareDataDir(dir, "serve", slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Fatalf("%04o: %v", mode, err)
		}
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("a data directory of mode %04o is %04o after opening, want 0700", mode, fi.Mode().Perm())
		}
		if said := strings.Contains(logs.String(), "now its owner's only"); said != (mode != 0o700) {
			t.Errorf("mode %04o: the log says %q", mode, logs.String())
		}
	}
}

// The two ways in, serve and openDataDir (every subcommand's), tighten
// the data directory; one that is missing is made 0700; a file where the
// directory should be is refused with its name.
func TestOpeningTightensTheDataDir(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no permission bits on Windows")
	}
	openers := []struct {
		name string
		open func(cfg settings.Config) error
	}{
		{"serve", func(cfg settings.Config) error {
			m, err := newServer(cfg, discardLogger(), overrides{environ: []string{}})
			if err == nil {
				m.shutdown(t.Context())
			}
			return err
		}},
		{"a subcommand", func(cfg settings.Config) error {
			d, err := openDataDir(t.Context(), "sync", cfg, discardLogger(), overrides{})
			if err == nil {
				d.close(t.Context())
			}
			return err
		}},
	}
	for _, o := range openers {
		cfg, err := parseServeFlags([]string{"--data-dir", filepath.Join(t.TempDir(), "data"), "--offline"}, func(string) (string, bool) { return "", false }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(cfg.DataDir, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := o.open(cfg); err != nil {
			t.Fatalf("%s: %v", o.name, err)
		}
		if fi, err := os.Stat(cfg.DataDir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: data directory after opening: %v, %v; want mode 0700", o.name, fi.Mode().Perm(), err)
		}

		file := filepath.Join(t.TempDir(), "data")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.DataDir = file
		if err := o.open(cfg); err == nil || !strings.Contains(err.Error(), file) {
			t.Fatalf("%s: a file as the data directory: %v, want an error naming it", o.name, err)
		}
	}
}

// longDataDir is a data directory whose admin socket path is longer than
// a unix socket's (108 bytes on Linux, 104 elsewhere), as a volume mounted
// deep in a kubelet's or CI runner's tree may be: serve cannot listen
// there ("admin socket unavailable"), and no process can.
func longDataDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), strings.Repeat("v", 60), strings.Repeat("w", 60), "data")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The subcommands that open the data directory themselves when no serve
// runs on it do so on one whose admin socket path is too long to be a
// socket's: nothing can listen there, so there is no serve to go through.
// They used to stop at the dial ("connect: invalid argument"), on every
// run, serve or no serve.
func TestSubcommandsOnADataDirTooDeepForASocket(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("unix socket paths")
	}
	dir := emptyCacheIn(t, longDataDir(t))
	for _, args := range [][]string{
		{"cache", "verify", "--data-dir", dir},
		{"cache", "prune", "--dry-run", "--data-dir", dir},
		{"export", "--data-dir", dir, filepath.Join(t.TempDir(), "out")},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Errorf("tfmirror %s: exit %d, want 0:\n%s%s", strings.Join(args[:2], " "), code, stdout.String(), stderr.String())
		} else if !strings.Contains(stderr.String(), "opened the data directory") {
			t.Errorf("tfmirror %s did not open the data directory itself:\n%s", strings.Join(args[:2], " "), stderr.String())
		}
	}
}

// tfmirror reload on a data directory too deep for a socket says so, and
// that a serve there reloads on SIGHUP: it said no tfmirror served the
// directory and to name the serving process's, which is this one.
func TestReloadOnADataDirTooDeepForASocket(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("unix socket paths")
	}
	dir := longDataDir(t)
	var stdout, stderr bytes.Buffer
	code := runReload([]string{"--data-dir", dir}, func(string) (string, bool) { return "", false }, &stdout, &stderr)
	if msg := stderr.String(); code != 1 || !strings.Contains(msg, "too long") || !strings.Contains(msg, "SIGHUP") {
		t.Errorf("tfmirror reload on %s: exit %d, want 1 saying the socket path is too long and to send SIGHUP:\n%s", dir, code, msg)
	}
}

// The subcommands that read a cache, cache verify and export, refuse a
// data directory that is not there (a wrong --data-dir, or the default
// ./tfmirror-data of another working directory), as policy explain does,
// rather than make an empty one and report on it: a check said "0
// failed" and an export wrote an empty signed bundle, both with exit
// status 0, of a cache that never was. So is a directory that holds no
// cache (a data directory's parent given for it): nothing is written in
// it, where a cache and an export key were made there.
func TestReadingCommandsRefuseAMissingDataDir(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	for _, dir := range []struct{ path, want string }{
		{filepath.Join(t.TempDir(), "no-such-data-dir"), "does not exist"},
		{t.TempDir(), "holds no cache"},
	} {
		for _, args := range [][]string{
			{"cache", "verify", "--data-dir", dir.path},
			{"export", "--data-dir", dir.path, out},
		} {
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), dir.want) {
				t.Errorf("tfmirror %s on %s: exit %d, want 1 saying it %s:\n%s%s", strings.Join(args[:2], " "), dir.path, code, dir.want, stdout.String(), stderr.String())
			}
			if entries, err := os.ReadDir(dir.path); err == nil && len(entries) > 0 || dir.want == "does not exist" && !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("tfmirror %s wrote the data directory %s: %v", strings.Join(args[:2], " "), dir.path, entries)
			}
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("tfmirror export of a missing data directory wrote OUT")
	}
}

// cache prune refuses a data directory that is not there, as the
// commands that read a cache do: a cron job's prune run in another
// working directory (the default ./tfmirror-data) or with a mistyped
// --data-dir made an empty cache there and reported "removed the
// packages of 0 versions" with exit status 0, while the real cache was
// never pruned.
//
// Nor does it make a cache in a directory that holds none.
func TestCachePruneRefusesAMissingDataDir(t *testing.T) {
	for _, args := range [][]string{{"--dry-run"}, {}, {"--keep-versions", "1"}} {
		missing := filepath.Join(t.TempDir(), "no-such-data-dir")
		stdout, stderr, code := pruneInProcess(t, missing, args...)
		if code != 1 || !strings.Contains(stderr, "data directory "+missing+" does not exist") || stdout != "" {
			t.Errorf("tfmirror cache prune %v on a missing data directory: exit %d, want 1 saying it does not exist, nothing on stdout:\n%s%s", args, code, stdout, stderr)
		}
		if _, err := os.Stat(missing); err == nil {
			t.Errorf("tfmirror cache prune %v made the missing data directory", args)
		}
		parent := t.TempDir()
		stdout, stderr, code = pruneInProcess(t, parent, args...)
		if code != 1 || !strings.Contains(stderr, "data directory "+parent+" holds no cache") || stdout != "" {
			t.Errorf("tfmirror cache prune %v on a directory without a cache: exit %d, want 1 saying it holds none, nothing on stdout:\n%s%s", args, code, stdout, stderr)
		}
		if entries, _ := os.ReadDir(parent); len(entries) > 0 {
			t.Errorf("tfmirror cache prune %v wrote in a directory without a cache: %v", args, entries)
		}
	}
}

// A data directory whose cache is a symbolic link (to a larger volume)
// holds a cache where the link leads; a link that leads nowhere (that
// volume not mounted) is said to be one, naming its target, and not
// taken for a data directory's parent given for it.
func TestDataDirCacheALink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links")
	}
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, cacheDir(dir)); err != nil {
		t.Fatal(err)
	}
	if err := existingDataDir(dir, "cache verify"); err != nil {
		t.Errorf("a cache linked to a directory: %v", err)
	}
	if err := os.Remove(target); err != nil {
		t.Fatal(err)
	}
	err := existingDataDir(dir, "cache verify")
	if err == nil || strings.Contains(err.Error(), "holds no cache") || !strings.Contains(err.Error(), target) {
		t.Errorf("a cache linked to nothing: %v, want it said to be a link to %s that leads nowhere", err, target)
	}
}
