package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// signingKeyName is the URL-signing key generated in the data directory
// when --url-signing-key-file is not given.
const signingKeyName = "url-signing.key"

// loadAuth sets up client authentication from --auth-tokens-file; nil
// when it is not given. The credentials it refuses are logged to log and
// counted in met (may be nil).
func loadAuth(cfg settings.Config, log *slog.Logger, met proxy.AuthMetrics) (*proxy.Auth, error) {
	files, err := readAuthFiles(cfg)
	if err != nil {
		return nil, err
	}
	return newAuth(cfg, files, log, met)
}

// authFiles are what client authentication reads of the operator's
// files: the tokens' hashes, and the --url-signing-key-file key (nil
// without one: the data directory's, newAuth).
type authFiles struct {
	hashes [][32]byte
	key    []byte
}

// readAuthFiles reads, and refuses as loadAuth does, the client tokens
// file and the URL-signing key file of cfg: nil when it names no tokens
// file. It touches nothing of the data directory, so that serve refuses
// them before it makes that.
func readAuthFiles(cfg settings.Config) (*authFiles, error) {
	if cfg.AuthTokensFile == "" {
		return nil, nil
	}
	hashes, err := readTokens(cfg.AuthTokensFile)
	if err != nil {
		return nil, err
	}
	files := &authFiles{hashes: hashes}
	if cfg.URLSigningKeyFile != "" {
		if files.key, err = readSigningKeyFile(cfg.URLSigningKeyFile); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// newAuth is loadAuth of the files readAuthFiles read (nil: no client
// authentication), the signing key the data directory's when they hold
// none (made there the first time).
func newAuth(cfg settings.Config, files *authFiles, log *slog.Logger, met proxy.AuthMetrics) (*proxy.Auth, error) {
	if files == nil {
		return nil, nil
	}
	key := files.key
	if key == nil {
		var err error
		if key, err = dataDirKey(filepath.Join(cfg.DataDir, signingKeyName), log); err != nil {
			return nil, err
		}
	}
	return proxy.NewAuth(proxy.AuthConfig{TokenHashes: files.hashes, SigningKey: key, URLTTL: cfg.SignedURLTTL, Logger: log, Metrics: met})
}

// readSigningKeyFile reads the --url-signing-key-file key as the
// operator's key files are read (internal/inputfile.ReadTrusted), and
// refuses one too short to sign with.
func readSigningKeyFile(path string) ([]byte, error) {
	key, err := inputfile.ReadTrusted(path, maxKeyFileBytes)
	if err != nil {
		return nil, fmt.Errorf("--url-signing-key-file: %w", err)
	}
	if len(key) < proxy.MinSigningKeyLen {
		return nil, fmt.Errorf("--url-signing-key-file %s: %d bytes, want at least %d (e.g. head -c 32 /dev/urandom > FILE)",
			path, len(key), proxy.MinSigningKeyLen)
	}
	return key, nil
}

// dataDirKey reads the URL-signing key at path, creating a random one
// (mode 0600) on first use so that signed URLs survive restarts. It is
// read as the operator's key files are (internal/inputfile.ReadTrusted):
// never waiting on what is no regular file, within maxDataDirKeyBytes,
// and refused when users other than its owner may write it (whoever may
// could sign archive URLs for any client), unless on a read-only mount.
// One this process's user owns, the key tfmirror wrote, is made its
// owner's only first (readOwnFile); one of another user is refused,
// naming the chmod to run. A new key is written whole or not at all
// (writeNew): a second process starting on the same data directory
// reads the first one's key, never an empty file the first has not
// written yet.
func dataDirKey(path string, log *slog.Logger) ([]byte, error) {
	removeNewLeftovers(path)
	key, err := readOwnFile(path, maxDataDirKeyBytes, log)
	if err == nil {
		if len(key) < proxy.MinSigningKeyLen {
			return nil, shortDataDirKey(path, len(key))
		}
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", dataDirKeyRefused, err)
	}
	key = make([]byte, 32)
	rand.Read(key)
	err = writeNew(path, func(w io.Writer) error { _, err := w.Write(key); return err })
	if errors.Is(err, fs.ErrExist) {
		return dataDirKey(path, log)
	}
	if err != nil {
		return nil, fmt.Errorf("URL-signing key: %w", err)
	}
	return key, nil
}

// dataDirKeyRefused begins the refusal of a URL-signing key generated in
// the data directory.
const dataDirKeyRefused = "URL-signing key generated in the data directory (no --url-signing-key-file)"

func shortDataDirKey(path string, n int) error {
	return fmt.Errorf("URL-signing key %s is %d bytes, want at least %d (delete it to generate a new one)", path, n, proxy.MinSigningKeyLen)
}

// checkDataDirKey judges the URL-signing key a start of cfg reads in its
// data directory (dataDirKey: with --auth-tokens-file and no
// --url-signing-key-file) as that start would, without writing: none
// there is taken, a start makes one; one there is refused when a start
// would refuse it (no regular file, past maxDataDirKeyBytes, shorter
// than proxy.MinSigningKeyLen, writable by users other than its owner
// when that owner is not this process's user, for whom a start makes it
// its owner's only). nil when cfg reads no such key.
func checkDataDirKey(cfg settings.Config) error {
	if cfg.AuthTokensFile == "" || cfg.URLSigningKeyFile != "" || cfg.DataDir == "" {
		return nil
	}
	path := filepath.Join(cfg.DataDir, signingKeyName)
	key, err := inputfile.ReadTrusted(path, maxDataDirKeyBytes)
	var we *inputfile.WritableError
	if errors.As(err, &we) {
		if info, serr := os.Stat(path); serr == nil && inputfile.OwnedBySelf(info) {
			key, err = inputfile.ReadOperator(path, maxDataDirKeyBytes)
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%s: %w", dataDirKeyRefused, err)
	case len(key) < proxy.MinSigningKeyLen:
		return shortDataDirKey(path, len(key))
	}
	return nil
}

// readTokens reads the client tokens file at path: through a link (a
// mounted Secret's), never waiting on what is no regular file (a FIFO put
// in its place would hold a reload, and the shutdown after it, for ever),
// within maxTokensFileBytes, and refused when users other than its owner
// may write it (internal/inputfile.ReadTrusted).
func readTokens(path string) ([][32]byte, error) {
	data, err := inputfile.ReadTrusted(path, maxTokensFileBytes)
	if err != nil {
		return nil, fmt.Errorf("--auth-tokens-file: %w", err)
	}
	hashes, err := proxy.ParseTokens(bytes.NewReader(data))
	var line *proxy.TokenLineError
	if errors.As(err, &line) {
		// file:line, as the configuration file's errors; the reason
		// never quotes the token.
		return nil, fmt.Errorf("--auth-tokens-file: %s:%d: %s", path, line.Line, line.Reason)
	}
	if err != nil {
		return nil, fmt.Errorf("--auth-tokens-file %s: %w", path, err)
	}
	return hashes, nil
}

// reloadTokens reads --auth-tokens-file again and returns how many tokens
// are in force. On any error the tokens in use stay in force.
func (m *server) reloadTokens() (int, error) {
	hashes, err := readTokens(m.cfg.AuthTokensFile)
	if err == nil {
		err = m.auth.SetTokens(hashes)
	}
	if err != nil {
		m.log.Error("reloading client tokens failed; the previous tokens stay in force", "error", err)
		if m.metrics != nil {
			m.metrics.TokensReload("refused")
		}
		return 0, err
	}
	m.log.Info("client tokens reloaded", "tokens", len(hashes))
	if m.metrics != nil {
		m.metrics.TokensReload("applied")
	}
	return len(hashes), nil
}
