package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
	"github.com/tfmirror/tfmirror/v2/internal/tlsroots"
	"github.com/tfmirror/tfmirror/v2/metrics"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/proxy"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// sharedTier is a sharedstore.Store as the engine's shared tier.
type sharedTier struct{ *sharedstore.Store }

func (t sharedTier) TryLease(ctx context.Context, sha string) (mirror.SharedLease, error) {
	l, err := t.Store.TryLease(ctx, sha)
	if l == nil {
		return nil, err
	}
	return l, err
}

// openShared opens the --shared-store, if any: nil without the flag. It
// does not contact the store, so that a store that is down delays no
// start. roots, when not nil, are the CAs its endpoint is trusted with
// (those of --origin-ca-file added to the system's), followed as they
// change, unless the SDK is given a CA bundle of its own (AWS_CA_BUNDLE),
// which is trusted beside those in force at start.
func openShared(ctx context.Context, cfg settings.Config, roots *tlsroots.Roots, logger *slog.Logger, met *metrics.Metrics) (*sharedstore.Store, error) {
	if cfg.SharedStore == "" {
		return nil, nil
	}
	scfg := sharedConfig(cfg)
	keys, err := sharedstore.LoadKeys(cfg.SharedKeyFile, cfg.SharedPrevKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", sharedKeyFlag(err), err)
	}
	scfg.Keys = keys
	scfg.RootCAs = roots
	scfg.Logger = logger
	if met != nil {
		scfg.Observer = met
	}
	return sharedstore.Open(ctx, scfg) // it logs the store's ID and the keys'

}

// checkSharedAWS returns the error openShared would fail with at start
// loading the AWS configuration of cfg's --shared-store (nil without
// one): the standard AWS sources of this process's environment
// (AWS_CONFIG_FILE, AWS_PROFILE, AWS_CA_BUNDLE, ...) as
// sharedstore.Open loads them, with the roots of --origin-ca-file when
// they read (when they do not, checkNamedFiles says why). It contacts no
// host; the error names no credential, only where the configuration went
// wrong, as a start's does.
func checkSharedAWS(cfg settings.Config) error {
	if _, err := sharedstore.ParseURL(cfg.SharedStore); cfg.SharedStore == "" || err != nil {
		return nil // none, or a URL the checks of the settings refuse
	}
	scfg := sharedConfig(cfg)
	roots, err := originRoots(cfg.OriginCAFile, nil, slog.New(slog.DiscardHandler))
	if err == nil && roots != nil {
		scfg.RootCAs = tlsroots.New(roots)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return sharedstore.CheckAWSConfig(ctx, scfg)
}

// sharedKeyFlag is the flag whose file err, an error of
// sharedstore.LoadKeys, is about: the previous key's when it says so.
func sharedKeyFlag(err error) string {
	if strings.HasPrefix(err.Error(), "shared store previous key:") {
		return "shared-store-previous-key-file"
	}
	return "shared-store-key-file"
}

// sharedConfig is the shared store's configuration from the flags.
func sharedConfig(cfg settings.Config) sharedstore.Config {
	return sharedstore.Config{
		URL:              cfg.SharedStore,
		StoreID:          cfg.SharedStoreID,
		LeaseTTL:         cfg.SharedLeaseTTL,
		CallTimeout:      cfg.SharedTimeout,
		MinSpeed:         disabledIfZero(cfg.SharedMinSpeed),
		BreakerThreshold: cfg.SharedBreakerThresh,
		BreakerCooldown:  cfg.SharedBreakerCool,
	}
}

// sharedStatus is what the status page shows of the shared store s,
// opened with cfg: where it is and its ID (--shared-store-id, or the
// default sharedstore.Open gives it); nil without one. The endpoint is
// shown without its userinfo and query, as any URL the mirror shows.
func sharedStatus(cfg settings.Config, s *sharedstore.Store) *proxy.StatusSharedStore {
	if s == nil {
		return nil
	}
	loc := s.Location()
	st := &proxy.StatusSharedStore{Location: loc.Name(),
		StoreID: cmp.Or(cfg.SharedStoreID, sharedstore.DefaultStoreID(loc))}
	if loc.Endpoint != "" {
		st.Endpoint = redact.Location(loc.Endpoint)
	}
	return st
}
