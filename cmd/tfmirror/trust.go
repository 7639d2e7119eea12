package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/airgap"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
)

// This file wires the keys of exports and imports: the mirror's own
// export key, and the keys an import trusts, all from the operator's
// files and never from an import's input or an admin request.

// loadTrust reads the keys cfg's trust flags name.
func loadTrust(cfg settings.Config) (airgap.Trust, error) {
	var t airgap.Trust
	for _, file := range cfg.TrustedExportKeys {
		keys, err := readPublicKeysFile(file)
		if err != nil {
			return t, fmt.Errorf("--trusted-export-keys: %w", err)
		}
		t.ExportKeys = append(t.ExportKeys, keys...)
	}
	for _, entry := range cfg.TrustedPublisherKeys {
		ns, file, err := settings.ParsePublisherEntry(entry)
		if err != nil {
			return t, fmt.Errorf("--trusted-publisher-keys: %w", err)
		}
		keys, err := readPublicKeysFile(file)
		if err != nil {
			return t, fmt.Errorf("--trusted-publisher-keys %s: %w", ns, err)
		}
		if t.PublisherKeys == nil {
			t.PublisherKeys = map[airgap.Namespace]openpgp.EntityList{}
		}
		t.PublisherKeys[ns] = append(t.PublisherKeys[ns], keys...)
	}
	return t, nil
}

// readPublicKeysFile reads the public keys of the file at path: through a
// link (a mounted Secret's), never waiting on what is no regular file (a
// FIFO put in its place would hold a reload, and the shutdown after it,
// for ever), within maxKeyringBytes, and refused when users other than
// its owner may write it (internal/inputfile.ReadTrusted).
func readPublicKeysFile(path string) (openpgp.EntityList, error) {
	data, err := inputfile.ReadTrusted(path, maxKeyringBytes)
	if err != nil {
		return nil, err
	}
	keys, err := airgap.ReadPublicKeys(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return keys, nil
}

// trustNow is what imports trust now (admin.Options.TrustNow).
func (m *server) trustNow() airgap.Trust {
	if t := m.trust.Load(); t != nil {
		return *t
	}
	return airgap.Trust{}
}

// reloadTrust reads the files of the trust settings again and puts their
// keys in force for the next import; it returns how many keys are in
// force. On any error the keys in force stay.
func (m *server) reloadTrust() (int, error) {
	t, err := loadTrust(m.cfg)
	if err != nil {
		m.log.Error("reloading the keys imports trust failed; the keys in force stay", "error", err)
		if m.metrics != nil {
			m.metrics.TrustReload("refused")
		}
		return 0, err
	}
	m.trust.Store(&t)
	if m.metrics != nil {
		m.metrics.TrustReload("applied")
	}
	n := len(t.ExportKeys)
	for _, keys := range t.PublisherKeys {
		n += len(keys)
	}
	m.log.Info("keys imports trust reloaded", trustAttrs(t)...)
	return n, nil
}

// trustAttrs describes t for the log: the fingerprints of the export
// keys and the namespaces with pinned keys.
func trustAttrs(t airgap.Trust) []any {
	var exporters, namespaces []string
	for _, e := range t.ExportKeys {
		exporters = append(exporters, fmt.Sprintf("%X", e.PrimaryKey.Fingerprint))
	}
	for ns := range t.PublisherKeys {
		namespaces = append(namespaces, ns.String())
	}
	return []any{"trusted_export_keys", exporters, "trusted_publisher_namespaces", namespaces}
}

// exportKeySource returns what gives the key that signs cfg's exports:
// --export-key's, read at once so that a bad file fails at start; or the
// data directory's, read (or made) on first use.
func exportKeySource(cfg settings.Config, log *slog.Logger) (func() (*airgap.ExportKey, error), error) {
	if cfg.ExportKeyFile != "" {
		k, err := readExportKeyFile(cfg.ExportKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--export-key: %w", err)
		}
		return func() (*airgap.ExportKey, error) { return k, nil }, nil
	}
	var (
		mu  sync.Mutex
		key *airgap.ExportKey
	)
	return func() (*airgap.ExportKey, error) {
		mu.Lock()
		defer mu.Unlock()
		if key != nil {
			return key, nil
		}
		k, _, err := ensureDataDirKey(cfg.DataDir, log)
		if err != nil {
			return nil, err
		}
		key = k
		return k, nil
	}, nil
}

// readExportKeyFile reads the export key at path (--export-key's) as
// readPublicKeysFile reads public keys.
func readExportKeyFile(path string) (*airgap.ExportKey, error) {
	data, err := inputfile.ReadTrusted(path, maxKeyringBytes)
	if err != nil {
		return nil, err
	}
	return parseExportKey(path, data)
}

// parseExportKey is the export key data, read from path.
func parseExportKey(path string, data []byte) (*airgap.ExportKey, error) {
	k, err := airgap.ReadExportKey(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// ensureDataDirKey reads the export key of dataDir (readOwnFile: one
// its group may write is made its owner's only first, and logged to
// log), making it first (mode 0600) when there is none; created says it
// did. Two processes making it at once end up with one key: the file is
// linked into place only if absent (writeNew).
func ensureDataDirKey(dataDir string, log *slog.Logger) (key *airgap.ExportKey, created bool, err error) {
	path := filepath.Join(dataDir, settings.ExportKeyName)
	removeNewLeftovers(path)
	read := func() (*airgap.ExportKey, error) {
		data, err := readOwnFile(path, maxKeyringBytes, log)
		if err != nil {
			return nil, err
		}
		return parseExportKey(path, data)
	}
	k, err := read()
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return k, false, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, false, fmt.Errorf("data directory: %w", err)
	}
	name := "tfmirror export key"
	if h, err := os.Hostname(); err == nil && h != "" {
		name += " on " + h
	}
	k, err = airgap.GenerateExportKey(name)
	if err != nil {
		return nil, false, fmt.Errorf("making the export key: %w", err)
	}
	if err := writeNew(path, k.WritePrivate); err != nil {
		if errors.Is(err, os.ErrExist) {
			k, err := read()
			return k, false, err
		}
		return nil, false, fmt.Errorf("storing the export key: %w", err)
	}
	return k, true, nil
}

const exportKeyUsage = "tfmirror export-key [--data-dir DIR] [--export-key FILE]"

// runExportKey is `tfmirror export-key`: it prints the public key of the
// key that signs the data directory's exports (--export-key's, or the
// data directory's, made now if there is none yet; a data directory that
// does not exist is an error), to carry to the importing side out of
// band.
func runExportKey(args []string, stdout, stderr io.Writer) int {
	var own settings.Config // export-key, as serve takes it
	var ifs *flag.FlagSet
	cfg, rest, err := parseCacheCommandFlags("export-key", args, os.LookupEnv, usageOutput(args, stdout, stderr), exportKeyUsage, func(fs *flag.FlagSet) {
		ifs = fs
		settings.Add(fs, &own, "export-key")
	})
	if errors.Is(err, settings.ErrHelp) {
		return 0
	}
	if err == nil && len(rest) != 0 {
		err = fmt.Errorf("unexpected arguments: %q", rest)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror export-key: %v\nUsage: %s\n", err, exportKeyUsage)
		return 2
	}
	settings.TakeGiven(ifs, own, &cfg, "export-key")
	var k *airgap.ExportKey
	where := cfg.ExportKeyFile
	if where != "" {
		k, err = readExportKeyFile(where)
	} else if err = noDataDir(cfg.DataDir, "export-key prints the export key of an existing one, and makes it there when it has none yet: run tfmirror serve or sync on it first, or name the key with --export-key"); err == nil {
		// A serve on the data directory answers with the key it signs
		// its exports with (its own --export-key's, if it has one), read
		// as its user: root reads no file of another user's.
		if info, served, serr := exportKeyOfServe(cfg.DataDir); served {
			if serr != nil {
				fmt.Fprintf(stderr, "tfmirror export-key: %v\n", serr)
				return 1
			}
			fmt.Fprintf(stderr, "tfmirror export-key: key %s (%s, read by the running tfmirror)\n", info.Fingerprint, info.Where)
			if _, err := io.WriteString(stdout, info.PublicKey); err != nil {
				fmt.Fprintf(stderr, "tfmirror export-key: %v\n", err)
				return 1
			}
			return 0
		}
		// A data directory that is not there is a mistake (a mistyped
		// --data-dir): a key made in a new one would sign no export of
		// the mirror meant. Run as root, it makes no key in one another
		// user owns (a key root owns there the mirror could not read),
		// nor reads that user's key (which readOwnFile refuses to root).
		var fi os.FileInfo
		if fi, err = os.Stat(cfg.DataDir); err == nil {
			err = checkDataDirOwner(cfg.DataDir, fi, "export-key")
		}
		if err == nil {
			var created bool
			where = filepath.Join(cfg.DataDir, settings.ExportKeyName)
			k, created, err = ensureDataDirKey(cfg.DataDir, leveledLogger("text", slog.LevelInfo, stderr))
			if err == nil && created {
				fmt.Fprintf(stderr, "tfmirror export-key: made a new export key in %s\n", where)
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror export-key: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "tfmirror export-key: key %s (%s)\n", k.Fingerprint(), where)
	if err := k.WritePublic(stdout); err != nil {
		fmt.Fprintf(stderr, "tfmirror export-key: %v\n", err)
		return 1
	}
	return 0
}

// exportKeyOfServe asks the serve running on dataDir, if any, for the
// key that signs its exports. served is false when no serve runs there
// (nothing was asked); err is then nil.
func exportKeyOfServe(dataDir string) (info admin.ExportKeyInfo, served bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := admin.Dial(ctx, dataDir)
	if errors.Is(err, admin.ErrNoServer) {
		return info, false, nil
	}
	if err != nil {
		return info, true, err
	}
	defer c.Close()
	info, err = c.ExportKey(ctx)
	return info, true, err
}

// flagGiven reports whether flag name was given on fs's command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
