// Package cachecheck checks the whole cache again, when asked and on a
// schedule, from what the cache holds alone, for an operator who wants to
// know that what it serves is still what it verified when it kept it:
// disks and copies of data directories can damage bytes that nothing
// reads for months.
//
// What it checks is what the cache serves: provider packages (and the
// withheld imports set aside), module packages, and module versions'
// zips, the layers of their OCI artifacts (the OCI door's other blobs are
// the provider packages; its documents are checked against their digest
// each time they are read back). It reads the engine's records (package
// mirror/records) and blobs and reports; it removes nothing (a version
// that can be fetched again is removed by a prune naming it), asks no
// origin, and checks a provider package's signed evidence through the
// engine (Config.VerifyCached).
package cachecheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/safetree"
	"github.com/tfmirror/tfmirror/v2/internal/workgroup"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// What a cached package was checked against (CachedCheck.By).
const (
	// CheckedEvidence: the stored SHA256SUMS document and its signature
	// with the stored keys, the archive's sha256 against its line, and
	// the h1: hash recorded when it was cached.
	CheckedEvidence = "evidence"
	// CheckedSHA256: the sha256 recorded when it was cached, for packages
	// kept without evidence (unsigned imports, module packages, records of
	// releases before evidence).
	CheckedSHA256 = "sha256"
)

// The kinds of what is checked (Result.Kind).
const (
	KindProvider = "provider"
	KindModule   = "module"
	// KindModuleZip is a module version's zip, the one layer of its OCI
	// artifact (records.ModuleZipRecord), made of its module package.
	KindModuleZip = "module-zip"
)

// Result is the outcome of checking one cached package.
type Result struct {
	Kind     string `json:"kind"` // KindProvider, KindModule or KindModuleZip
	Address  string `json:"address"`
	Version  string `json:"version"`
	Platform string `json:"platform,omitempty"` // providers only
	SHA256   string `json:"sha256"`
	Bytes    int64  `json:"bytes"`
	By       string `json:"by"` // CheckedEvidence or CheckedSHA256
	// Withheld says the package is of a withheld import set aside in the
	// record of the origin's version of its number
	// (records.PackageRecord.Withheld): kept, never served, checked against its
	// sha256.
	Withheld bool `json:"withheld,omitempty"`
	// Problem says what failed, "" when the package is intact; Reason is
	// its verification failure reason (as in the metric).
	Problem string `json:"problem,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Summary sums up a VerifyCache that read the whole cache.
type Summary struct {
	At      time.Time `json:"at"` // when it ended
	Checked int       `json:"checked"`
	Failed  int       `json:"failed"`
}

// Metrics receives what the checks observe. Package metrics implements it.
type Metrics interface {
	// VerificationFailed records a package that failed its check, for
	// reason (a verify.Reason).
	VerificationFailed(reason string)
	// CacheChecked records the outcome of each VerifyCache that read the
	// whole cache.
	CacheChecked(at time.Time, checked, failed int)
}

// Store is what the checks read of the cache. *cache.Store implements it.
type Store interface {
	ScanMeta(prefix string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error
	StatBlob(sha string) (cache.BlobInfo, error)
	OpenBlob(sha string) (cache.BlobReader, error)
}

// Config configures a Checker. Every field is required but Shared.
type Config struct {
	// CheckEvery is how often VerifyCache runs in the background; 0:
	// never (only when asked).
	CheckEvery time.Duration
	// Now is the clock.
	Now func() time.Time
	// Logger receives what failed, and what each scheduled check found.
	Logger *slog.Logger
	// VerifyCached checks a cached provider package against its stored
	// evidence: the engine's check. It fails with records.ErrNoEvidence
	// for a package kept without evidence, records.ErrNotCached for one
	// not cached, and records.ErrShutDown once the engine shuts down.
	VerifyCached func(ctx context.Context, p addrs.Provider, v versions.Version, pl addrs.Platform) error
	// Shared says a tier shared with other replicas stands behind the
	// cache: a module package or zip the cache lacks may be had from it,
	// so its absence is not reported as a loss. Default false.
	Shared bool
}

// Checker checks the whole cache again (VerifyCache), when asked and
// every Config.CheckEvery, from what the cache holds alone. Its checks
// serve no client: the engine's Shutdown and Close end them first (Stop).
// mirror.Engine.CacheChecker returns the engine's.
type Checker struct {
	cfg     Config
	store   Store
	log     *slog.Logger
	metrics Metrics

	// checks are the VerifyCache calls under way. They run on checkCtx,
	// which end cancels first. checkDone is closed when the background
	// check goroutine (CheckEvery) ends.
	checks     checks
	checkCtx   context.Context
	stopChecks context.CancelFunc
	checkDone  chan struct{}
	lastCheck  atomic.Pointer[Summary] // the last VerifyCache that read the whole cache
}

// New returns the checker of store, and starts the background check
// (Config.CheckEvery); Stop ends it.
func New(cfg Config, store Store, metrics Metrics) (*Checker, error) {
	if store == nil || metrics == nil || cfg.Now == nil || cfg.Logger == nil || cfg.VerifyCached == nil {
		return nil, errors.New("cachecheck: a store, metrics, a clock, a logger and the engine's check are required")
	}
	c := &Checker{cfg: cfg, store: store, log: cfg.Logger, metrics: metrics, checkDone: make(chan struct{})}
	c.checkCtx, c.stopChecks = context.WithCancel(context.Background())
	workgroup.Go(c.log, c.checkLoop, "work", "cache check")
	return c, nil
}

// LastCacheCheck returns the last VerifyCache of this engine that read
// the whole cache; false when none has.
func (s *Checker) LastCacheCheck() (Summary, bool) {
	if c := s.lastCheck.Load(); c != nil {
		return *c, true
	}
	return Summary{}, false
}

// cachedPackageRef is one package VerifyCache checks.
type cachedPackageRef struct {
	kind, addr, version, platform, sha string
	provider                           addrs.Provider
	withheld                           bool // set aside in the origin's record
	// refused is the error of a module record today's rules refuse
	// (records.ErrModuleRecordRefused): its package is damaged as served.
	refused error
	// lost, for a module package or zip, is what its absence from the
	// cache means ("" when it can be had again: a package fetched from
	// its origin, a zip made again of it): an import's package, or a
	// zip whose package is such a one, is gone for good when it is not
	// cached.
	lost string
	// pkg is the sha256 of the module package a zip was made of.
	pkg string
}

// moduleRecordRef is what VerifyCache keeps of a module record, for the
// record's package and for its zip.
type moduleRecordRef struct {
	sha       string
	fetchable bool // fetched from an origin, whose location it keeps
}

// VerifyCache reads every package in the cache and checks it again, from
// what the cache holds alone, without asking any origin: a provider
// package against its stored evidence (CheckedEvidence), else against the
// sha256 recorded when it was kept (CheckedSHA256), as is a withheld
// import set aside in the record of the origin's version of its number;
// a module package's links too, each of which must resolve inside it; a
// module version's zip against the sha256 recorded when it was made
// (KindModuleZip). A module package or zip not cached is passed over when
// it can be had again (fetched again from its origin, made again of its
// package), and reported when it cannot (an imported version's: it is
// not served). fn is called with each package's outcome, in the order
// of the cache's records. A package that fails is logged and counted in
// the verification failures metric, and kept: this is a report, and a version that can be fetched again is
// removed by Prune naming it. Packages evicted while the check runs are
// passed over. A check that reads the whole cache is remembered
// (LastCacheCheck) and given to the metrics.
//
// Errors: what stops the check (ctx's, records.ErrShutDown, the store's); a
// failed package is not an error.
func (s *Checker) VerifyCache(ctx context.Context, fn func(Result)) error {
	if !s.checks.add() {
		return records.ErrShutDown
	}
	defer s.checks.done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.checkCtx, cancel)()

	// The list is read first, so that no read transaction stays open
	// while archives are read.
	var refs []cachedPackageRef
	err := s.store.ScanMeta("package/", func(key string, _ time.Time, raw json.RawMessage) error {
		p, rec, ok := records.PackageSummary(key, raw)
		if !ok {
			return nil
		}
		// An imported package (of a version imported, or added by an
		// import to the origin's version: no download URL) is not in the
		// shared tier and cannot be fetched again: lost when not cached.
		lost := func(sha string) string {
			return fmt.Sprintf("the imported provider package %s is no longer in the cache and cannot be fetched again: it is not served; import it again", sha)
		}
		for _, pl := range sortedKeys(rec.Archives) {
			a := rec.Archives[pl]
			ref := cachedPackageRef{kind: KindProvider, addr: p.String(), version: rec.Version,
				platform: pl, sha: a.SHA256, provider: p}
			if rec.Provenance != records.ProvenanceOrigin || a.URL == "" {
				ref.lost = lost(a.SHA256)
			}
			refs = append(refs, ref)
		}
		if w := rec.Withheld; w != nil {
			for _, pl := range sortedKeys(w.Archives) {
				refs = append(refs, cachedPackageRef{kind: KindProvider, addr: p.String(), version: rec.Version,
					platform: pl, sha: w.Archives[pl].SHA256, provider: p, withheld: true, lost: lost(w.Archives[pl].SHA256)})
			}
		}
		return nil
	})
	modules := map[string]moduleRecordRef{} // by module and version, the key without its prefix
	if err == nil {
		err = s.store.ScanMeta("module/", func(key string, _ time.Time, raw json.RawMessage) error {
			var rec records.ModuleRecord
			err := json.Unmarshal(raw, &rec)
			refused := errors.Is(err, records.ErrModuleRecordRefused)
			if (err == nil || refused) && records.KnownSchema(rec.Schema) && rec.SHA256 != "" {
				mr := moduleRecordRef{sha: rec.SHA256, fetchable: rec.Provenance == records.ProvenanceOrigin && rec.Location != ""}
				modules[strings.TrimPrefix(key, "module/")] = mr
				ref := cachedPackageRef{kind: KindModule, addr: rec.Module, version: rec.Version, sha: rec.SHA256}
				if refused {
					ref.refused = err
				}
				if !mr.fetchable && !s.cfg.Shared {
					ref.lost = fmt.Sprintf("the module package %s, %s, is no longer in the cache and cannot be fetched again: the version is not served; import it again", rec.SHA256, rec.Provenance)
				}
				refs = append(refs, ref)
			}
			return nil
		})
	}
	if err == nil {
		err = s.store.ScanMeta("modzip/", func(key string, _ time.Time, raw json.RawMessage) error {
			var rec records.ModuleZipRecord
			if json.Unmarshal(raw, &rec) != nil || !records.KnownSchema(rec.Schema) || rec.SHA256 == "" || rec.Package == "" {
				return nil
			}
			ref := cachedPackageRef{kind: KindModuleZip, addr: rec.Module, version: rec.Version, sha: rec.SHA256, pkg: rec.Package}
			// A zip whose package cannot be had again cannot be made
			// again either: the digest handed out for it is served from
			// the zip kept, or not at all.
			if mr, ok := modules[strings.TrimPrefix(key, "modzip/")]; ok && mr.sha == rec.Package && !mr.fetchable && !s.cfg.Shared {
				ref.lost = fmt.Sprintf("the module zip %s is no longer in the cache, and the package it was made of cannot be fetched again: it is not served; import the version again", rec.SHA256)
			}
			refs = append(refs, ref)
			return nil
		})
	}
	if err != nil {
		return err
	}
	var sum Summary
	for _, ref := range refs {
		if s.checkCtx.Err() != nil {
			return records.ErrShutDown
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		c, skip, err := s.checkRef(ctx, ref)
		if skip {
			continue
		}
		if err != nil && c.SHA256 == "" {
			return err
		}
		switch {
		case errors.Is(err, records.ErrNotCached):
			continue // evicted or dropped since the list was read
		case errors.Is(err, records.ErrShutDown):
			return err
		case err != nil && s.checkCtx.Err() != nil:
			return records.ErrShutDown
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			c.Problem, c.Reason = err.Error(), records.ReasonOf(err)
			if c.Reason == "unknown" {
				c.Reason = ""
			} else {
				s.metrics.VerificationFailed(c.Reason)
			}
			s.log.Error("a cached package failed its check", "kind", c.Kind, "address", c.Address,
				"version", c.Version, "platform", c.Platform, "sha256", c.SHA256, "reason", c.Reason, "error", err)
		}
		sum.Checked++
		if c.Problem != "" {
			sum.Failed++
		}
		fn(c)
	}
	sum.At = s.cfg.Now().UTC()
	s.lastCheck.Store(&sum)
	s.metrics.CacheChecked(sum.At, sum.Checked, sum.Failed)
	return nil
}

// checkRef checks ref: its outcome is c and err (what failed, or what
// stops the check when c is empty); skip says it is not to be reported
// (not cached, and to be had again when asked for).
func (s *Checker) checkRef(ctx context.Context, ref cachedPackageRef) (c Result, skip bool, err error) {
	info, err := s.store.StatBlob(ref.sha)
	// An archive a read found damaged is not found for those who
	// would serve it, and stays damaged here until it is replaced.
	damaged := errors.Is(err, cache.ErrDamaged)
	c = Result{Kind: ref.kind, Address: ref.addr, Version: ref.version, Platform: ref.platform,
		SHA256: ref.sha, Bytes: info.Size, By: CheckedSHA256, Withheld: ref.withheld}
	switch {
	case errors.Is(err, cache.ErrNotFound) && !damaged && ref.lost != "":
		if ref.kind == KindModuleZip {
			if _, perr := s.store.StatBlob(ref.pkg); perr == nil {
				return c, true, nil // made again of its package when asked for
			}
		}
		return c, false, errors.New(ref.lost)
	case errors.Is(err, cache.ErrNotFound) && !damaged:
		return c, true, nil
	case err != nil && !damaged:
		return Result{}, false, err
	case damaged:
		return c, false, damagedError(ref.sha, err)
	}
	err = records.ErrNoEvidence
	if ref.kind == KindProvider && !ref.withheld {
		c.By = CheckedEvidence
		if err = s.checkProviderPackage(ctx, ref); errors.Is(err, cache.ErrDamaged) {
			err = damagedError(ref.sha, err)
		}
	}
	if errors.Is(err, records.ErrNoEvidence) {
		c.By = CheckedSHA256
		err = s.checkBlobSHA256(ctx, ref.sha)
	}
	if err == nil && ref.kind == KindModule {
		err = s.checkModuleLinks(ctx, ref.sha)
	}
	if err == nil && ref.refused != nil {
		err = ref.refused
	}
	if err == nil && ref.kind == KindModuleZip && ref.lost != "" {
		// Served only with the package it was made of.
		if _, perr := s.store.StatBlob(ref.pkg); errors.Is(perr, cache.ErrNotFound) {
			err = fmt.Errorf("the module package %s the zip was made of is no longer in the cache (or is damaged) and cannot be fetched again: the zip is not served; import the version again", ref.pkg)
		}
	}
	return c, false, err
}

// checkProviderPackage is verifyCached for ref, a provider package.
func (s *Checker) checkProviderPackage(ctx context.Context, ref cachedPackageRef) error {
	v, err := addrs.ParseSemver(ref.version)
	if err != nil {
		return fmt.Errorf("%w: version %q", records.ErrNoEvidence, ref.version)
	}
	pl, err := addrs.ParsePlatform(ref.platform)
	if err != nil {
		return fmt.Errorf("%w: platform %q", records.ErrNoEvidence, ref.platform)
	}
	return s.cfg.VerifyCached(ctx, ref.provider, v, pl)
}

// openBlob opens the cached archive sha. Errors: records.ErrNotCached
// when it is not cached; the store's.
func (s *Checker) openBlob(sha string) (cache.BlobReader, error) {
	blob, err := s.store.OpenBlob(sha)
	if errors.Is(err, cache.ErrDamaged) {
		return nil, damagedError(sha, err)
	}
	if errors.Is(err, cache.ErrNotFound) {
		return nil, fmt.Errorf("%w: archive %s", records.ErrNotCached, sha)
	}
	if err != nil {
		return nil, fmt.Errorf("opening cached archive %s: %w", sha, err)
	}
	return blob, nil
}

// damagedError is the failure of the cached archive sha whose stored
// bytes a read found damaged (cache.ErrDamaged, err).
func damagedError(sha string, err error) error {
	return &verify.Error{Reason: verify.ReasonChecksum, Detail: fmt.Sprintf("the cached archive %s is damaged where it is stored: %v", sha, err)}
}

// checkBlobSHA256 reads the cached archive sha and checks its bytes
// against its name. Errors: records.ErrNotCached when it is not cached; a
// *verify.Error when the bytes differ.
func (s *Checker) checkBlobSHA256(ctx context.Context, sha string) error {
	blob, err := s.openBlob(sha)
	if err != nil {
		return err
	}
	defer blob.Close()
	got, err := readSHA256(ctx, blob)
	if errors.Is(err, cache.ErrDamaged) {
		return damagedError(sha, err)
	}
	if err != nil {
		return fmt.Errorf("reading cached archive %s: %w", sha, err)
	}
	if got != strings.ToLower(sha) {
		return &verify.Error{Reason: verify.ReasonChecksum, Detail: fmt.Sprintf("the cached archive %s has sha256 %s", sha, got)}
	}
	return nil
}

// checkModuleLinks reads the cached module package sha and refuses it
// when one of its links resolves outside it (a package kept before every
// package was checked so): it is damaged, and the mirror never unpacks
// it (modsource.Unpack refuses it). Errors: records.ErrNotCached when it is not
// cached; a *verify.Error (ReasonBadArchive) for such a link.
func (s *Checker) checkModuleLinks(ctx context.Context, sha string) error {
	blob, err := s.openBlob(sha)
	if err != nil {
		return err
	}
	defer blob.Close()
	// No limits: it was within those of its day, and is read, not kept.
	err = modsource.CheckPackageLinks(ctx, blob, modsource.Limits{})
	switch {
	case err == nil, ctx.Err() != nil:
		return err
	case errors.Is(err, safetree.ErrUnsafe):
		return &verify.Error{Reason: verify.ReasonBadArchive, Detail: fmt.Sprintf("the cached module package %s: %v", sha, err)}
	}
	return &verify.Error{Reason: verify.ReasonBadArchive, Detail: fmt.Sprintf("reading the cached module package %s: %v", sha, err)}
}

// Stopping is closed once Stop was called: the checks under way end at
// their next read.
func (s *Checker) Stopping() <-chan struct{} { return s.checkCtx.Done() }

// Stop stops the checks under way and the background one, and waits for
// them: they end at their next read. VerifyCache fails with
// records.ErrShutDown from then on. It is the first step of the engine's
// Shutdown and Close.
func (s *Checker) Stop() {
	s.checks.close()
	s.stopChecks()
	s.checks.wait()
	<-s.checkDone
}

// checkLoop runs VerifyCache every Config.CheckEvery until the engine
// shuts down, and logs what each check found.
func (s *Checker) checkLoop() {
	defer close(s.checkDone)
	if s.cfg.CheckEvery <= 0 {
		return
	}
	t := time.NewTicker(s.cfg.CheckEvery)
	defer t.Stop()
	for {
		select {
		case <-s.checkCtx.Done():
			return
		case <-t.C:
		}
		var bytes int64
		err := s.VerifyCache(s.checkCtx, func(c Result) { bytes += c.Bytes })
		if err != nil {
			if !errors.Is(err, records.ErrShutDown) {
				s.log.Warn("the scheduled check of the cache stopped", "error", err)
			}
			continue
		}
		last, _ := s.LastCacheCheck()
		level := slog.LevelInfo
		if last.Failed > 0 {
			level = slog.LevelError
		}
		s.log.Log(s.checkCtx, level, "checked the cache", "packages", last.Checked, "bytes", bytes, "damaged", last.Failed)
	}
}

// readSHA256 reads r to its end, checking ctx between reads, and returns
// the hex sha256 of its bytes.
func readSHA256(ctx context.Context, r io.Reader) (string, error) {
	h := sha256.New()
	buf := make([]byte, 256<<10)
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n, err := r.Read(buf)
		h.Write(buf[:n])
		if err == io.EOF {
			return hex.EncodeToString(h.Sum(nil)), nil
		}
		if err != nil {
			return "", err
		}
	}
}

// checks counts the VerifyCache calls under way, so that Stop can wait
// for them: after close, add takes no more.
type checks struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func (c *checks) add() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	return true
}

func (c *checks) done() { c.wg.Done() }

func (c *checks) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

func (c *checks) wait() { c.wg.Wait() }

func sortedKeys[M ~map[string]V, V any](m M) []string {
	return slices.Sorted(maps.Keys(m))
}
