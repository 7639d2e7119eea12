package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// logSink collects log output and hands over access-log lines as they are
// written.
type logSink struct {
	mu       sync.Mutex
	all      bytes.Buffer
	requests chan map[string]any
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.all.Write(p)
	s.mu.Unlock()
	var line map[string]any
	if err := json.Unmarshal(p, &line); err != nil {
		return 0, err
	}
	if line["msg"] == "request" {
		s.requests <- line
	}
	return len(p), nil
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all.String()
}

// next returns the next access-log line.
func (s *logSink) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case l := <-s.requests:
		return l
	case <-time.After(time.Minute): // milliseconds unless the machine is loaded
		t.Fatal("no access-log line was written")
		return nil
	}
}

func TestAccessLog(t *testing.T) {
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	sink := &logSink{requests: make(chan map[string]any, 64)}
	tm := startMirror(t, origin, t.TempDir(), sink)
	archive := archiveURL("random", "3.6.0", "linux_amd64")
	size := float64(len(origin.Archive("hashicorp", "random", "3.6.0", "linux_amd64")))
	generated := regexp.MustCompile(`^[0-9a-f]{16}$`)

	tests := []struct {
		name      string
		path      string
		header    []string
		wantID    string // "" = a generated id
		wantPath  string
		status    float64
		bytes     float64 // -1 = any
		cache     string
		beforeRun func()
	}{
		{name: "credentials in header and query", path: tfRegistry + "/hashicorp/random/index.json?sig=secret",
			header: []string{"Authorization", "Bearer secret-token", "X-Request-Id", "ci-job-42.step_1"}, wantID: "ci-job-42.step_1",
			wantPath: "/" + tfRegistry + "/hashicorp/random/index.json", status: 200, bytes: -1},
		{name: "cold archive", path: archive, wantPath: "/" + archive, status: 200, bytes: size, cache: "miss",
			header: []string{"Authorization", "Bearer secret-token"}},
		{name: "warm archive with a malformed request id", path: archive + "?sig=secret", wantPath: "/" + archive, status: 200, bytes: size, cache: "hit",
			header: []string{"X-Request-Id", "not valid!"}, beforeRun: tm.idle},
		{name: "not found, with a forwarding header not read", path: "nope", wantPath: "/nope", status: 404, bytes: -1,
			header: []string{"X-Forwarded-For", "203.0.113.9"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.beforeRun != nil {
				tc.beforeRun()
			}
			resp, body, err := tm.get(tc.path, tc.header...)
			if err != nil {
				t.Fatal(err)
			}
			line := sink.next(t)
			id := resp.Header.Get("X-Request-Id")
			if tc.wantID != "" && id != tc.wantID {
				t.Errorf("X-Request-Id %q, want the client's %q", id, tc.wantID)
			}
			if tc.wantID == "" && !generated.MatchString(id) {
				t.Errorf("X-Request-Id %q, want a generated id", id)
			}
			want := map[string]any{
				"method": "GET", "path": tc.wantPath, "status": tc.status, "cache": tc.cache, "request_id": id,
				"client": "127.0.0.1", // the peer: no proxy is trusted
			}
			for k, v := range want {
				if line[k] != v {
					t.Errorf("log %s = %#v, want %#v", k, line[k], v)
				}
			}
			wantBytes := tc.bytes
			if wantBytes < 0 {
				wantBytes = float64(len(body))
			}
			if line["bytes"] != wantBytes {
				t.Errorf("log bytes = %#v, want %v", line["bytes"], wantBytes)
			}
			if d, ok := line["duration"].(float64); !ok || d <= 0 {
				t.Errorf("log duration = %#v, want a positive number", line["duration"])
			}
		})
	}
	tm.stop()
	select {
	case l := <-sink.requests:
		t.Errorf("more access-log lines than requests: %v", l)
	default:
	}
	out := sink.String()
	for _, secret := range []string{"secret-token", "sig=secret", "Bearer"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log contains %q:\n%s", secret, out)
		}
	}
}

func TestHealthEndpointsAreNotLoggedAtInfo(t *testing.T) {
	sink := &logSink{requests: make(chan map[string]any, 64)}
	tm := startMirror(t, newOrigin(t, fakeorigin.Options{}), t.TempDir(), sink)
	for _, path := range []string{"healthz", "readyz", "metrics"} {
		resp, body, err := tm.get(path)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("/%s: %v %v %s", path, resp, err, body)
		}
	}
	tm.stop()
	select {
	case l := <-sink.requests:
		t.Errorf("probe or scrape logged at info: %v", l)
	default:
	}
}
