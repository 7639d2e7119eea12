package sharedstore_test

import (
	"context"
	"net"
	"os"
	"strings"
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
	herr := s.Health()
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
