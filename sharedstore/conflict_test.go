package sharedstore_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// conflictingStore is an S3 endpoint that answers the first conflicts
// writes of each key 409 (an operation on the object under way), then
// stores them as lenientStore does.
type conflictingStore struct {
	lenientStore
	conflicts int
	mu        sync.Mutex
	puts      map[string]int
}

func (c *conflictingStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPut {
		c.mu.Lock()
		c.puts[r.URL.Path]++
		n := c.puts[r.URL.Path]
		c.mu.Unlock()
		if n <= c.conflicts {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>OperationAborted</Code><Message>A conflicting conditional operation is currently in progress against this resource. Try again.</Message></Error>`)
			return
		}
	}
	c.lenientStore.ServeHTTP(w, r)
}

func (c *conflictingStore) putsOf(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.puts[path]
}

// A record's write answered 409 (S3's OperationAborted, "try again"; an
// S3 server over a file system whose directory for the key a concurrent
// removal took away) is written again, shortly, and stored: the record
// is shared, and the breaker counts no failure. A store that answers 409
// to every try is asked a bounded number of times, and the write fails.
func TestPutMetaTriesAgainAfterAConflict(t *testing.T) {
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": s3test.AccessKey, "AWS_SECRET_ACCESS_KEY": s3test.SecretKey,
		"AWS_REGION": s3test.Region, "AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
		"AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
	const path = "/tfm/replicas/a/meta/versions/registry.test/acme/thing"
	for _, tc := range []struct {
		name      string
		conflicts int
		wantPuts  int
		wantOK    bool
	}{
		{name: "one conflict", conflicts: 1, wantPuts: 2, wantOK: true},
		{name: "two conflicts", conflicts: 2, wantPuts: 3, wantOK: true},
		{name: "always", conflicts: 1 << 30, wantPuts: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &conflictingStore{conflicts: tc.conflicts, puts: map[string]int{}}
			hs := httptest.NewServer(fake)
			t.Cleanup(hs.Close)
			s, err := sharedstore.Open(context.Background(), sharedstore.Config{
				URL:  "s3://tfm/replicas/a?endpoint=" + hs.URL + "&region=" + s3test.Region + "&path_style=true",
				Keys: testKeys(t), CallTimeout: 5 * time.Second, BreakerThreshold: 1})
			if err != nil {
				t.Fatal(err)
			}
			err = s.PutMeta(context.Background(), "versions/registry.test/acme/thing", map[string]any{"versions": []string{"1.0.0"}})
			if (err == nil) != tc.wantOK {
				t.Fatalf("PutMeta: %v, want success %v", err, tc.wantOK)
			}
			if got := fake.putsOf(path); got != tc.wantPuts {
				t.Errorf("%d writes of the record, want %d", got, tc.wantPuts)
			}
			if tc.wantOK {
				if raw, _, err := s.GetMeta(context.Background(), "versions/registry.test/acme/thing"); err != nil || len(raw) == 0 {
					t.Errorf("the record written after the conflict reads back %s, %v", raw, err)
				}
				if setAside, failing := s.Health(); setAside != nil || failing != nil {
					t.Errorf("the store after a write that conflicted: %v, %v; want it healthy", setAside, failing)
				}
			}
		})
	}
}
