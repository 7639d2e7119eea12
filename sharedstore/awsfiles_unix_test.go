//go:build unix

package sharedstore_test

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// returnsWithin runs fn and fails the test when it has not returned
// within d; then it opens the FIFO fifo for writing and closes it, which
// ends the read fn waits on, so that no goroutine is left behind.
func returnsWithin(t *testing.T, d time.Duration, fifo string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
			f.Close()
		}
		<-done
		t.Fatalf("still waiting after %s on the FIFO %s", d, fifo)
		return nil
	}
}

// TestOpenRefusesAnAWSFileThatIsNoRegularFile: the AWS SDK reads the
// files its variables name (and ~/.aws/config, ~/.aws/credentials), and
// those its profile names, with plain reads, which wait for ever on a
// FIFO. Open and CheckAWSConfig
// refuse such a file at once, naming the variable, the path and what it
// is, instead of waiting; the null device, which reads as empty, is
// taken, as a regular file is.
func TestOpenRefusesAnAWSFileThatIsNoRegularFile(t *testing.T) {
	keys, err := sharedstore.NewKeys([]byte(strings.Repeat("k", 32)), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sharedstore.Config{URL: "s3://bucket/prefix?endpoint=http://127.0.0.1:9&region=eu-west-1", Keys: keys}
	for _, variable := range []string{"AWS_CA_BUNDLE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "~/.aws/config"} {
		t.Run(variable, func(t *testing.T) {
			fifo := filepath.Join(t.TempDir(), "aws-fifo")
			vars := map[string]string{variable: fifo}
			want := variable
			if variable == "~/.aws/config" {
				vars, want = nil, "AWS_CONFIG_FILE"
			}
			s3test.NoAWSConfig(t, vars)
			if vars == nil {
				// The SDK's default, ~/.aws/config of the home it
				// found when it was loaded, made this test's.
				fifo = filepath.Join(os.Getenv("HOME"), ".aws", "config")
				if err := os.Mkdir(filepath.Dir(fifo), 0o700); err != nil {
					t.Fatal(err)
				}
				defaults := config.DefaultSharedConfigFiles
				config.DefaultSharedConfigFiles = []string{fifo}
				t.Cleanup(func() { config.DefaultSharedConfigFiles = defaults })
			}
			if variable == "AWS_WEB_IDENTITY_TOKEN_FILE" {
				t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/mirror")
			}
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			for name, fn := range map[string]func() error{
				"CheckAWSConfig": func() error { return sharedstore.CheckAWSConfig(context.Background(), cfg) },
				"Open": func() error {
					_, err := sharedstore.Open(context.Background(), cfg)
					return err
				},
			} {
				err := returnsWithin(t, 10*time.Second, fifo, fn)
				if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fifo) || !strings.Contains(err.Error(), "a FIFO") {
					t.Errorf("%s with %s a FIFO: %v; want it refused naming %s, the path and what it is", name, variable, err, want)
				}
			}
		})
	}

	// The files the profile read names: its ca_bundle, and the
	// web_identity_token_file of it or of its source profile.
	for _, tc := range []struct{ name, profile, want string }{
		{"ca_bundle", "[profile mirror]\nca_bundle = FIFO\n", "the ca_bundle of AWS profile mirror"},
		{"web_identity_token_file", "[profile mirror]\nrole_arn = arn:aws:iam::123456789012:role/mirror\nsource_profile = base\n" +
			"[profile base]\nrole_arn = arn:aws:iam::123456789012:role/base\nweb_identity_token_file = FIFO\n", "the web_identity_token_file of AWS profile base"},
	} {
		t.Run("a profile's "+tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fifo := filepath.Join(dir, "aws-fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			conf := filepath.Join(dir, "aws-config")
			if err := os.WriteFile(conf, []byte(strings.ReplaceAll(tc.profile, "FIFO", fifo)), 0o600); err != nil {
				t.Fatal(err)
			}
			s3test.NoAWSConfig(t, map[string]string{"AWS_CONFIG_FILE": conf, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull, "AWS_PROFILE": "mirror"})
			err := returnsWithin(t, 10*time.Second, fifo, func() error {
				_, err := sharedstore.Open(context.Background(), cfg)
				return err
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), fifo) || !strings.Contains(err.Error(), "a FIFO") {
				t.Errorf("Open with %s a FIFO: %v; want it refused naming %q, the path and what it is", tc.name, err, tc.want)
			}
		})
	}

	t.Run("the null device and regular files", func(t *testing.T) {
		ca := filepath.Join(t.TempDir(), "ca.pem")
		srv := httptest.NewTLSServer(http.NotFoundHandler())
		srv.Close()
		if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		s3test.NoAWSConfig(t, map[string]string{"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull, "AWS_CA_BUNDLE": ca})
		if err := sharedstore.CheckAWSConfig(context.Background(), cfg); err != nil {
			t.Errorf("CheckAWSConfig with the null device and a regular CA bundle: %v", err)
		}
	})
}
