package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/releases"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// notChecked is what config check cannot know without serving, as its
// output says.
const notChecked = "not checked (tfmirror serve finds these when it starts): whether listen and metrics_listen can be bound, " +
	"whether the data directory can be made and written, what serve makes in it (the TLS certificate when tls_cert is not set, the export key, the URL-signing key when none is there yet), " +
	"pins_dir, the origins, and whether the shared store's bucket answers to its credentials"

// checkNamedFiles reads the files cfg names with the functions serve
// reads them with at start (never waiting on a FIFO, within bounds, a
// secret or a key refused when users other than its owner may write
// it), parses what they hold (certificates, keys, tokens, credentials),
// judges the data directory as a start would make it (checkDataDir) and
// the URL-signing key a start would read in it (checkDataDirKey),
// and loads the AWS configuration of a --shared-store as a start does
// (checkSharedAWS, from this process's environment). Every error names
// its setting by its flag, for settings.Check to place it at the file's
// line; all of them are returned, joined.
func checkNamedFiles(cfg settings.Config, lookupEnv func(string) (string, bool)) error {
	var errs []error
	add := func(flag string, err error) {
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "--"+flag) {
			err = fmt.Errorf("--%s: %w", flag, err)
		}
		errs = append(errs, err)
	}
	if cfg.DataDir != "" {
		add("data-dir", checkDataDir(cfg.DataDir))
	}
	if cfg.TLSCert != "" && cfg.TLSKey != "" {
		if _, err := loadKeyPair(cfg.TLSCert, cfg.TLSKey); err != nil {
			flag := "tls-cert"
			switch {
			case strings.HasPrefix(err.Error(), "loading TLS certificate's key:"):
				flag = "tls-key"
			case !strings.HasPrefix(err.Error(), "loading TLS certificate:"):
				flag = "tls-cert, --tls-key"
			}
			add(flag, err)
			if flag == "tls-cert" {
				// The key was not read: judge it alone, so that its
				// refusal is reported with the certificate's.
				_, err := inputfile.ReadTrusted(cfg.TLSKey, maxKeyFileBytes)
				add("tls-key", err)
			}
		}
	}
	if cfg.AuthTokensFile != "" {
		_, err := readTokens(cfg.AuthTokensFile)
		add("auth-tokens-file", err)
	}
	if cfg.URLSigningKeyFile != "" {
		_, err := readSigningKeyFile(cfg.URLSigningKeyFile)
		add("url-signing-key-file", err)
	}
	add("data-dir", checkDataDirKey(cfg))
	// One file at a time, so that every one refused is reported.
	for _, f := range cfg.TrustedExportKeys {
		_, err := loadTrust(settings.Config{TrustedExportKeys: []string{f}})
		add("trusted-export-keys", err)
	}
	for _, entry := range cfg.TrustedPublisherKeys {
		_, err := loadTrust(settings.Config{TrustedPublisherKeys: []string{entry}})
		add("trusted-publisher-keys", err)
	}
	if cfg.ExportKeyFile != "" {
		_, err := readExportKeyFile(cfg.ExportKeyFile)
		add("export-key", err)
	}
	if cfg.SharedStore != "" && cfg.SharedKeyFile != "" {
		if _, err := sharedstore.LoadKeys(cfg.SharedKeyFile, cfg.SharedPrevKeyFile); err != nil {
			flag := sharedKeyFlag(err)
			add(flag, err)
			if flag == "shared-store-key-file" && cfg.SharedPrevKeyFile != "" {
				// The previous key was not judged: judge it alone.
				_, err := sharedstore.LoadKeys(cfg.SharedPrevKeyFile, "")
				add("shared-store-previous-key-file", err)
			}
		}
	}
	// The AWS configuration a start loads for the shared store, from
	// the files and variables of this environment: one a start refuses
	// (an AWS_CA_BUNDLE that is not there, a config file that does not
	// parse, an AWS_PROFILE it lacks) is refused here.
	if err := checkSharedAWS(cfg); err != nil {
		add("shared-store", fmt.Errorf("the AWS configuration a start loads for it, from this environment (AWS_CONFIG_FILE, AWS_PROFILE, AWS_CA_BUNDLE and the like), is refused: %w", err))
	}
	// The publisher keys, read and then judged as the CLI releases side
	// judges them at start (releases.CheckKeys, as releases.New).
	for _, k := range []struct{ flag, path string }{
		{"releases-hashicorp-keys", cfg.ReleasesHashiCorpKeys},
		{"releases-opentofu-keys", cfg.ReleasesOpenTofuKeys},
	} {
		keys, err := readArmoredKeys(k.path)
		if err == nil && len(keys) > 0 {
			if err = releases.CheckKeys(keys); err != nil {
				err = fmt.Errorf("%s: %w", k.path, err)
			}
		}
		add(k.flag, err)
	}
	if cfg.CredentialsFile != "" {
		_, err := discovery.LoadCredentials(cfg.CredentialsFile, nil)
		add("credentials-file", err)
	}
	for _, f := range cfg.OriginCAFile {
		_, err := originRoots([]string{f}, x509.NewCertPool(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		add("origin-ca-file", err)
	}
	if cfg.ModuleSourceCredentials != "" {
		_, err := loadModuleSourceCredentials(cfg.ModuleSourceCredentials, cfg.AllowedOrigins, lookupEnv)
		add("module-source-credentials", err)
	}
	return errors.Join(errs...)
}

// isHelp says whether arg asks a command group for its usage.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}
