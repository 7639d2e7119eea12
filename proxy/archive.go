package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/cache"
	"github.com/tfmirror/tfmirror/discovery"
	"github.com/tfmirror/tfmirror/verify"
)

// copyBufferSize is the unit in which archive bytes move from the origin to
// the cache and from the cache to clients.
const copyBufferSize = 256 << 10

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

func (s *Server) serveArchive(w http.ResponseWriter, r *http.Request, p discovery.Provider, v versions.Version, pl discovery.Platform) {
	if !s.wanted(pl.String()) {
		s.fail(w, r, fmt.Errorf("%w: %s is not served by this mirror", ErrPlatformNotFound, pl))
		return
	}
	a, err := s.archiveFor(r.Context(), p, v, pl.String())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if s.serveBlob(w, r, a.SHA256) {
		s.metrics.CacheLookup("archive", true)
		return
	}
	f, leader := s.archives.join(p, a)
	if f == nil { // committed since we looked
		if s.serveBlob(w, r, a.SHA256) {
			s.metrics.CacheLookup("archive", true)
			return
		}
		s.fail(w, r, errors.New("archive vanished from the cache"))
		return
	}
	defer f.release()
	s.metrics.CacheLookup("archive", false)
	state := "miss"
	if !leader {
		state = "coalesced"
		s.metrics.Coalesced("archive")
	}
	s.streamFetch(w, r, f, state)
}

// archiveFor returns the verified archive record for one platform of v.
func (s *Server) archiveFor(ctx context.Context, p discovery.Provider, v versions.Version, pl string) (archiveRecord, error) {
	rec, err := s.packageFor(ctx, p, v, []string{pl}, nil)
	if err != nil {
		return archiveRecord{}, err
	}
	a, ok := rec.Archives[pl]
	if !ok {
		return archiveRecord{}, fmt.Errorf("%w: %s %s has no package for %s", ErrPlatformNotFound, p, v, pl)
	}
	return a, nil
}

// serveBlob serves a cached archive, with Range, If-None-Match and
// If-Modified-Since support. It returns false when the archive is not cached.
func (s *Server) serveBlob(w http.ResponseWriter, r *http.Request, sha string) bool {
	blob, err := s.store.OpenBlob(sha)
	if err != nil {
		if !errors.Is(err, cache.ErrNotFound) {
			s.log.Error("opening cached archive", "sha256", sha, "error", err)
		}
		return false
	}
	defer blob.Close()
	s.setArchiveHeaders(w, sha, "hit")
	http.ServeContent(w, r, "", blob.Info().Created, blob)
	return true
}

func (s *Server) setArchiveHeaders(w http.ResponseWriter, sha, cacheState string) {
	h := w.Header()
	h.Set("Content-Type", "application/zip")
	h.Set("ETag", `"`+sha+`"`)
	h.Set("Cache-Control", s.cacheControl(kindArchive, false))
	h.Set("X-Tfmirror-Cache", cacheState)
}

// streamFetch streams an archive while it is being fetched. Bytes reach the
// client as they arrive, except the final HoldBack bytes, which are sent
// only once the whole archive's sha256 has matched. If the fetch fails the
// response is aborted, so no client ever holds a complete unverified archive.
func (s *Server) streamFetch(w http.ResponseWriter, r *http.Request, f *fetch, cacheState string) {
	ctx := r.Context()
	select {
	case <-f.ready:
	case <-ctx.Done():
		return
	}
	size, err := f.header()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.setArchiveHeaders(w, f.sha, cacheState)
	if size >= 0 {
		w.Header().Set("Content-Length", fmt.Sprint(size))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}

	rc := http.NewResponseController(w)
	bufp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bufp)
	buf := *bufp
	var off int64
	for {
		st := f.snapshot()
		if st.err != nil {
			// Headers are gone; only a broken connection tells the
			// client that the body is not to be trusted.
			panic(http.ErrAbortHandler)
		}
		limit := st.written
		if !st.verified {
			limit = max(0, st.written-s.cfg.HoldBack)
		}
		if off < limit {
			n := int(min(int64(len(buf)), limit-off))
			n, err := f.w.ReadAt(buf[:n], off)
			if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
				if f.snapshot().err == nil { // not just the fetch failing meanwhile
					s.log.Error("reading archive being fetched", "sha256", f.sha, "offset", off, "error", err)
				}
				panic(http.ErrAbortHandler)
			}
			if _, err := w.Write(buf[:n]); err != nil {
				return // client went away; the fetch goes on for the others
			}
			off += int64(n)
			continue
		}
		if st.verified && off == st.written {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-st.changed:
		case <-ctx.Done():
			return
		}
	}
}

// fetcher runs at most one origin download per archive (by sha256) and lets
// any number of clients stream from it.
type fetcher struct {
	s        *Server
	mu       sync.Mutex
	inflight map[string]*fetch
	running  sync.WaitGroup
	onJoin   func() // test hook: called for every client that joins or starts a fetch
}

func newFetcher(s *Server) *fetcher {
	return &fetcher{s: s, inflight: make(map[string]*fetch)}
}

// join returns the fetch of a's archive under way, starting one if there is
// none; leader reports whether this call started it. It returns nil when
// the archive is already committed to the cache. The caller must release
// the fetch.
func (fr *fetcher) join(p discovery.Provider, a archiveRecord) (f *fetch, leader bool) {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if fr.onJoin != nil {
		defer fr.onJoin()
	}
	if f, ok := fr.inflight[a.SHA256]; ok {
		f.acquire()
		return f, false
	}
	// A fetch removes itself only after its commit, so under fr.mu an
	// archive is either in flight or committed (or neither).
	if _, err := fr.s.store.StatBlob(a.SHA256); err == nil {
		return nil, false
	}
	f = &fetch{sha: a.SHA256, ready: make(chan struct{}), changed: make(chan struct{}), refs: 2, size: -1}
	fr.inflight[a.SHA256] = f
	fr.running.Add(1)
	go fr.run(f, p, a)
	return f, true
}

func (fr *fetcher) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { fr.running.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (fr *fetcher) remove(f *fetch) {
	fr.mu.Lock()
	if fr.inflight[f.sha] == f {
		delete(fr.inflight, f.sha)
	}
	fr.mu.Unlock()
}

// run downloads the archive on a context of its own, so that no client
// going away cancels it, staging it in the cache as it arrives.
func (fr *fetcher) run(f *fetch, p discovery.Provider, a archiveRecord) {
	s := fr.s
	defer fr.running.Done()
	defer f.release()
	defer fr.remove(f)
	done := s.metrics.ArchiveFetchStarted()
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ArchiveTimeout)
	defer cancel()

	h1, err := fr.download(ctx, f, p, a)
	if err != nil {
		// Failed before aborting the writer, so that no client reading
		// it mistakes the abort for a fault of its own.
		f.fail(err)
		if f.w != nil { // set by download, on this goroutine
			f.w.Abort()
		}
		var verr *verify.Error
		if errors.As(err, &verr) {
			s.metrics.VerificationFailed(string(verr.Reason))
			s.log.Error("archive failed verification; nothing was cached", "provider", p.String(),
				"file", a.Filename, "reason", string(verr.Reason), "error", err)
		} else {
			s.log.Error("archive fetch failed", "provider", p.String(), "file", a.Filename, "error", err)
		}
		return
	}
	// Every byte is verified and clients have been released; store it.
	if err := f.w.Err(); err != nil {
		// The cache could not be written: nothing to commit.
		s.metrics.CacheWriteFailed()
		s.log.Error("archive served but not cached", "provider", p.String(), "file", a.Filename, "error", err)
		return
	}
	if _, err := f.w.Commit(h1); err != nil {
		s.metrics.CacheWriteFailed()
		s.log.Error("archive served but not cached", "provider", p.String(), "file", a.Filename, "error", err)
	}
}

// download copies the origin's archive into the fetch's cache writer,
// checks it against the verified sha256 and checks that it is a provider
// package the clients can install, and returns its h1: hash. Only then is
// the fetch marked verified, which releases the held-back final bytes to
// clients; the writer is not yet committed. On failure the caller aborts
// the writer.
func (fr *fetcher) download(ctx context.Context, f *fetch, p discovery.Provider, a archiveRecord) (string, error) {
	s := fr.s
	body, size, err := s.origin.OpenArchive(ctx, p, a.URL)
	if err != nil {
		return "", err
	}
	defer body.Close()
	if size > s.cfg.MaxArchiveBytes {
		return "", fmt.Errorf("archive %s is %d bytes, more than the %d allowed", a.Filename, size, s.cfg.MaxArchiveBytes)
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
			if w.Written() > s.cfg.MaxArchiveBytes {
				return "", fmt.Errorf("archive %s is larger than the %d bytes allowed", a.Filename, s.cfg.MaxArchiveBytes)
			}
			f.progress(w.Written())
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return "", rerr
		}
	}
	if size >= 0 && w.Written() != size {
		return "", fmt.Errorf("origin sent %d bytes of %s, announced %d", w.Written(), a.Filename, size)
	}
	if got := w.Sum(); got != a.SHA256 {
		return "", &verify.Error{Reason: verify.ReasonChecksum,
			Detail: fmt.Sprintf("%s has sha256 %s, the signed SHA256SUMS says %s", a.Filename, got, a.SHA256)}
	}
	// A signed archive may still be no provider package at all. Checked
	// from the staged bytes; if some of them could not be kept (a full
	// disk), the check cannot run and the archive is not released.
	h1, err := verify.CheckArchive(w, w.Written(), p.Type)
	if err != nil {
		return "", err
	}
	f.verify()
	return h1, nil
}

// fetch is one origin download that clients stream from.
type fetch struct {
	sha   string
	ready chan struct{} // closed once size and w are set, or err

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change below
	size     int64
	w        cache.BlobWriter
	written  int64
	verified bool
	err      error
	refs     int
}

type fetchState struct {
	written  int64
	verified bool
	err      error
	changed  <-chan struct{}
}

func (f *fetch) snapshot() fetchState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fetchState{written: f.written, verified: f.verified, err: f.err, changed: f.changed}
}

// header returns the archive size once ready, or the error that ended the
// fetch before it started.
func (f *fetch) header() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.w == nil {
		return 0, f.err
	}
	return f.size, nil
}

func (f *fetch) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fetch) start(size int64, w cache.BlobWriter) {
	f.mu.Lock()
	f.size, f.w = size, w
	f.mu.Unlock()
	close(f.ready)
}

func (f *fetch) progress(written int64) {
	f.mu.Lock()
	f.written = written
	f.notifyLocked()
	f.mu.Unlock()
}

func (f *fetch) verify() {
	f.mu.Lock()
	f.verified = true
	f.notifyLocked()
	f.mu.Unlock()
}

func (f *fetch) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
	f.notifyLocked()
	if f.w == nil {
		close(f.ready)
	}
}

func (f *fetch) acquire() {
	f.mu.Lock()
	f.refs++
	f.mu.Unlock()
}

// release drops a reference; the last one frees the staged data's memory.
func (f *fetch) release() {
	f.mu.Lock()
	f.refs--
	last := f.refs == 0
	w := f.w
	f.mu.Unlock()
	if last && w != nil {
		w.Close()
	}
}
