package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/tfmirror/tfmirror/cache"
	"github.com/tfmirror/tfmirror/discovery"
	"github.com/tfmirror/tfmirror/metrics"
	pullthrough "github.com/tfmirror/tfmirror/mirror"
)

// openEngine opens the pull-through engine without any server, so that
// serve and subcommands that work on the cache share one wiring: config ->
// cache store (in DATA-DIR/cache) -> origin client -> engine. met, when
// not nil, receives the cache's, the origin client's and the engine's
// observations. The caller must call closeEngine, which shuts the engine
// down (work under way gets until ctx is done, then is cancelled) and then
// closes the cache, so that nothing writes to the cache once it is closed.
func openEngine(cfg serveConfig, logger *slog.Logger, o overrides, met *metrics.Metrics) (
	engine *pullthrough.Engine, store *cache.Store, closeEngine func(ctx context.Context) error, err error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, nil, nil, fmt.Errorf("data directory: %w", err)
	}
	copts := cache.Options{
		Dir:      filepath.Join(cfg.DataDir, "cache"),
		Logger:   logger,
		MaxBytes: cfg.CacheMaxBytes,
	}
	if met != nil {
		copts.OnEvict = func(cache.BlobInfo) { met.Evicted(1) }
	}
	opened, err := cache.Open(copts)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("opening cache: %w", err)
	}
	defer func() {
		if err != nil {
			opened.Close()
		}
	}()
	store = opened
	originCfg := discovery.Config{
		UserAgent:       "tfmirror/" + version,
		AllowPrivate:    cfg.AllowPrivateOrigins,
		RootCAs:         o.rootCAs,
		DialContext:     o.dialContext,
		DiscoveryTTL:    cfg.DiscoveryTTL,
		MaxArchiveBytes: cfg.MaxArchiveBytes,
		RequestTimeout:  cfg.OriginTimeout,
		// The flags say 0 for "none"; discovery.Config says negative.
		Retries:          disabledIfZero(cfg.OriginRetries),
		BreakerThreshold: disabledIfZero(cfg.BreakerThreshold),
		BreakerCooldown:  cfg.BreakerCooldown,
		Logger:           logger,
	}
	if met != nil {
		originCfg.Observer = met
	}
	if err := originNetwork(&originCfg, cfg, o, logger); err != nil {
		return nil, nil, nil, err
	}
	if o.origin != nil {
		o.origin(&originCfg)
	}
	client, err := discovery.New(originCfg)
	if err != nil {
		return nil, nil, nil, err
	}
	ecfg := pullthrough.Config{
		AllowedOrigins:  cfg.AllowedOrigins,
		Platforms:       cfg.Platforms,
		VersionsTTL:     cfg.VersionsTTL,
		MaxArchiveBytes: cfg.MaxArchiveBytes,
		Logger:          logger,
		Offline:         cfg.Offline,
	}
	if met != nil {
		ecfg.Metrics = met
	}
	engine, err = pullthrough.New(ecfg, client, store)
	if err != nil {
		return nil, nil, nil, err
	}
	closeEngine = func(ctx context.Context) error {
		serr := engine.Shutdown(ctx)
		if serr != nil {
			logger.Warn("archive downloads still running at the shutdown deadline were cancelled", "error", serr)
		}
		if err := store.Close(); err != nil {
			return fmt.Errorf("closing cache: %w", err)
		}
		if errors.Is(serr, context.DeadlineExceeded) || errors.Is(serr, context.Canceled) {
			return nil
		}
		return serr
	}
	return engine, store, closeEngine, nil
}
