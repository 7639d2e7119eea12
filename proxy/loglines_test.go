package proxy

import (
	"bufio"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/jsonlog"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// TestLogLinesBounded: what a client sends is bounded in the log too.
// The access log's line and a door's "request failed" line for one
// request stay within a few KiB, whatever its path and User-Agent: a
// 60 KiB User-Agent of bytes that are not UTF-8, each written \ufffd in
// JSON, made a 360 KiB line, and a long path of such bytes (%FF, three
// bytes each) made two lines of 180 KiB, from one request of 64 KiB: the
// log grew six times as fast as the requests came in; a method may be
// any token, of any length the header limit leaves room for. A path
// longer than any door serves is answered 414 before any door sees it.
func TestLogLinesBounded(t *testing.T) {
	t.Parallel()
	var out logbuf.Buffer
	logger := slog.New(jsonlog.New(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	oci := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger.Info("request failed", "path", r.URL.EscapedPath())
		w.WriteHeader(http.StatusNotFound)
	})
	h := newHarness(t, harnessOptions{cfg: Config{Logger: logger, OCI: mirrorErrorsDoor{oci}, Releases: mirrorErrorsDoor{oci}}})
	srv := httptest.NewServer(Instrument(h.server, logger, nil))
	t.Cleanup(srv.Close)

	ua := strings.Repeat("\xff", 60<<10)
	long := strings.Repeat("%FF", 18<<10)
	for _, tc := range []struct {
		method, path, ua string
		status           int
	}{
		{http.MethodGet, "/", ua, http.StatusOK},
		{http.MethodGet, "/" + originHost + "/" + long + "/x/index.json", "", http.StatusRequestURITooLong},
		{http.MethodGet, "/registry/" + originHost + "/v1/providers/" + long, "", http.StatusRequestURITooLong},
		{http.MethodGet, "/v2/" + long, "", http.StatusRequestURITooLong},
		{http.MethodGet, "/releases/" + long, "", http.StatusRequestURITooLong},
		{http.MethodGet, "/" + strings.Repeat("%FF", 500) + "/x/y/index.json", ua, http.StatusBadRequest},
		{strings.Repeat("M", 60<<10), "/", "", http.StatusMethodNotAllowed},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("User-Agent", tc.ua)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%.20s %.60s...: status %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
		}
	}
	const maxLine = 8 << 10
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	sc.Buffer(nil, 4<<20)
	lines := 0
	for sc.Scan() {
		lines++
		if n := len(sc.Bytes()); n > maxLine {
			t.Errorf("a log line of %d bytes, want at most %d: %.200s...", n, maxLine, sc.Bytes())
		}
	}
	if lines < 7 {
		t.Errorf("%d log lines, want an access log line per request", lines)
	}
}

// mirrorErrorsDoor is a mounted door that answers the refusals of the
// layers in front of it as the mirror protocols do.
type mirrorErrorsDoor struct{ http.Handler }

func (mirrorErrorsDoor) AnswerError(w http.ResponseWriter, _ *http.Request, err error) {
	writeError(w, err)
}

// TestAccessLogUserAgentSendsNoTerminalControls: a User-Agent's C1
// control characters (U+009B, a CSI; U+009D, an OSC: as UTF-8 they are
// bytes a header may carry) and its format characters (U+202E, which
// shows what follows reversed) reach the JSON access log escaped, as
// text, where the log wrote them as they came (JSON escapes only the C0
// ones), and a terminal tailing it (xterm takes C1 controls in UTF-8)
// obeyed them: a cleared screen, a title of the client's.
func TestAccessLogUserAgentSendsNoTerminalControls(t *testing.T) {
	t.Parallel()
	var out logbuf.Buffer
	logger := slog.New(jsonlog.New(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := newHarness(t, harnessOptions{cfg: Config{Logger: logger}})
	srv := httptest.NewServer(Instrument(h.server, logger, nil))
	t.Cleanup(srv.Close)
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", "curl/8\u009b2J\u009d0;owned\u009c\u202eevil")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	log := out.String()
	if !strings.Contains(log, `curl/8`) {
		t.Fatalf("no access log line names the User-Agent:\n%s", log)
	}
	for _, r := range log {
		if r >= 0x80 && r <= 0x9f || r == '\u202e' {
			t.Errorf("the access log wrote %U as it came:\n%q", r, log)
		}
	}
}
