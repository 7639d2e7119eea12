package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/dirsync"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
)

// engineOps are the admin operations subcommands run on a data
// directory's engine. *admin.API (the engine opened by this process) and
// *admin.Client (the engine of the tfmirror serving the directory, through
// its admin socket) implement them.
type engineOps interface {
	Versions(ctx context.Context, p addrs.Provider) ([]admin.Version, error)
	Package(ctx context.Context, p addrs.Provider, version string, platforms []string) ([]admin.Archive, error)
	Ensure(ctx context.Context, p addrs.Provider, version, platform string) (admin.Ensured, error)
	Export(ctx context.Context, req admin.ExportRequest) (admin.Exported, error)
	Import(ctx context.Context, req admin.ImportRequest) (admin.Imported, error)
	Prune(ctx context.Context, req admin.PruneRequest) (admin.Pruned, error)
	Verify(ctx context.Context, req admin.VerifyRequest) (admin.Verified, error)
	// Held is what the package policy in force holds back of a provider
	// or module (the versions its lists left out, and the address itself
	// with Version "").
	Held(ctx context.Context, req admin.PolicyRequest) ([]unsigned.Version, error)
	// Release is what the cache knows of a version's release.
	Release(ctx context.Context, req admin.PolicyRequest) (admin.KnownRelease, error)
	moduleOps
	cliOps
}

// dataDir is a data directory's engine as a subcommand reaches it.
type dataDir struct {
	ops engineOps
	// viaServer says ops go to a running tfmirror serve.
	viaServer bool
	// parts is the engine this process opened; nil via a server.
	parts *engineParts
	// logger is the command's, for the engine this process opened.
	logger *slog.Logger
	close  func(ctx context.Context) error
}

// where says how the subcommand reaches the data directory.
func (dd *dataDir) where() string {
	if dd.viaServer {
		return "working through the running tfmirror's admin socket"
	}
	return "opened the data directory"
}

// prepareDataDir makes the data directory dir (mode 0700) when it is
// missing, and takes from one that exists the bits that let its group or
// all users in: whoever can write it can replace its keys and its cache,
// so it is the mirror's user's alone. A directory the mirror's user does
// not own (a volume mounted for it, as Kubernetes mounts one with
// fsGroup) cannot be changed; it keeps its mode, and when all users may
// write it a warning says so and what to do. Windows has no such bits.
// Run as root, it refuses a data directory another user owns before it
// changes anything there (checkDataDirOwner), and to make one in a
// directory another user owns (checkNewDataDirOwner): command, the
// subcommand, is named in the refusal. A serve calls it before it makes its
// certificate there, and openDataDir before a subcommand opens the
// engine: once per process.
func prepareDataDir(dir, command string, logger *slog.Logger) error {
	if err := checkNewDataDirOwner(dir, command); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("data directory: %s is not a directory", dir)
	}
	if err := checkDataDirOwner(dir, fi, command); err != nil {
		return err
	}
	perm := fi.Mode().Perm()
	if runtime.GOOS == "windows" || perm&0o077 == 0 {
		return nil
	}
	if err := os.Chmod(dir, perm&^0o077); err == nil {
		logger.Info("the data directory was open to other users; it is now its owner's only",
			"data_dir", dir, "mode", fmt.Sprintf("%04o", perm), "now", fmt.Sprintf("%04o", perm&^0o077))
		return nil
	} else if perm&0o002 != 0 {
		logger.Warn("all users may write the data directory, and it is not this user's to change: they may replace the mirror's keys and cache; make it the mirror's user's (chown), or point data_dir at a directory inside it",
			"data_dir", dir, "mode", fmt.Sprintf("%04o", perm), "error", err)
	}
	return nil
}

// checkDataDir returns the error prepareDataDir would fail with at start
// for what is at dir: a file that is no directory there, or on the way
// to it where dir is still to be made (which no directory can be made
// under). It makes nothing and reads no file (a FIFO there is looked at,
// never opened); whether the directory can be made and written where
// nothing is in the way is for a start to find.
func checkDataDir(dir string) error {
	for p := dir; ; {
		fi, err := os.Stat(p)
		switch {
		case err == nil && fi.IsDir():
			return nil
		case err == nil && p == dir:
			return fmt.Errorf("data directory: %s is not a directory", dir)
		case err == nil:
			return fmt.Errorf("data directory: %s cannot be made: %s is not a directory", dir, p)
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return nil // not this process's to look at: a start's to find
		}
		parent := filepath.Dir(p)
		if parent == p {
			return nil
		}
		p = parent
	}
}

// readOwnFile reads a file tfmirror writes in its data directory (a key
// it generated) as the operator's files of trust are read
// (internal/inputfile.ReadTrusted), except that one its group or all
// users may write that this process's user owns is first made its
// owner's only, through the descriptor it was checked on, and logged, as
// prepareDataDir does with the directory: a kubelet that mounts the data
// volume with fsGroup (fsGroupChangePolicy Always) gives every file group
// write at each mount, and a start refused for it would be refused at
// every start. One another user owns (neither root nor this process's
// user) stays refused, whatever its mode, naming the chown to run
// (*inputfile.OwnerError), and is left as it is.
func readOwnFile(path string, max int64, log *slog.Logger) ([]byte, error) {
	data, err := inputfile.ReadTrusted(path, max)
	var we *inputfile.WritableError
	if !errors.As(err, &we) || !makeOwnOnly(path, log) {
		return data, err
	}
	return inputfile.ReadTrusted(path, max)
}

// makeOwnOnly takes the write bits of its group and of all users from
// the file at path when this process's user owns it (readOwnFile), and
// logs it; it says whether it did. A file missing, another user's, or
// writable by its owner only is left as it is.
func makeOwnOnly(path string, log *slog.Logger) bool {
	f, info, err := inputfile.OpenOperator(path)
	if err != nil {
		return false
	}
	defer f.Close()
	perm := info.Mode().Perm()
	if perm&0o022 == 0 || !inputfile.OwnedBySelf(info) || f.Chmod(perm&^0o022) != nil {
		return false
	}
	log.Info("a file of the data directory was writable by other users; it is now its owner's only",
		"path", path, "mode", fmt.Sprintf("%04o", perm), "now", fmt.Sprintf("%04o", perm&^0o022))
	return true
}

// writeNew writes a new file at path (mode 0600) whole or not at all:
// write fills a file of its own in path's directory, synced, then linked
// to path, which fails with fs.ErrExist when a file is there already (of
// two processes making it at once, the second reads the first's). The
// directory is synced once the link is made: a key it wrote, handed out
// (an export key's public half carried across the air gap), is not lost
// to a power loss and made anew at the next start.
func writeNew(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), newPattern(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(0o600)
	if err == nil {
		err = write(tmp)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// newPattern is the pattern of the names of writeNew's own files for path.
func newPattern(path string) string { return "." + filepath.Base(path) + ".new-*" }

// newLeftoverAge is the age from which removeNewLeftovers takes a file of
// writeNew's own for one a killed process left: writing one takes
// milliseconds, and another process may be writing the same key now.
const newLeftoverAge = time.Minute

// removeNewLeftovers removes the files of writeNew's own for path that a
// process killed while it wrote left beside it (a private key in them),
// once newLeftoverAge old; what it cannot remove stays. Each start calls
// it for the keys of the data directory, made then or read.
func removeNewLeftovers(path string) {
	names, _ := filepath.Glob(filepath.Join(filepath.Dir(path), newPattern(path)))
	for _, name := range names {
		if info, err := os.Lstat(name); err == nil && info.Mode().IsRegular() && time.Since(info.ModTime()) >= newLeftoverAge {
			os.Remove(name)
		}
	}
}

// syncDir makes the names in the directory dir durable; a var, for tests.
var syncDir = dirsync.Sync

// existingDataDir says why dir is no data directory for command, which
// reads a cache and never makes one (policy explain, cache verify,
// export): a data directory that is not there is a mistake (a wrong
// --data-dir, the default of another working directory), not an empty
// cache, and so is a directory that holds no cache (noCacheIn). nil when
// dir holds a cache.
func existingDataDir(dir, command string) error {
	return noCacheIn(dir, command+" reads the cache of an existing one, it never makes one")
}

// noCacheIn is noDataDir, and says too why a directory that holds no
// cache (a data directory's parent given for it, /var/lib for
// /var/lib/tfmirror) is none: opening the cache would make one in it.
func noCacheIn(dir, needs string) error {
	if err := noDataDir(dir, needs); err != nil {
		return err
	}
	if _, err := os.Stat(cacheDir(dir)); errors.Is(err, fs.ErrNotExist) {
		// A cache that is a link leading nowhere (the volume it is on
		// not mounted) is no parent given for the data directory.
		if target, lerr := os.Readlink(cacheDir(dir)); lerr == nil {
			return fmt.Errorf("data directory %s: its cache %s is a symbolic link to %s, which is not there (a volume not mounted?): %s", dir, cacheDir(dir), target, needs)
		}
		return fmt.Errorf("data directory %s holds no cache: %s (--data-dir, TFMIRROR_DATA_DIR, data_dir)", dir, needs)
	}
	return nil
}

// cacheDir is where the data directory dataDir holds the cache.
func cacheDir(dataDir string) string { return filepath.Join(dataDir, "cache") }

// noDataDir says why dir is no data directory, then what the command
// does with one (needs); nil when dir is a directory.
func noDataDir(dir, needs string) error {
	fi, err := os.Stat(dir)
	if err == nil && fi.IsDir() {
		return nil
	}
	why := "is not a directory"
	if errors.Is(err, fs.ErrNotExist) {
		why = "does not exist"
	} else if err != nil {
		why = "cannot be read: " + err.Error()
	}
	return fmt.Errorf("data directory %s %s: %s (--data-dir, TFMIRROR_DATA_DIR, data_dir)", dir, why, needs)
}

// openDataDir is the one place subcommands get at a data directory: when
// a tfmirror serve runs on it (its admin socket answers), through that
// process, since Badger lets one process open the cache; otherwise by
// opening the engine here. A socket file left by a killed process does
// not answer and is ignored. Run as root, it opens no data directory
// another user owns (prepareDataDir); one a serve runs on is reached
// through that serve all the same, which writes as its own user.
// command is the subcommand, for the messages. The caller must call
// close.
func openDataDir(ctx context.Context, command string, cfg settings.Config, logger *slog.Logger, o overrides) (*dataDir, error) {
	remote := func(c *admin.Client) *dataDir {
		logger.Debug("a tfmirror serves this data directory; working through its admin socket", "data_dir", cfg.DataDir)
		return &dataDir{ops: c, viaServer: true, close: func(context.Context) error { c.Close(); return nil }}
	}
	c, err := admin.Dial(ctx, cfg.DataDir)
	if err == nil {
		return remote(c), nil
	}
	if !errors.Is(err, admin.ErrNoServer) {
		return nil, err
	}
	if err := prepareDataDir(cfg.DataDir, command, logger); err != nil {
		return nil, err
	}
	// The rules are applied in the background by serve alone (its
	// --retention-interval): a command applies them only when it prunes,
	// so that a dry run removes nothing.
	cfg.RetentionInterval = 0
	parts, err := openEngine(cfg, logger, o, nil, nil)
	if err != nil {
		// A serve may have started since we looked.
		if c, derr := admin.Dial(ctx, cfg.DataDir); derr == nil {
			return remote(c), nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, err // not held by another process
		}
		return nil, fmt.Errorf("%w (if a tfmirror runs on this data directory, it has no admin socket %s)", err, admin.SocketPath(cfg.DataDir))
	}
	opts, err := adminOptions(cfg, logger)
	if err == nil {
		opts.OCILayout, err = ociLayoutOption(cfg, parts)
	}
	if err != nil {
		parts.shutdown(ctx)
		return nil, err
	}
	pkgs, err := parts.packages()
	if err != nil {
		parts.shutdown(ctx)
		return nil, err
	}
	api, err := admin.New(parts.engine, pkgs, parts.retention, logger, nil, parts.adminOptionsOf(opts))
	if err != nil {
		parts.shutdown(ctx)
		return nil, err
	}
	return &dataDir{ops: api, parts: parts, logger: logger, close: parts.shutdown}, nil
}

// adminOptions are the admin API's options for cfg: an import unpacks a
// tar file into the data directory, where the space is, and trusts the
// keys cfg names; an export is signed by cfg's export key.
func adminOptions(cfg settings.Config, log *slog.Logger) (admin.Options, error) {
	trust, err := loadTrust(cfg)
	if err != nil {
		return admin.Options{}, err
	}
	key, err := exportKeySource(cfg, log)
	if err != nil {
		return admin.Options{}, err
	}
	where := cfg.ExportKeyFile
	if where == "" {
		where = filepath.Join(cfg.DataDir, settings.ExportKeyName)
	}
	return admin.Options{ScratchDir: cfg.DataDir, MaxFileBytes: cfg.MaxArchiveBytes, ExportKey: key, ExportKeyFile: where, Trust: trust}, nil
}

// closeDataDir closes dd for the subcommand name, saying what failed.
func closeDataDir(dd *dataDir, name string, stderr io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dd.close(ctx); err != nil {
		fmt.Fprintf(stderr, "tfmirror %s: %v\n", name, err)
	}
}
