package sharedstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// refusingStore stands before versitygw and answers a GET of the objects
// it was told to refuse as S3 answers one it holds but will not serve as
// it is stored (status and code): until a PUT of the object succeeds,
// which stores it anew, readable.
type refusingStore struct {
	status int
	code   string
	next   http.Handler

	mu      sync.Mutex
	refused map[string]bool // by path
}

func (p *refusingStore) refuse(names ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range names {
		p.refused["/tfm/replicas/a/"+n] = true
	}
}

func (p *refusingStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	refused := p.refused[r.URL.Path]
	p.mu.Unlock()
	switch {
	case refused && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(p.status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>refused as stored</Message></Error>`, p.code)
		return
	case r.Method == http.MethodPut:
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		p.next.ServeHTTP(rec, r)
		if rec.status == http.StatusOK {
			p.mu.Lock()
			delete(p.refused, r.URL.Path)
			p.mu.Unlock()
		}
		return
	}
	p.next.ServeHTTP(w, r)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }

// startRefusing starts a refusingStore on loopback before srv.
func startRefusing(t *testing.T, srv *s3test.Server, status int, code string) (*refusingStore, string) {
	t.Helper()
	target, err := url.Parse(srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	p := &refusingStore{status: status, code: code, refused: map[string]bool{},
		// The host the client signed for is kept: versitygw checks the
		// signature against it.
		next: &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = r.In.Host }}}
	hs := httptest.NewServer(p)
	t.Cleanup(hs.Close)
	return p, fmt.Sprintf("s3://tfm/replicas/a?endpoint=%s&region=%s&path_style=true", hs.URL, s3test.Region)
}

// An archive, its header or a record that the store holds but will not
// serve as it is stored (moved to an archived storage class by a
// lifecycle rule of the bucket: 403 InvalidObjectState; encrypted with a
// customer-provided key: 400 InvalidRequest) is taken as absent, logged
// once, and not counted as a failure of the store: reading it again and
// again does not open the circuit breaker, which would take the store
// away for every other object. The replica's next put writes it again,
// readable, the archive too (which a put keeps when the store has it),
// so that it is read from then on. A retention pass over the bucket
// leaves an unreadable record out and goes on.
func TestUnreadableObjectTakenAsAbsentAndWrittenAgain(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		code   string
	}{{"archived", http.StatusForbidden, "InvalidObjectState"}, {"customer key", http.StatusBadRequest, "InvalidRequest"}} {
		t.Run(c.name, func(t *testing.T) {
			srv := startServer(t)
			refusing, u := startRefusing(t, srv, c.status, c.code)
			obs, log := &observer{}, &logbuf.Buffer{}
			s, err := sharedstore.Open(context.Background(), sharedstore.Config{URL: u, Holder: "a", Keys: testKeys(t),
				CallTimeout: 5 * time.Second, BreakerThreshold: 2, BreakerCooldown: time.Minute, Observer: obs,
				Logger: slog.New(slog.NewTextHandler(log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			data := []byte("an archive a lifecycle rule archived")
			sha := shaOf(data)
			if err := s.PutArchive(ctx, sha, bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatal(err)
			}
			other := []byte("an archive the store serves")
			if err := s.PutArchive(ctx, shaOf(other), bytes.NewReader(other), int64(len(other))); err != nil {
				t.Fatal(err)
			}
			const rec = "versions/registry.terraform.io/hashicorp/random"
			if err := s.PutMeta(ctx, rec, map[string]int{"schema": 2}); err != nil {
				t.Fatal(err)
			}
			refusing.refuse("archives/"+sha, "meta/"+rec)

			for range 5 {
				body, _, err := s.OpenArchive(ctx, sha)
				if err != nil || body != nil {
					t.Fatalf("the refused archive: body %v, %v; want none, and no error", body != nil, err)
				}
				if raw, _, err := s.GetMeta(ctx, rec); err != nil || raw != nil {
					t.Fatalf("the refused record: %s, %v; want none, and no error", raw, err)
				}
			}
			if err := s.Status(); err != nil {
				t.Errorf("the store after refusing one archive and one record 5 times: %v, want in use", err)
			}
			if got, found := readArchive(t, keyed{Store: s}, shaOf(other)); !found || !bytes.Equal(got, other) {
				t.Errorf("another archive while one is refused: found %v", found)
			}
			if n := obs.count("get_archive/unreadable"); n != 5 {
				t.Errorf("%d get_archive calls counted unreadable, want 5", n)
			}
			for _, name := range []string{"archives/" + sha, "meta/" + rec} {
				if n := strings.Count(log.String(), "object=replicas/a/"+name+" "); n != 1 {
					t.Errorf("%s logged %d times, want once:\n%s", name, n, log.String())
				}
			}
			n, err := s.ListMeta(ctx, "versions/", func(string, json.RawMessage) error { return nil })
			if err != nil || n != 1 {
				t.Errorf("the retention pass over the bucket: %d left out, %v; want the refused record left out, and no error", n, err)
			}

			if err := s.PutArchive(ctx, sha, bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatal(err)
			}
			if err := s.PutMeta(ctx, rec, map[string]int{"schema": 2}); err != nil {
				t.Fatal(err)
			}
			if got, found := readArchive(t, keyed{Store: s}, sha); !found || !bytes.Equal(got, data) {
				t.Errorf("the archive written again: found %v, want it read", found)
			}
			if raw, _, err := s.GetMeta(ctx, rec); err != nil || raw == nil {
				t.Errorf("the record written again: %s, %v", raw, err)
			}
		})
	}
}
