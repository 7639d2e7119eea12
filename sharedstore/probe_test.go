package sharedstore_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// lenientStore is an S3 endpoint that ignores If-None-Match and If-Match:
// every write it is sent is done. It counts the requests it is sent.
type lenientStore struct {
	mu   sync.Mutex
	objs map[string][]byte
	reqs atomic.Int64
}

func (l *lenientStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.reqs.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.objs == nil {
		l.objs = map[string][]byte{}
	}
	key := r.URL.Path
	switch r.Method {
	case http.MethodPut:
		body, _ := io.ReadAll(r.Body)
		l.objs[key] = body
		sum := md5.Sum(body)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
	case http.MethodGet, http.MethodHead:
		if strings.Count(strings.Trim(key, "/"), "/") == 0 {
			return // the bucket
		}
		body, ok := l.objs[key]
		if !ok {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>`)
			return
		}
		sum := md5.Sum(body)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		w.Write(body)
	case http.MethodDelete:
		delete(l.objs, key)
		w.WriteHeader(http.StatusNoContent)
	}
}

// A store that ignores conditional writes is found out by the probe,
// reported (Health, the observer), and not trusted with leases: every
// replica gets a lease of its own, without a request to the store, and
// downloads for itself.
func TestProbeConditionalIgnored(t *testing.T) {
	fake := &lenientStore{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	ctx := context.Background()
	obs := &observer{}
	open := func(holder string) *sharedstore.Store {
		s, err := sharedstore.Open(ctx, sharedstore.Config{
			URL:    "s3://tfm/p?endpoint=" + srv.URL + "&region=us-east-1&path_style=true",
			Holder: holder, Observer: obs, Keys: testKeys(t)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open("a"), open("b")
	if err, _ := a.Health(); err != nil {
		t.Fatalf("health before the probe: %v", err)
	}
	if err := a.ProbeConditional(ctx); !errors.Is(err, sharedstore.ErrConditionalIgnored) {
		t.Fatalf("probe of a store that ignores conditions: %v", err)
	}
	if err, _ := a.Health(); !errors.Is(err, sharedstore.ErrConditionalIgnored) {
		t.Errorf("health after the probe: %v, want conditional writes ignored", err)
	}
	if obs.conditional.Load() != 1 || obs.count("probe/ignored") != 1 {
		t.Errorf("observer: conditional %d, %d probes ignored", obs.conditional.Load(), obs.count("probe/ignored"))
	}
	fake.mu.Lock()
	if len(fake.objs) != 0 {
		t.Errorf("probe left %d objects", len(fake.objs))
	}
	fake.mu.Unlock()
	// b probes on its first lease, then neither asks the store.
	sha := shaOf([]byte("z"))
	if lb, err := b.TryLease(ctx, sha); err != nil || lb == nil {
		t.Fatalf("b: %v, %v", lb, err)
	}
	before := fake.reqs.Load()
	la, err := a.TryLease(ctx, sha)
	if err != nil || la == nil {
		t.Fatalf("a: %v, %v; want a lease of its own", la, err)
	}
	lb, err := b.TryLease(ctx, sha)
	if err != nil || lb == nil {
		t.Fatalf("b again: %v, %v", lb, err)
	}
	if err := la.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := fake.reqs.Load() - before; n != 0 {
		t.Errorf("%d requests to the store for leases it cannot keep", n)
	}
}

// A store that honours conditional writes passes the probe, leaves no
// probe object behind, and its leases are used.
func TestProbeConditionalHonoured(t *testing.T) {
	srv := startServer(t)
	obs := &observer{}
	s := open(t, srv, "a", nil, obs)
	ctx := context.Background()
	if err := s.ProbeConditional(ctx); err != nil {
		t.Fatal(err)
	}
	if err, _ := s.Health(); err != nil || obs.conditional.Load() != 2 {
		t.Errorf("health %v, observer %d; want honoured", err, obs.conditional.Load())
	}
	if keys := srv.Keys("tfm", "replicas/a/probes/"); len(keys) != 0 {
		t.Errorf("probe objects left: %q", keys)
	}
	sha := shaOf([]byte("w"))
	if l, err := s.TryLease(ctx, sha); err != nil || l == nil {
		t.Fatal(err)
	}
	if keys := srv.Keys("tfm", "replicas/a/leases/"); len(keys) != 1 {
		t.Errorf("leases in the store: %q, want one", keys)
	}
}

// A store that cannot be reached is not judged: leases stay in use, and
// the probe is tried again by TryLease once the breaker's cooldown is
// over.
func TestProbeConditionalUnreachable(t *testing.T) {
	srv := startServer(t)
	c := &clock{now: time.Now()}
	s := open(t, srv, "a", c, nil)
	ctx := context.Background()
	srv.Stop()
	if err := s.ProbeConditional(ctx); err == nil || errors.Is(err, sharedstore.ErrConditionalIgnored) {
		t.Fatalf("probe of a store that is down: %v", err)
	}
	if err, _ := s.Health(); errors.Is(err, sharedstore.ErrConditionalIgnored) {
		t.Errorf("health: %v", err)
	}
	srv.Restart()
	c.Add(time.Minute)
	if l, err := s.TryLease(ctx, shaOf([]byte("v"))); err != nil || l == nil {
		t.Fatalf("lease once the store is back: %v, %v", l, err)
	}
	if keys := srv.Keys("tfm", "replicas/a/leases/"); len(keys) != 1 {
		t.Errorf("leases in the store: %q, want one", keys)
	}
}

// hangingDeletes is an S3 endpoint that honours If-None-Match on its
// writes but never answers a DELETE (until the test ends): a store that
// stops answering in the middle of a probe.
type hangingDeletes struct {
	mu      sync.Mutex
	objs    map[string]bool
	release chan struct{}
}

func (h *hangingDeletes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPut:
		io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.objs[r.URL.Path] && r.Header.Get("If-None-Match") == "*" {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusPreconditionFailed)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code><Message>exists</Message></Error>`)
			return
		}
		h.objs[r.URL.Path] = true
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
	case http.MethodDelete:
		select {
		case <-h.release:
		case <-r.Context().Done():
		}
	}
}

// The probe of conditional writes is bounded by the call's timeout, the
// removal of its probe object included: a store that stops answering
// during the probe holds up neither the probe's caller nor what waits for
// the probe (the next leases, Health and so /readyz).
func TestProbeConditionalBoundedWhenTheStoreHangs(t *testing.T) {
	fake := &hangingDeletes{objs: map[string]bool{}, release: make(chan struct{})}
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(fake.release) })
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": s3test.AccessKey, "AWS_SECRET_ACCESS_KEY": s3test.SecretKey,
		"AWS_REGION": s3test.Region, "AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
		"AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
	s, err := sharedstore.Open(context.Background(), sharedstore.Config{
		URL:  "s3://tfm/replicas/a?endpoint=" + hs.URL + "&region=" + s3test.Region + "&path_style=true",
		Keys: testKeys(t), CallTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ProbeConditional(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, sharedstore.ErrConditionalIgnored) {
			t.Errorf("probe of a store that hangs: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the probe still waits for the store 5s on, its calls' timeout being 200ms")
	}
	health := make(chan error, 1)
	go func() { err, _ := s.Health(); health <- err }()
	select {
	case <-health:
	case <-time.After(5 * time.Second):
		t.Fatal("Health still waits 5s on")
	}
}
