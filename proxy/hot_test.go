package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
)

// writeDocument answers as http.ServeContent does (which it calls for
// conditional and Range requests and imitates for the others): same
// status, headers and body for every kind of request.
func TestWriteDocumentIsServeContent(t *testing.T) {
	t.Parallel()
	doc := newDocument([]byte(`{"versions":{"1.0.0":{}}}` + "\n"))
	cacheControl := headerValue("public, max-age=60")
	fail := func(w http.ResponseWriter, _ *http.Request, err error) { writeError(w, err) }
	// What writeDocument did before it wrote plain answers itself (its
	// errors answered as every error is: TestCacheHeaders,
	// TestRangeNotSatisfiableAnsweredAsAnError).
	serveContent := func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", cacheControl[0])
		h.Set("ETag", doc.etag[0])
		ServeCached(w, r, time.Time{}, bytes.NewReader(doc.body), fail)
	}
	tests := []struct {
		name   string
		method string
		header []string
	}{
		{"GET", http.MethodGet, nil},
		{"HEAD", http.MethodHead, nil},
		{"If-None-Match matching", http.MethodGet, []string{"If-None-Match", doc.etag[0]}},
		{"If-None-Match not matching", http.MethodGet, []string{"If-None-Match", `"other"`}},
		{"HEAD If-None-Match matching", http.MethodHead, []string{"If-None-Match", doc.etag[0]}},
		{"If-Match not matching", http.MethodGet, []string{"If-Match", `"other"`}},
		{"If-Modified-Since", http.MethodGet, []string{"If-Modified-Since", "Mon, 02 Jan 2006 15:04:05 GMT"}},
		{"If-Unmodified-Since", http.MethodGet, []string{"If-Unmodified-Since", "Mon, 02 Jan 2006 15:04:05 GMT"}},
		{"Range", http.MethodGet, []string{"Range", "bytes=2-9"}},
		{"Range not satisfiable", http.MethodGet, []string{"Range", "bytes=900-"}},
		{"If-Range without Range", http.MethodGet, []string{"If-Range", doc.etag[0]}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "/x/y/z/index.json", nil)
			for i := 0; i+1 < len(tc.header); i += 2 {
				req.Header.Set(tc.header[i], tc.header[i+1])
			}
			got, want := httptest.NewRecorder(), httptest.NewRecorder()
			writeDocument(got, req, doc, cacheControl, fail)
			serveContent(want, req)
			if got.Code != want.Code {
				t.Errorf("status %d, want %d", got.Code, want.Code)
			}
			for k := range want.Header() {
				if !slices.Equal(got.Header()[k], want.Header()[k]) {
					t.Errorf("%s: %q, want %q", k, got.Header()[k], want.Header()[k])
				}
			}
			for k := range got.Header() {
				if _, ok := want.Header()[k]; !ok {
					t.Errorf("%s: %q, want none", k, got.Header()[k])
				}
			}
			if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
				t.Errorf("body %q, want %q", got.Body, want.Body)
			}
		})
	}
}

// countingEngine counts the calls a request makes to the engine.
type countingEngine struct {
	*served.Packages
	calls atomic.Int64
}

func (e *countingEngine) Versions(ctx context.Context, p addrs.Provider) (*records.VersionList, mirror.ListState, error) {
	e.calls.Add(1)
	return e.Packages.Versions(ctx, p)
}

func (e *countingEngine) Package(ctx context.Context, p addrs.Provider, v versions.Version, pls []addrs.Platform) (*mirror.Package, error) {
	e.calls.Add(1)
	return e.Packages.Package(ctx, p, v, pls)
}

// Warm index.json and VERSION.json are sent again as they were, without
// asking the engine for its records, until an archive is cached (its h1:
// hash joins VERSION.json) or the version list's TTL runs out; stale and
// authenticated answers are never sent again without asking.
func TestWarmDocumentsSkipTheEngine(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	h := newHarness(t, harnessOptions{engine: mirror.Config{VersionsTTL: 10 * time.Minute, Now: clock}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	engine := &countingEngine{Packages: packagesOf(t, h.engine)}
	srv, err := New(Config{Logger: slog.New(slog.DiscardHandler)}, engine)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (calls int64, body string) {
		t.Helper()
		before := engine.calls.Load()
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", path, w.Code, w.Body)
		}
		return engine.calls.Load() - before, w.Body.String()
	}
	for _, file := range []string{"index.json", "1.0.0.json"} {
		path := providerPath(file)
		get(path) // fetched from the origin
		_, want := get(path)
		for range 3 {
			if calls, body := get(path); calls != 0 || body != want {
				t.Errorf("warm %s: %d engine calls, body %s; want none and %s", file, calls, body, want)
			}
		}
	}

	// An archive cached: VERSION.json is made again, with its h1: hash.
	_, before := get(providerPath("1.0.0.json"))
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, archivePath("1.0.0", "linux_amd64"), nil))
	h.waitCommitted(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"))
	calls, after := get(providerPath("1.0.0.json"))
	if calls == 0 || after == before {
		t.Errorf("VERSION.json after an archive was cached: %d engine calls, body changed %v; want the engine asked and a new body", calls, after != before)
	}
	if calls, _ := get(providerPath("1.0.0.json")); calls != 0 {
		t.Errorf("VERSION.json warm again: %d engine calls, want none", calls)
	}

	// The TTL runs out with the origin down: the engine is asked (and the
	// list served stale) on every request.
	h.origin.SetDown(http.StatusServiceUnavailable)
	now.Add(11 * int64(time.Minute))
	for i := range 2 {
		if calls, _ := get(providerPath("index.json")); calls == 0 {
			t.Errorf("request %d after the TTL ran out: no engine call", i+1)
		}
	}
}

// With client authentication, every request is checked and every
// VERSION.json signed afresh: nothing is sent again as it was.
func TestWarmDocumentsWithAuthAskTheEngine(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	engine := &countingEngine{Packages: packagesOf(t, h.engine)}
	auth, err := NewAuth(AuthConfig{TokenHashes: [][32]byte{sha256.Sum256([]byte(testToken))}, SigningKey: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Logger: slog.New(slog.DiscardHandler), Auth: auth}, engine)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"index.json", "1.0.0.json"} {
		for i := range 3 {
			before := engine.calls.Load()
			req := httptest.NewRequest(http.MethodGet, providerPath(file), nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, req)
			if w.Code != http.StatusOK || engine.calls.Load() == before {
				t.Errorf("%s request %d: status %d, %d engine calls; want 200 and a call", file, i+1, w.Code, engine.calls.Load()-before)
			}
			w = httptest.NewRecorder()
			srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, providerPath(file), nil))
			if w.Code != http.StatusUnauthorized {
				t.Errorf("%s without a token after a warm request: status %d, want 401", file, w.Code)
			}
		}
	}
}

// A document is kept once, under the path its clients send: a path
// spelt with percent-encodings it does not need (hashi%63orp for
// hashicorp), answered as the plain one is, is not kept, so that a
// client cycling through such spellings of one provider cannot push the
// other providers' documents out of the bounded set kept.
func TestWarmDocumentsKeptUnderThePlainPathOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	srv, err := New(Config{Logger: slog.New(slog.DiscardHandler)}, packagesOf(t, h.engine))
	if err != nil {
		t.Fatal(err)
	}
	kept := func() int {
		srv.hot.mu.RLock()
		defer srv.hot.mu.RUnlock()
		return len(srv.hot.docs)
	}
	get := func(path string) string {
		t.Helper()
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", path, w.Code, w.Body)
		}
		return w.Body.String()
	}
	get(providerPath("index.json")) // fetched from the origin
	want := get(providerPath("index.json"))
	if kept() != 1 {
		t.Fatalf("%d documents kept after the plain path, want 1", kept())
	}
	for i := range len(ns) {
		spelt := "/" + originHost + "/" + ns[:i] + fmt.Sprintf("%%%02x", ns[i]) + ns[i+1:] + "/" + typ + "/index.json"
		if got := get(spelt); got != want {
			t.Errorf("%s: %s, want %s", spelt, got, want)
		}
	}
	if kept() != 1 {
		t.Errorf("%d documents kept after %d spellings of one path, want 1", kept(), len(ns))
	}
}
