//go:build unix

package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
)

// TestSharedStoreRefusesAnAWSFIFOAtOnce: the AWS SDK reads the file
// AWS_CA_BUNDLE names with a plain read, which waits for ever on a FIFO.
// A start with shared_store, a reload that adds it (holding the reload
// lock) and config check of that file refuse it at once, naming
// AWS_CA_BUNDLE, the path and what it is (config check and the reload at
// the shared_store line of the file), instead of waiting; the
// configuration in force stays. Each is given 10 seconds: then the FIFO
// is opened for writing and closed, which ends the read, and the test
// fails.
func TestSharedStoreRefusesAnAWSFIFOAtOnce(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false } // no TFMIRROR_ variables
	dir := t.TempDir()
	key := filepath.Join(dir, "shared.key")
	writePrivate(t, key, strings.Repeat("k", 40))
	fifo := filepath.Join(dir, "ca-bundle.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	s3test.NoAWSConfig(t, map[string]string{"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull})
	t.Setenv("AWS_CA_BUNDLE", fifo)
	// within runs fn, and fails the test when it has not returned in 10
	// seconds, after ending the read it waits on.
	within := func(t *testing.T, what string, fn func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { defer close(done); fn() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
				f.Close()
			}
			<-done
			t.Fatalf("%s still waited on the FIFO AWS_CA_BUNDLE names after 10s", what)
		}
	}
	check := func(t *testing.T, what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "AWS_CA_BUNDLE") || !strings.Contains(err.Error(), fifo) || !strings.Contains(err.Error(), "a FIFO") {
			t.Errorf("%s with AWS_CA_BUNDLE a FIFO: %v; want it refused naming AWS_CA_BUNDLE, the path and what it is", what, err)
		}
	}

	d := t.TempDir()
	conf := filepath.Join(d, "tfmirror.hcl")
	writePrivate(t, conf, "log_level = \"info\"\n")
	args := []string{"--config", conf, "--data-dir", filepath.Join(d, "data"), "--insecure-http"}
	e, err := parseServeConfig(args, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m, err := newServer(e.Config, slog.New(slog.DiscardHandler), overrides{})
	if err != nil {
		t.Fatalf("start without shared_store: %v", err)
	}
	t.Cleanup(func() { m.shutdown(context.Background()) })
	level := new(slog.LevelVar)
	if err := m.useConfig(e, reloadServeConfig(args, noEnv, e.Config), level); err != nil {
		t.Fatal(err)
	}
	writePrivate(t, conf, "log_level = \"debug\"\n"+
		"shared_store = \"s3://bucket/prefix?endpoint=http://127.0.0.1:9\"\n"+
		"shared_store_key_file = \""+key+"\"\n")

	within(t, "a start with shared_store", func() {
		e, err := parseServeConfig(args, noEnv, io.Discard)
		if err != nil {
			t.Error(err)
			return
		}
		e.Config.DataDir = t.TempDir()
		m, err := newServer(e.Config, slog.New(slog.DiscardHandler), overrides{})
		if err == nil {
			m.shutdown(context.Background())
		}
		check(t, "a start", err)
	})
	within(t, "a reload adding shared_store", func() {
		_, err := m.reload()
		check(t, "a reload", err)
		if err != nil && !strings.Contains(err.Error(), conf+":2") {
			t.Errorf("reload's error %q does not name the shared_store line %s:2", err, conf)
		}
	})
	if level.Level() != slog.LevelInfo {
		t.Errorf("log level %v after the refused reload, want the one in force (info)", level.Level())
	}
	if got := m.conf.Load().Current().Config.SharedStore; got != "" {
		t.Errorf("shared_store %q in force after the refused reload, want none", got)
	}
	within(t, "config check", func() {
		var stdout, stderr bytes.Buffer
		code := runConfig([]string{"check", conf}, noEnv, &stdout, &stderr)
		if code != 1 {
			t.Errorf("config check: exit status %d, want 1:\n%s%s", code, stdout.String(), stderr.String())
		}
		check(t, "config check", errorsIn(stderr.String()))
		if !strings.Contains(stderr.String(), conf+":2") {
			t.Errorf("config check's errors do not name the shared_store line %s:2:\n%s", conf, stderr.String())
		}
	})
}

// errorsIn is text as an error, nil when empty.
func errorsIn(text string) error {
	if text == "" {
		return nil
	}
	return textError(text)
}

type textError string

func (e textError) Error() string { return string(e) }
