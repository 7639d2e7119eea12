// Package fetch fetches each archive once: it runs at most one download
// per archive (by sha256), from the shared tier or the origin or a file
// handed in, stages it in the cache as it arrives, lets any number of
// readers stream it while it does, releases its held-back last bytes only
// once its sha256 matched and it passed its check, and commits it then.
// The engine and the import of provider versions take a *Fetcher as a
// field; it calls nothing above it.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/workgroup"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// copyBufferSize is the unit in which archive bytes move from the origin to
// the cache and from the cache to clients.
const copyBufferSize = 256 << 10

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

// Archive is an opened provider archive. Read it, then Close it. A cached
// archive (records.Source records.Hit) is also an io.Seeker, see Content; an archive
// being downloaded is read as it arrives, except for its final
// Config.HoldBack bytes, which Read returns only once the whole archive's
// sha256 matched. If the download fails, Read returns its error: a reader
// never sees all the bytes of an archive that did not verify. Read is not
// safe for concurrent use.
type Archive struct {
	// SHA256 is the archive's verified sha256, in hex.
	SHA256 string
	// Size is the archive's length in bytes, or -1 when the origin did
	// not announce it.
	Size int64
	// ModTime is when the archive was stored (zero unless cached).
	ModTime time.Time
	// records.Source says whether the archive was cached, or is being downloaded.
	Source records.Source

	blob cache.BlobReader // records.Source records.Hit

	// records.Source records.Miss or records.Coalesced:
	f        *Download
	r        cache.Follower // f's bytes, for this client
	holdBack int64
	off      int64
	gone     chan struct{}      // closed when the context given to Open ends
	goneErr  error              // why; set before gone is closed
	stop     func() bool        // stops watching that context
	life     *lifetime.Lifetime // the work Shutdown waits for, ended by Close
	log      *slog.Logger
	reopen   func(sha string, src records.Source) (*Archive, error) // Reopen's; nil for a cached archive

	closeOnce sync.Once
}

// Content returns the archive as an io.ReadSeeker when it is cached
// (records.Source records.Hit), for serving with Range and conditional requests; nil
// while it is being downloaded.
func (a *Archive) Content() io.ReadSeeker {
	if a.blob == nil {
		return nil
	}
	return a.blob
}

// Stored waits, for an archive read to its end, until it is in the cache,
// and returns why not when it is not: nil at once for one that was cached
// (records.Hit); for one being fetched, once its fetch ended, the fetch's
// error or why its verified bytes were not committed (the cache could not
// be written), or ctx's error when ctx ends first. An archive whose fetch
// has ended is committed (or not) already: its last byte is read just
// before the commit. Callers that must answer with a cached archive's
// length (an archive whose origin announced none) read it, wait here,
// and open it again (Reopen).
func (a *Archive) Stored(ctx context.Context) error {
	if a.f == nil {
		return nil
	}
	select {
	case <-a.f.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := a.f.State().Err; err != nil {
		return err
	}
	return a.f.notStored
}

// Reopen opens again from the cache an archive that was being fetched
// when opened, once Stored said it is stored, counting neither a cache
// lookup nor a use: it is the same answer to the same caller, and keeps
// a's Source (records.Miss, Coalesced or Shared, not Hit: it was not
// found cached). The archive opened is the caller's to close, as a is.
// It fails with cache.ErrNotFound when the archive is not in the cache
// (evicted since), with records.ErrShutDown once the engine takes no more
// work, and for an archive that was opened from the cache (which is
// seekable already: Content).
func (a *Archive) Reopen() (*Archive, error) {
	if a.reopen == nil {
		return nil, errors.New("reopen: the archive was opened from the cache")
	}
	return a.reopen(a.SHA256, a.Source)
}

// Read reads the archive. While it is being downloaded, Read waits for
// bytes to arrive; it returns the download's error if the download fails,
// and the context's error once the context given to Open (mirror.Engine.OpenArchive) ends
// (the download goes on for others).
func (a *Archive) Read(p []byte) (int, error) {
	if a.blob != nil {
		return a.blob.Read(p)
	}
	f := a.f
	for {
		st := f.State()
		if st.Err != nil {
			return 0, st.Err
		}
		limit := st.Written
		if !st.Verified {
			limit = max(0, st.Written-a.holdBack)
		}
		if a.off < limit {
			n := int(min(int64(len(p)), limit-a.off))
			n, err := a.r.ReadAt(p[:n], a.off)
			if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
				if err := f.State().Err; err != nil { // the fetch failed meanwhile
					return 0, err
				}
				a.log.Error("reading archive being fetched", "sha256", f.sha, "offset", a.off, "error", err)
				return 0, fmt.Errorf("reading archive being fetched: %w", err)
			}
			a.off += int64(n)
			return n, nil
		}
		if st.Verified && a.off == st.Written {
			return 0, io.EOF
		}
		select {
		case <-st.Changed:
		case <-a.gone:
			return 0, a.goneErr
		}
	}
}

// Close releases the archive. The download, if any, goes on. Shutdown
// waits for every opened archive to be closed.
func (a *Archive) Close() error {
	var err error
	a.closeOnce.Do(func() {
		if a.blob != nil {
			err = a.blob.Close()
		} else {
			a.stop()
			a.r.Close()
			a.f.release()
		}
		a.life.EndWork()
	})
	return err
}

// Fetcher runs at most one origin download per archive (by sha256) of a
// provider and lets any number of clients stream from it. At most
// Config.MaxDownloads downloads from origins run at once: one started
// beyond them waits for a slot while a client waits for it, and is
// dropped, having asked the origin nothing, once its last client left
// (a download once started runs on without its clients, for the next
// one). Imports and copies from the shared tier take no slot (one the
// tier broke off takes one for the rest, from the origin). Its methods
// are safe for concurrent use.
type Fetcher struct {
	cfg     Config
	life    *lifetime.Lifetime
	store   Store
	origin  Origin
	copies  Copies
	log     *slog.Logger
	metrics Metrics

	mu       sync.Mutex
	inflight map[string]*Download // by sha256 and provider (start)
	hooks    Hooks
	// slots holds a token for every download from an origin under way.
	slots chan struct{}
}

// Hooks let a test watch the fetcher at work; a nil field is not called.
type Hooks struct {
	// Join is called for every client that joins or starts a fetch of
	// the archive sha, with the download of it under way (nil: none,
	// the archive is committed), under the fetcher's lock.
	Join func(sha string, d *Download)
	// Fail is called when a download has failed, after it left the
	// downloads under way and its clients were told.
	Fail func()
	// Wait is called when a download waits for another replica's.
	Wait func()
	// Done is called when a download has ended, after its waiters were
	// told (its done closed).
	Done func()
}

// SetHooks installs a test's hooks; call it before the first fetch.
func (fr *Fetcher) SetHooks(h Hooks) {
	fr.mu.Lock()
	fr.hooks = h
	fr.mu.Unlock()
}

// Config configures a Fetcher: the engine's (mirror.Config), its
// defaults filled in.
type Config struct {
	// ArchiveTimeout bounds one archive download; required.
	ArchiveTimeout time.Duration
	// MaxArchiveBytes refuses larger archives; required.
	MaxArchiveBytes int64
	// ArchiveLimits bound the check that an archive is an installable
	// provider package.
	ArchiveLimits verify.Limits
	// MaxDownloads is how many downloads from origins run at once; the
	// others wait for one of them to end, as long as a client waits for
	// them (see Fetcher). 0: DefaultMaxDownloads.
	MaxDownloads int
	// HoldBack is how many final bytes of an archive being downloaded a
	// reader gets only once the whole archive verified.
	HoldBack int64
	// Offline: no origin is asked; a download the shared tier broke off
	// fails, and a Blob not cached fails with records.ErrOffline.
	Offline bool
	// OriginRefused, when set, is told of each provider archive from its
	// origin that failed verification (mirror.Config.OriginRefused).
	OriginRefused func(origin, reason string)
	// Logger is required.
	Logger *slog.Logger
}

// DefaultMaxDownloads is Config.MaxDownloads when it is 0.
const DefaultMaxDownloads = 64

// Parts are the engine's components a Fetcher takes; both are required.
type Parts struct {
	Life   *lifetime.Lifetime // the context downloads run on, the work Shutdown waits for, the notifier
	Copies Copies             // archives read from and given to the store beyond the cache
}

// Copies is the store beyond the cache, where an archive the cache lacks
// is looked for before the origin is asked, and where one committed to
// the cache is offered: the engine's stored records (mirror/stored.Records,
// which find nothing beyond the cache), or the tier shared with other
// replicas that the engine composes over them.
type Copies interface {
	// Archive finds the archive sha (named name in logs) for a download
	// of provider owner's: its body and size when the store has it; else
	// a nil body and, when this replica took the store's lease on
	// downloading it from the origin for owner, release, to be called
	// once the archive is offered (ShareArchive). While another replica
	// holds that lease, it waits (calling onWait, a test hook, if not
	// nil, each time it looks) until ctx ends.
	Archive(ctx context.Context, sha, owner, name string, onWait func()) (body io.ReadCloser, size int64, release func(context.Context), err error)
	// ShareArchive offers the archive sha, committed to the cache.
	ShareArchive(ctx context.Context, sha, name string)
	// Distrust says the store's copy of the archive sha failed
	// verification: it is taken from the origin from then on.
	Distrust(sha string)
}

// Origin opens archives at their origin (mirror.ProviderOrigin, behind
// the engine's guards).
type Origin interface {
	OpenArchive(ctx context.Context, p addrs.Provider, rawURL string) (io.ReadCloser, int64, error)
}

// Store is where archives are staged, verified and kept: the cache.
// *cache.Store implements it.
type Store interface {
	StatBlob(sha string) (cache.BlobInfo, error)
	OpenBlob(sha string) (cache.BlobReader, error)
	NewBlobWriter(expectedSHA string) (cache.BlobWriter, error)
}

// Metrics receives what a Fetcher observes (mirror.Metrics).
type Metrics interface {
	CacheLookup(kind string, hit bool)
	Coalesced(kind string)
	VerificationFailed(reason string)
	ArchiveFetchStarted() (done func())
	// ArchiveFetchWaiting records a download waiting for one of the
	// origin download slots; done ends the wait.
	ArchiveFetchWaiting() (done func())
	CacheWriteFailed()
}

// New returns a Fetcher of archives from origin into store.
func New(cfg Config, parts Parts, origin Origin, store Store, metrics Metrics) (*Fetcher, error) {
	if parts.Life == nil || parts.Copies == nil || origin == nil || store == nil || metrics == nil || cfg.Logger == nil || cfg.ArchiveTimeout <= 0 || cfg.MaxArchiveBytes <= 0 {
		return nil, errors.New("fetch: the engine's parts, an origin, a store, metrics, a logger, a timeout and the archive size limit are required")
	}
	if cfg.MaxDownloads <= 0 {
		cfg.MaxDownloads = DefaultMaxDownloads
	}
	return &Fetcher{cfg: cfg, life: parts.Life, store: store, origin: origin, copies: parts.Copies, log: cfg.Logger, metrics: metrics,
		inflight: make(map[string]*Download), slots: make(chan struct{}, cfg.MaxDownloads)}, nil
}

// join returns the fetch of a's archive under way, starting one if there is
// none; leader reports whether this call started it. It returns nil when
// the archive is already committed to the cache, and records.ErrShutDown when a
// fetch would be needed but the engine is shutting down. The caller must
// release the fetch.
func (fr *Fetcher) join(p addrs.Provider, a records.ArchiveRecord) (f *Download, leader bool, err error) {
	return fr.joinFrom(p, a, nil)
}

// Source is where a fetch reads an archive from instead of its origin:
// an imported file, or a Blob's origin. Everything else (staging, the
// sha256 and installability checks, the commit) is the same.
type Source struct {
	Open func(ctx context.Context) (io.ReadCloser, int64, error)
	// H1, when set, is the h1: hash the archive must have.
	H1 string
	// FromOrigin says Open reads an origin: the fetch is counted as one.
	FromOrigin bool
	// Check, when set, replaces the provider package check (a file that
	// is not a provider archive, see Blob); the file is committed
	// without an h1: hash.
	Check func(ctx context.Context, r io.ReaderAt, size int64) error
	// Label names the file in logs in place of the provider.
	Label string
	// Refused, when set, is told of a verification failure, after the
	// fetcher counted it.
	Refused func(reason string)
	// LocalOnly keeps the file out of the shared tier, which holds
	// provider archives (a Blob).
	LocalOnly bool
}

// subject is what logs name a fetch of p's archive by: p, or src's label.
func subject(p addrs.Provider, src *Source) string {
	if src != nil && src.Label != "" {
		return src.Label
	}
	return p.String()
}

// joinFrom is join, with the archive read from src when this call starts
// the fetch (nil: the origin).
func (fr *Fetcher) joinFrom(p addrs.Provider, a records.ArchiveRecord, src *Source) (f *Download, leader bool, err error) {
	_, f, leader, err = fr.start(p, a, src, false)
	return f, leader, err
}

// joinOrOpen is join, except that an archive already committed is opened
// (blob) rather than only found: the reader's reference is taken under
// fr.mu, so that the archive cannot be evicted between being found and
// being opened. An archive evicted before is fetched again, from src when
// set (see joinFrom).
func (fr *Fetcher) joinOrOpen(p addrs.Provider, a records.ArchiveRecord, src *Source) (blob cache.BlobReader, f *Download, leader bool, err error) {
	return fr.start(p, a, src, true)
}

func (fr *Fetcher) start(p addrs.Provider, a records.ArchiveRecord, src *Source, open bool) (blob cache.BlobReader, f *Download, leader bool, err error) {
	// A download under way is found by its archive's sha256 and its
	// provider: anyone can publish and sign a provider, and its
	// SHA256SUMS may name another provider's sha256 with a download URL
	// of its own; a client of one provider never reads a download
	// another provider's origin answer started (its bytes, its stalls,
	// its check for another executable). Once committed, the cache holds
	// the bytes by sha256 alone, for every provider: they are those
	// bytes, checked. (A Blob, of no provider, is one of its own.)
	owner := p.String()
	key := a.SHA256 + " " + owner
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if fr.hooks.Join != nil {
		defer func() { fr.hooks.Join(a.SHA256, fr.inflight[key]) }()
	}
	if f, ok := fr.inflight[key]; ok {
		f.acquire()
		return nil, f, false, nil
	}
	// A fetch removes itself only after its commit, so under fr.mu an
	// archive is either in flight or committed (or neither).
	if open {
		if blob, err := fr.store.OpenBlob(a.SHA256); err == nil {
			return blob, nil, false, nil
		}
	} else if _, err := fr.store.StatBlob(a.SHA256); err == nil {
		return nil, nil, false, nil
	}
	ctx, done, err := fr.life.Detached(fr.cfg.ArchiveTimeout)
	if err != nil {
		return nil, nil, false, err
	}
	f = &Download{sha: a.SHA256, key: key, owner: owner, ready: make(chan struct{}), done: make(chan struct{}), changed: make(chan struct{}), unwanted: make(chan struct{}), refs: 2, size: -1}
	fr.inflight[key] = f
	workgroup.Go(fr.log, func() { fr.run(ctx, done, f, p, a, src) }, "provider", subject(p, src), "file", a.Filename)
	return nil, f, true, nil
}

func (fr *Fetcher) remove(f *Download) {
	fr.mu.Lock()
	if fr.inflight[f.key] == f {
		delete(fr.inflight, f.key)
	}
	fr.mu.Unlock()
}

// run downloads the archive on ctx, the engine's and not any client's, so
// that no client going away cancels it, staging it in the cache as it
// arrives. finished is called when it has ended.
func (fr *Fetcher) run(ctx context.Context, finished func(), f *Download, p addrs.Provider, a records.ArchiveRecord, src *Source) {
	defer finished()
	fr.fetchAndCommit(ctx, f, p, a, src)
	if src == nil || !src.LocalOnly {
		fr.share(ctx, f, a)
	}
}

// fetchAndCommit downloads the archive (from src when set) and commits it
// to the cache; by the time it returns, the fetch has left inflight and
// its done is closed.
func (fr *Fetcher) fetchAndCommit(ctx context.Context, f *Download, p addrs.Provider, a records.ArchiveRecord, src *Source) {
	s := fr
	defer func() {
		if done := fr.hooksNow().Done; done != nil {
			done()
		}
	}()
	// Out of inflight before done is closed: a caller that saw done and
	// then the committed archive must not join this fetch again.
	defer close(f.done)
	// The fetch's own hold, let go before done is closed: a caller that
	// waited for done and lets go of its own (Import) finds the writer
	// closed when it returns, and the archive the cache's alone (a prune
	// right after an import found it in use).
	defer f.release()
	defer fr.remove(f)
	defer func() {
		if f.originDone != nil {
			f.originDone()
		}
		f.giveSlotBack()
	}()

	h1, err := fr.downloadGuarded(ctx, f, p, a, src)
	if err != nil {
		// Logged and counted before the waiters are released, so that
		// whatever they do next comes after (a caller's own output to
		// the log's writer, a metrics read).
		var verr *verify.Error
		var berr *records.BadArchiveError
		if f.fromShared && (errors.As(err, &verr) || errors.As(err, &berr)) {
			s.copies.Distrust(a.SHA256)
			s.log.Error("the shared store's copy of an archive is not the archive; this replica fetches it from the origin from now on, and puts the origin's in its place in the bucket",
				"provider", subject(p, src), "file", a.Filename, "sha256", a.SHA256, "error", err)
		}
		switch {
		case errors.As(err, &verr):
			s.metrics.VerificationFailed(string(verr.Reason))
			if src != nil && src.Refused != nil {
				src.Refused(string(verr.Reason))
			}
			if src == nil && !f.fromShared && s.cfg.OriginRefused != nil {
				s.cfg.OriginRefused(string(p.Hostname), string(verr.Reason))
			}
			s.log.Error("archive failed verification; nothing was cached", "provider", subject(p, src),
				"file", a.Filename, "reason", string(verr.Reason), "error", err)
		case errors.Is(err, workgroup.ErrPanicked):
			// Logged with its stack (downloadGuarded).
		case errors.Is(ctx.Err(), context.Canceled):
			// Only Shutdown (at its deadline) and Close cancel ctx
			// before the fetch ends; its timeout is a deadline. Not a
			// fault, and said apart from one.
			stage := "download"
			if f.checking {
				stage = "check"
			}
			s.log.Info("archive fetch stopped by shutdown; nothing was cached", "provider", subject(p, src),
				"file", a.Filename, "stage", stage, "error", err)
		case errors.Is(err, errUnwanted):
			s.log.Debug("archive download dropped before it began: its clients left while it waited for a download slot", "provider", subject(p, src), "file", a.Filename)
		case errors.Is(err, ErrImportInterrupted):
			s.log.Info("archive import interrupted; nothing was cached", "provider", subject(p, src),
				"file", a.Filename, "error", err)
		default:
			s.log.Error("archive fetch failed", "provider", subject(p, src), "file", a.Filename, "error", err)
		}
		// Out of inflight before the waiters learn of the failure: a
		// caller told of it that asks again must start a new fetch, not
		// join this failed one.
		fr.remove(f)
		// Failed before aborting the writer, so that no client reading
		// it mistakes the abort for a fault of its own.
		f.fail(err)
		if f.w != nil { // set by download, on this goroutine
			f.w.Abort()
		}
		if fail := fr.hooksNow().Fail; fail != nil {
			fail()
		}
		return
	}
	// Every byte is verified and clients have been released; store it.
	if err := f.w.Err(); err != nil {
		// The cache could not be written: nothing to commit.
		f.notStored = err
		s.metrics.CacheWriteFailed()
		s.log.Log(context.Background(), cache.WriteFailureLevel(err), "archive served but not cached", "provider", subject(p, src), "file", a.Filename, "error", err)
		return
	}
	if _, err := f.w.Commit(h1); err != nil {
		f.notStored = err
		s.metrics.CacheWriteFailed()
		s.log.Log(context.Background(), cache.WriteFailureLevel(err), "archive served but not cached", "provider", subject(p, src), "file", a.Filename, "error", err)
	}
}

// downloadGuarded is download, a panic of which (a bug of the mirror's,
// on the fetch's goroutine, which no handler's recovery reaches) is its
// error, logged with its stack: the fetch fails for its clients, and the
// process serves on.
func (fr *Fetcher) downloadGuarded(ctx context.Context, f *Download, p addrs.Provider, a records.ArchiveRecord, src *Source) (h1 string, err error) {
	return workgroup.Guarded(fr.log, func() (string, error) { return fr.download(ctx, f, p, a, src) },
		"provider", subject(p, src), "file", a.Filename)()
}

// download copies the archive (src's when set, else from the shared tier
// or the origin, see openSource) into the fetch's cache writer,
// checks it against the verified sha256 and checks that it is a provider
// package the clients can install, and returns its h1: hash. Only then is
// the fetch marked verified, which releases the held-back final bytes to
// clients; the writer is not yet committed. On failure the caller aborts
// the writer.
func (fr *Fetcher) download(ctx context.Context, f *Download, p addrs.Provider, a records.ArchiveRecord, src *Source) (string, error) {
	s := fr
	var (
		body io.ReadCloser
		size int64
		err  error
	)
	if src != nil {
		if src.FromOrigin {
			if err := fr.takeSlot(ctx, f, false); err != nil {
				return "", err
			}
			f.originDone = s.metrics.ArchiveFetchStarted()
		}
		body, size, err = src.Open(ctx) // an import is not an origin fetch: originDone stays nil
	} else {
		body, size, err = fr.openSource(ctx, f, p, a)
	}
	if err != nil {
		return "", err
	}
	defer func() { body.Close() }() // body may be replaced below
	if size > s.cfg.MaxArchiveBytes {
		return "", &records.BadArchiveError{Filename: a.Filename, Detail: fmt.Sprintf("it is %d bytes, more than the %d allowed (%s)", size, s.cfg.MaxArchiveBytes, maxArchiveSetting)}
	}
	w, err := s.store.NewBlobWriter(a.SHA256)
	if err != nil {
		return "", fmt.Errorf("staging archive: %w", err)
	}
	f.start(size, w)

	bufp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bufp)
	buf := *bufp
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return "", fmt.Errorf("staging archive: %w", err)
			}
			written := w.Written()
			if written > s.cfg.MaxArchiveBytes {
				return "", &records.BadArchiveError{Filename: a.Filename, Detail: fmt.Sprintf("it is larger than the %d bytes allowed (%s)", s.cfg.MaxArchiveBytes, maxArchiveSetting)}
			}
			// Bytes past the size stated are not the archive, and its
			// readers were told that size: none of them is released, or a
			// reader would have as many bytes as it was told of.
			if size >= 0 && written > size {
				return "", &records.BadArchiveError{Filename: a.Filename, Detail: fmt.Sprintf("more than the %d bytes announced were sent", size)}
			}
			f.progress(written)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			// A verification failure of the shared tier's (its bytes are
			// not those it vouched for) is not mended from the origin.
			if !f.fromShared || src != nil || ctx.Err() != nil || errors.As(rerr, new(*verify.Error)) {
				return "", rerr
			}
			// The shared tier broke off: the origin gives the rest, so
			// that a store in trouble never fails a download this
			// replica could make alone. The sha256 check below covers
			// the bytes of both.
			next, err := fr.resumeFromOrigin(ctx, f, p, a, w.Written(), rerr)
			if err != nil {
				return "", err
			}
			body.Close()
			body = next
		}
	}
	if size >= 0 && w.Written() != size {
		return "", &records.BadArchiveError{Filename: a.Filename, Detail: fmt.Sprintf("%d bytes sent, %d announced", w.Written(), size)}
	}
	if got := w.Sum(); got != a.SHA256 {
		return "", &verify.Error{Reason: verify.ReasonChecksum,
			Detail: fmt.Sprintf("%s has sha256 %s, the signed SHA256SUMS says %s", a.Filename, got, a.SHA256)}
	}
	// A signed archive may still be no provider package at all, or a zip
	// bomb (anyone can sign what they publish). Checked from the staged
	// bytes, within Config.ArchiveLimits and under the download's context;
	// if some of the bytes could not be kept (a full disk), the check
	// cannot run and the archive is not released.
	f.mu.Lock()
	f.checking = true
	f.notifyLocked()
	f.mu.Unlock()
	// The check reads the staged bytes a little at a time (a zip's
	// decompressor 4 KiB): through a reader of its own, which checks each
	// stored chunk once.
	r := w.Follow()
	defer r.Close()
	if src != nil && src.Check != nil {
		if err := src.Check(ctx, r, w.Written()); err != nil {
			return "", err
		}
		f.verify()
		return "", nil
	}
	h1, err := verify.CheckArchive(ctx, r, w.Written(), p.Type, s.cfg.ArchiveLimits)
	if err != nil {
		return "", err
	}
	if src != nil && src.H1 != "" && h1 != src.H1 {
		return "", &verify.Error{Reason: verify.ReasonChecksum,
			Detail: fmt.Sprintf("%s has %s, its VERSION.json says %s", a.Filename, h1, src.H1)}
	}
	f.verify()
	return h1, nil
}

// resumeFromOrigin opens the origin's archive a for a download whose
// stream from the shared tier broke off (with cause) after from bytes,
// and skips those bytes, having waited for one of the origin download
// slots (see Fetcher). Offline, there is no origin: it returns cause.
func (fr *Fetcher) resumeFromOrigin(ctx context.Context, f *Download, p addrs.Provider, a records.ArchiveRecord, from int64, cause error) (io.ReadCloser, error) {
	s := fr
	if s.cfg.Offline {
		return nil, cause
	}
	s.log.Warn("the shared store broke off an archive; the origin gives the rest",
		"provider", p.String(), "file", a.Filename, "offset", from, "error", cause)
	if f.slotDone == nil {
		if err := fr.takeSlot(ctx, f, true); err != nil {
			return nil, err
		}
	}
	if f.originDone == nil {
		f.originDone = s.metrics.ArchiveFetchStarted()
	}
	body, _, err := s.origin.OpenArchive(ctx, p, a.URL)
	if err != nil {
		return nil, err
	}
	if _, err := io.CopyN(io.Discard, body, from); err != nil {
		body.Close()
		return nil, fmt.Errorf("origin: skipping the %d bytes of %s the shared store gave: %w", from, a.Filename, err)
	}
	return body, nil
}

// Download is one archive download that clients stream from.
type Download struct {
	sha   string
	key   string        // in Fetcher.inflight: the sha256 and the owner
	owner string        // the provider's address, the download's and its shared lease's (Copies.Archive)
	ready chan struct{} // closed once size and w are set, or err
	done  chan struct{} // closed once the fetch has ended, committed or not

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change below
	size     int64
	w        cache.BlobWriter
	written  int64
	verified bool
	err      error
	refs     int
	// waiting says the download waits for a slot; unwanted is closed
	// (and replaced) when its last client lets go of it meanwhile.
	waiting  bool
	unwanted chan struct{}

	// Set and read by the fetch's goroutine only:
	fromShared bool                  // the bytes come from the shared tier; set before ready is closed
	lease      func(context.Context) // releases the shared tier's lease on the origin download
	originDone func()                // ends the metrics' origin fetch, once one started
	slotDone   func()                // gives back the download slot, once one was taken
	checking   bool                  // every byte arrived and matched; the archive check began
	notStored  error                 // why the verified bytes were not committed; set before done is closed
}

// State is how far a download got: the bytes staged, whether they all
// arrived and matched and the archive's check began, whether they
// verified, the error that ended it, and a channel closed at the next
// change.
type State struct {
	Written  int64
	Checking bool
	Verified bool
	Err      error
	Changed  <-chan struct{}
}

// State returns the download's state now.
func (f *Download) State() State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return State{Written: f.written, Checking: f.checking, Verified: f.verified, Err: f.err, Changed: f.changed}
}

// header returns the archive size once ready, or the error that ended the
// fetch, before it started or since.
func (f *Download) header() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.w == nil || f.err != nil {
		return 0, f.err
	}
	return f.size, nil
}

// follow returns a reader of the download's bytes for one client, once
// ready.
func (f *Download) follow() cache.Follower {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.w.Follow()
}

func (f *Download) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *Download) start(size int64, w cache.BlobWriter) {
	f.mu.Lock()
	f.size, f.w = size, w
	f.mu.Unlock()
	close(f.ready)
}

func (f *Download) progress(written int64) {
	f.mu.Lock()
	f.written = written
	f.notifyLocked()
	f.mu.Unlock()
}

func (f *Download) verify() {
	f.mu.Lock()
	f.verified = true
	f.notifyLocked()
	f.mu.Unlock()
}

func (f *Download) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
	f.notifyLocked()
	if f.w == nil {
		close(f.ready)
	}
}

func (f *Download) acquire() {
	f.mu.Lock()
	f.refs++
	f.mu.Unlock()
}

// release drops a reference; the last one frees the staged data's memory,
// and the last client's, while the download waits for a slot, says so
// (unwanted).
func (f *Download) release() {
	f.mu.Lock()
	f.refs--
	last := f.refs == 0
	if f.refs == 1 && f.waiting {
		close(f.unwanted)
		f.unwanted = make(chan struct{})
	}
	w := f.w
	f.mu.Unlock()
	if last && w != nil {
		w.Close()
	}
}

// maxArchiveSetting is the setting of Config.MaxArchiveBytes, named in
// the refusal of an archive over it.
const maxArchiveSetting = "--max-archive-bytes"

// errUnwanted ends a download whose last client let go of it before it
// had a slot: nothing was asked of the origin.
var errUnwanted = errors.New("every client left before a download slot was free")

// takeSlot waits for one of the origin download slots for f, as long as
// a client waits for f: once its last client let go of it (and none
// joined since), f leaves the downloads under way and takeSlot returns
// errUnwanted. A download begun (its clients were handed bytes: one the
// shared tier broke off) waits whether a client waits or not. ctx (the
// download's) ends the wait too.
func (fr *Fetcher) takeSlot(ctx context.Context, f *Download, begun bool) error {
	if fr.trySlot(f) {
		return nil
	}
	waited := fr.metrics.ArchiveFetchWaiting()
	defer waited()
	for {
		var unwanted chan struct{} // nil, never ready, for a download begun
		if !begun {
			f.mu.Lock()
			f.waiting = true
			unwanted = f.unwanted
			gone := f.refs == 1 // the clients left before it waited
			f.mu.Unlock()
			if gone && fr.dropUnwanted(f) {
				return errUnwanted
			}
		}
		select {
		case fr.slots <- struct{}{}:
			f.mu.Lock()
			f.waiting = false
			f.mu.Unlock()
			f.slotDone = func() { <-fr.slots }
			return nil
		case <-ctx.Done():
			return fmt.Errorf("waiting for one of the %d origin download slots: %w", cap(fr.slots), ctx.Err())
		case <-unwanted:
			if fr.dropUnwanted(f) {
				return errUnwanted
			}
		}
	}
}

// giveSlotBack gives back the origin download slot f holds, if any; on
// the fetch's goroutine.
func (f *Download) giveSlotBack() {
	if f.slotDone != nil {
		f.slotDone()
		f.slotDone = nil
	}
}

// trySlot takes one of the origin download slots for f if one is free.
func (fr *Fetcher) trySlot(f *Download) bool {
	select {
	case fr.slots <- struct{}{}:
		f.slotDone = func() { <-fr.slots }
		return true
	default:
		return false
	}
}

// dropUnwanted takes f out of the downloads under way when no client
// holds it, under the lock joins take it under: none can join it after.
func (fr *Fetcher) dropUnwanted(f *Download) bool {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	f.mu.Lock()
	unwanted := f.refs == 1
	f.mu.Unlock()
	if unwanted && fr.inflight[f.key] == f {
		delete(fr.inflight, f.key)
	}
	return unwanted
}

// leaseRounds bounds the times a queued download gives the shared tier's
// lease back to wait for a download slot, and a slot back to wait for
// another replica's lease (see openSource): past it, it keeps the lease
// while it waits for a slot.
const leaseRounds = 3

// openSource opens the archive's bytes for the fetch f: from the store
// beyond the cache when it has the archive, else from the origin (under
// its lease when there is a shared tier, so that of all replicas one
// downloads it while the others wait for it to appear in the tier; see
// Copies), once one of the origin download slots is f's. f holds neither
// while it waits for the other: the lease goes back while f waits for a
// slot, so that the other replicas asking for the archive do not wait
// behind this replica's queue, and the slot goes back while f waits for
// another replica's download, so that this replica's other downloads do
// not wait behind it (up to leaseRounds times each).
func (fr *Fetcher) openSource(ctx context.Context, f *Download, p addrs.Provider, a records.ArchiveRecord) (io.ReadCloser, int64, error) {
	s := fr
	onWait := func() { // on f's goroutine, as the tier waits for another replica's download
		f.giveSlotBack()
		if hook := fr.hooksNow().Wait; hook != nil {
			hook()
		}
	}
	for round := 1; ; round++ {
		body, size, release, err := s.copies.Archive(ctx, a.SHA256, f.owner, a.Filename, onWait)
		if err != nil {
			return nil, 0, err
		}
		if body != nil {
			f.giveSlotBack() // a copy from the tier takes no slot
			f.fromShared = true
			return body, size, nil
		}
		if release == nil || f.slotDone != nil || fr.trySlot(f) || round == leaseRounds {
			f.lease = release
			break
		}
		// Every slot is taken: the lease goes back while f waits for
		// one; with a slot, f asks the tier again (another replica may
		// have stored the archive meanwhile, or be downloading it).
		release(context.WithoutCancel(ctx))
		if err := fr.takeSlot(ctx, f, false); err != nil {
			return nil, 0, err
		}
	}
	if f.slotDone == nil {
		if err := fr.takeSlot(ctx, f, false); err != nil {
			return nil, 0, err
		}
	}
	f.originDone = s.metrics.ArchiveFetchStarted()
	return s.origin.OpenArchive(ctx, p, a.URL)
}

// share puts the archive of f, once committed to the cache, in the shared
// tier (unless it came from there), then gives up f's lease.
func (fr *Fetcher) share(ctx context.Context, f *Download, a records.ArchiveRecord) {
	if f.lease != nil {
		// After the upload: a waiting replica that sees the lease gone
		// must find the archive.
		defer f.lease(context.WithoutCancel(ctx))
	}
	if f.fromShared {
		return
	}
	fr.copies.ShareArchive(ctx, a.SHA256, a.Filename)
}
