package sharedstore_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// Health's text is /readyz's "shared_store" and the status page's
// health.shared_store_error, both answered to anyone who reaches the
// mirror, with or without a client token (docs/operations.md: the Health
// block "names no provider"; the store's location and endpoint are shown
// only to a request with a token). So it must name neither the bucket, its
// prefix, the endpoint, nor the object a call failed on: a version list's
// key is "meta/versions/HOST/NAMESPACE/TYPE", a private provider's name.
// The log keeps the full error.
func TestHealthNamesNoBucketEndpointOrObject(t *testing.T) {
	for _, kv := range [][2]string{{"AWS_ACCESS_KEY_ID", "AKIATESTTESTTEST"}, {"AWS_SECRET_ACCESS_KEY", "testsecrettestsecret"},
		{"AWS_REGION", "us-east-1"}, {"AWS_CONFIG_FILE", os.DevNull}, {"AWS_SHARED_CREDENTIALS_FILE", os.DevNull},
		{"AWS_EC2_METADATA_DISABLED", "true"}} {
		t.Setenv(kv[0], kv[1])
	}
	// An endpoint on loopback where nothing listens: every call fails.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := ln.Addr().String()
	ln.Close()
	s, err := sharedstore.Open(context.Background(), sharedstore.Config{
		URL:  "s3://corp-tf-bucket/mirror-prefix?endpoint=http://" + endpoint + "&path_style=true",
		Keys: testKeys(t), StoreID: "replicas", BreakerThreshold: 1, BreakerCooldown: time.Minute, CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetMeta(context.Background(), "versions/tf.corp.example/acme/secretproject"); err == nil {
		t.Fatal("a call to an endpoint where nothing listens succeeded")
	}
	herr, _ := s.Health()
	if herr == nil {
		t.Fatal("Health is nil with the breaker open")
	}
	for _, secret := range []string{"corp-tf-bucket", "mirror-prefix", "secretproject", endpoint} {
		if strings.Contains(herr.Error(), secret) {
			t.Errorf("Health names %q, which /readyz and the status page show to anyone: %v", secret, herr)
		}
	}
}

// An endpoint with credentials in its userinfo is refused, as the s3://
// URL's own userinfo is: credentials come from the standard AWS sources,
// and shared_store is no secret setting, so tfmirror config check prints
// it, the status page's configuration lists it and the log names it as it
// was given. The refusal does not quote the password either.
func TestParseURLRefusesEndpointCredentials(t *testing.T) {
	for _, raw := range []string{
		"s3://bkt/p?endpoint=https://AKIAEXAMPLE:s3cr3tPassw0rd@minio.corp:9000",
		"s3://bkt/p?endpoint=https://s3cr3tPassw0rd@minio.corp:9000&path_style=true",
	} {
		_, err := sharedstore.ParseURL(raw)
		if err == nil {
			t.Errorf("%s: accepted", raw)
			continue
		}
		if strings.Contains(err.Error(), "s3cr3tPassw0rd") {
			t.Errorf("the refusal quotes the password: %v", err)
		}
	}
}

// An endpoint is a base URL: the AWS SDK refuses one with a query or a
// fragment on every call (quoting it into the log), so ParseURL refuses
// it first, saying why and without the part that may hold a token.
func TestParseURLRefusesEndpointQueryOrFragment(t *testing.T) {
	for _, raw := range []string{
		"s3://mybucket/prefix?endpoint=http://127.0.0.1:9/?token=STORETOK6&region=us-east-1&path_style=true",
		"s3://mybucket/prefix?endpoint=http://127.0.0.1:9/%3Ftoken=STORETOK6",
		"s3://mybucket/prefix?endpoint=http://127.0.0.1:9/?",
		"s3://mybucket/prefix?endpoint=http://127.0.0.1:9/%23STORETOK6",
	} {
		_, err := sharedstore.ParseURL(raw)
		if err == nil {
			t.Errorf("%s: accepted", raw)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "STORETOK6") || !strings.Contains(msg, "query or fragment") {
			t.Errorf("%s: refused as %q: it quotes the query, or says not why", raw, msg)
		}
	}
}

// A shared store URL is shown (the status page's configuration, config
// check, a reload's changes) as the status page's health shows its
// parts: the endpoint without its user info, query and fragment, and no
// parameter ParseURL does not know.
func TestShownURL(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"s3://bkt/some/prefix/?endpoint=http://127.0.0.1:9000&region=eu-west-1&path_style=true", "s3://bkt/some/prefix/?endpoint=http://127.0.0.1:9000&region=eu-west-1&path_style=true"},
		{"s3://mybucket/prefix?endpoint=http://127.0.0.1:9/?token=STORETOK6&region=us-east-1&path_style=true", "s3://mybucket/prefix?endpoint=http://127.0.0.1:9/&region=us-east-1&path_style=true"},
		{"s3://bkt/p?path_style=true&endpoint=https://AKIA:STORETOK6@minio.corp:9000/", "s3://bkt/p?endpoint=https://minio.corp:9000/&path_style=true"},
		{"s3://bkt/p?region=eu-west-1&aws_secret=STORETOK6#STORETOK6", "s3://bkt/p?region=eu-west-1"},
		{"s3://u:STORETOK6@bkt", "s3://bkt"},
		{"s3://bkt", "s3://bkt"},
	} {
		if got := sharedstore.ShownURL(tc.raw); got != tc.want {
			t.Errorf("ShownURL(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}

// A call answered slower than SlowCall counts toward the breaker as a
// failure does, but it answered: Health says the store's last calls were
// slow, not that they failed with an error.
func TestHealthSaysASlowAnswerIsSlow(t *testing.T) {
	for _, kv := range [][2]string{{"AWS_ACCESS_KEY_ID", "AKIATESTTESTTEST"}, {"AWS_SECRET_ACCESS_KEY", "testsecrettestsecret"},
		{"AWS_REGION", "us-east-1"}, {"AWS_CONFIG_FILE", os.DevNull}, {"AWS_SHARED_CREDENTIALS_FILE", os.DevNull},
		{"AWS_EC2_METADATA_DISABLED", "true"}} {
		t.Setenv(kv[0], kv[1])
	}
	// An endpoint that answers every call (the start-up check's
	// HeadBucket) at once, and yet slower than SlowCall.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	for _, threshold := range []int{1, 3} {
		s, err := sharedstore.Open(context.Background(), sharedstore.Config{
			URL:  "s3://corp-tf-bucket/mirror-prefix?endpoint=" + srv.URL + "&path_style=true",
			Keys: testKeys(t), StoreID: "replicas", BreakerThreshold: threshold, BreakerCooldown: time.Minute,
			CallTimeout: 5 * time.Second, SlowCall: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Check(context.Background()); err != nil {
			t.Fatalf("the start-up check of a store that answers: %v", err)
		}
		setAside, failing := s.Health()
		herr := failing
		if threshold == 1 {
			herr = setAside
		}
		if herr == nil {
			t.Fatalf("threshold %d, after a slow answer: Health %v, %v", threshold, setAside, failing)
		}
		if !strings.Contains(herr.Error(), "a slow answer") || strings.Contains(herr.Error(), "with an error") {
			t.Errorf("threshold %d, after a call answered slowly: %q, want it said to be a slow answer", threshold, herr)
		}
	}
}

// A store whose reads answer but whose writes are refused (a bucket
// policy or credentials that allow reading only) is failing on the
// status page while its writes fail: its reads reset the breaker's count,
// so that Health said nothing of the writes, and the status page read
// "ok" while nothing this replica fetched reached the other replicas. A
// write that succeeds again ends it.
func TestHealthSaysWritesFailWhileReadsAnswer(t *testing.T) {
	for _, kv := range [][2]string{{"AWS_ACCESS_KEY_ID", "AKIATESTTESTTEST"}, {"AWS_SECRET_ACCESS_KEY", "testsecrettestsecret"},
		{"AWS_REGION", "us-east-1"}, {"AWS_CONFIG_FILE", os.DevNull}, {"AWS_SHARED_CREDENTIALS_FILE", os.DevNull},
		{"AWS_EC2_METADATA_DISABLED", "true"}} {
		t.Setenv(kv[0], kv[1])
	}
	var writable atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && writable.Load():
			w.WriteHeader(http.StatusOK)
		case r.Method == http.MethodPut:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`)
		default:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>`)
		}
	}))
	defer srv.Close()
	s, err := sharedstore.Open(context.Background(), sharedstore.Config{
		URL:  "s3://corp-tf-bucket/mirror-prefix?endpoint=" + srv.URL + "&path_style=true",
		Keys: testKeys(t), StoreID: "replicas", BreakerThreshold: 3, BreakerCooldown: time.Minute,
		CallTimeout: 5 * time.Second, SlowCall: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 5 {
		if err := s.PutMeta(ctx, "versions/h/ns/t", "v"); err == nil {
			t.Fatal("a write the store refuses succeeded")
		}
		if _, _, err := s.GetMeta(ctx, "versions/h/ns/t"); err != nil {
			t.Fatalf("a read the store answers failed: %v", err)
		}
	}
	setAside, failing := s.Health()
	if setAside != nil || failing == nil {
		t.Fatalf("writes refused, reads answered: Health %v, %v; want failing, not set aside", setAside, failing)
	}
	for _, want := range []string{"writes", "403"} {
		if !strings.Contains(failing.Error(), want) {
			t.Errorf("failing %q lacks %q", failing, want)
		}
	}
	if strings.Contains(failing.Error(), "corp-tf-bucket") || strings.Contains(failing.Error(), "versions/h") {
		t.Errorf("failing names the bucket or an object, which the status page shows to anyone: %v", failing)
	}
	writable.Store(true)
	if err := s.PutMeta(ctx, "versions/h/ns/t", "v"); err != nil {
		t.Fatalf("a write the store takes: %v", err)
	}
	if setAside, failing := s.Health(); setAside != nil || failing != nil {
		t.Errorf("writes taken again: Health %v, %v; want neither", setAside, failing)
	}
}
