// Package s3test starts a real S3-compatible server for tests: versitygw
// with its posix backend, on loopback, in a temporary directory.
//
// The binary is found in $TFMIRROR_VERSITYGW, else .ci/bin/versitygw in
// the module (where .ci/run installs it), else on PATH. When it is
// missing the test is skipped, except in CI ($CI set), where that is a
// failure.
package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Credentials of the server's root account.
const (
	AccessKey = "tfmirror-test"
	SecretKey = "tfmirror-test-secret"
	Region    = "us-east-1"
)

// Server is a running (or stopped) versitygw.
type Server struct {
	t    *testing.T
	bin  string
	root string // posix backend directory
	vers string // where it keeps the older versions of objects ("": it keeps none)
	addr string // 127.0.0.1:PORT
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	log  bytes.Buffer
}

// Binary returns the versitygw binary, skipping or failing t when there is
// none.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TFMIRROR_VERSITYGW"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("TFMIRROR_VERSITYGW: %v", err)
		}
		return p
	}
	if root, err := moduleRoot(); err == nil {
		p := filepath.Join(root, ".ci", "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	const how = "versitygw not found: run .ci/run, or GOBIN=$PWD/.ci/bin go install github.com/versity/versitygw/cmd/versitygw@" + Version +
		", or set TFMIRROR_VERSITYGW"
	if os.Getenv("CI") != "" {
		t.Fatal(how)
	}
	t.Skip(how)
	return ""
}

// Version is the versitygw release .ci/run installs.
const Version = "v1.8.0"

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Start starts versitygw on a free loopback port with a new empty
// directory, and stops it when the test ends.
func Start(t *testing.T) *Server {
	t.Helper()
	return start(t, &Server{t: t, bin: Binary(t), root: t.TempDir()})
}

// StartVersioning is Start with a server that can keep the older versions
// of objects: a bucket whose versioning is enabled (EnableVersioning)
// keeps them.
func StartVersioning(t *testing.T) *Server {
	t.Helper()
	return start(t, &Server{t: t, bin: Binary(t), root: t.TempDir(), vers: t.TempDir()})
}

// start starts s on a free loopback port. The port is found free, closed
// and given to versitygw, which another process may take in between: a
// start that could not bind it is tried again on another port, a few
// times.
func start(t *testing.T, s *Server) *Server {
	t.Helper()
	for attempt := 1; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s.addr = l.Addr().String()
		l.Close()
		err = s.launch()
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || attempt == 5 {
			t.Fatal(err)
		}
		s.log.Reset()
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("versitygw output:\n%s", s.log.String())
		}
	})
	return s
}

// Endpoint is the server's URL.
func (s *Server) Endpoint() string { return "http://" + s.addr }

// URL returns the --shared-store URL of bucket with prefix.
func (s *Server) URL(bucket, prefix string) string {
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&region=%s&path_style=true", bucket, prefix, s.Endpoint(), Region)
}

// Env returns the environment variables that give a client the root
// credentials, and nothing from the user's AWS configuration.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_REGION=" + Region,
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// SetEnv sets Env for the rest of the test.
func (s *Server) SetEnv(t *testing.T) {
	for _, kv := range s.Env() {
		k, v, _ := bytes.Cut([]byte(kv), []byte("="))
		t.Setenv(string(k), string(v))
	}
}

// NoAWSConfig sets the process's AWS variables, for the rest of the
// test, as a machine without AWS configuration has them: a home of its
// own holding no ~/.aws, and every variable the AWS SDK reads a file,
// profile, credential or region from empty; then vars.
func NoAWSConfig(t *testing.T, vars map[string]string) {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	for _, v := range []string{"AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CA_BUNDLE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_ROLE_ARN",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION"} {
		t.Setenv(v, "")
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
}

// Stop stops the server (SIGKILL: nothing may depend on a clean exit) and
// waits for it to exit. Its data stays for Restart.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts the server again on its address and data, waiting until
// it answers (at most 30 seconds).
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.launch(); err != nil {
		s.t.Fatal(err)
	}
}

// errPortTaken is launch's error when versitygw could not bind its port.
var errPortTaken = errors.New("versitygw's port is taken")

// launch starts versitygw on s's address and data and waits until it
// answers (at most 30 seconds).
func (s *Server) launch() error {
	args := []string{"--access", AccessKey, "--secret", SecretKey, "--region", Region,
		"--port", s.addr, "--health", "/health", "--quiet", "posix"}
	if s.vers != "" {
		args = append(args, "--versioning-dir", s.vers)
	}
	cmd := exec.Command(s.bin, append(args, s.root)...)
	cmd.Stdout, cmd.Stderr = &s.log, &s.log
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	done := s.done
	go func() { cmd.Wait(); close(done) }()
	client := &http.Client{Timeout: time.Second}
	for range 300 {
		select {
		case <-done:
			s.cmd = nil
			if strings.Contains(s.log.String(), "address already in use") {
				return fmt.Errorf("%w: %s", errPortTaken, s.log.String())
			}
			return fmt.Errorf("versitygw exited: %s", s.log.String())
		default:
		}
		resp, err := client.Get(s.Endpoint() + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond) // polling a process we do not control
	}
	cmd.Process.Kill()
	<-done
	s.cmd = nil
	return fmt.Errorf("versitygw did not answer on %s within 30s", s.addr)
}

// Client returns an S3 client with the root credentials.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint()),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	})
}

// CreateBucket creates bucket.
func (s *Server) CreateBucket(bucket string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		s.t.Fatal(err)
	}
}

// EnableVersioning turns bucket's versioning on (the server must have
// been started by StartVersioning).
func (s *Server) EnableVersioning(bucket string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Client().PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		s.t.Fatal(err)
	}
}

// Keys lists the keys in bucket under prefix.
func (s *Server) Keys(bucket, prefix string) []string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.Client(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for range 1000 {
		if !p.HasMorePages() {
			return keys
		}
		page, err := p.NextPage(ctx)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	s.t.Fatal("too many pages")
	return nil
}
