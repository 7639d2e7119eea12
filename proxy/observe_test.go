package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/jsonlog"
)

// The access-log line is the same whichever slog handler writes it: the
// fast JSON handler, slog's own JSON handler (which it must match byte for
// byte), or the text handler of --log-format text.
func TestAccessLineWithEveryHandler(t *testing.T) {
	t.Parallel()
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Tfmirror-Cache", "hit")
		w.WriteHeader(http.StatusTeapot)
		w.Write([]byte("short"))
	})
	line := func(h slog.Handler, buf *bytes.Buffer) string {
		req := httptest.NewRequest(http.MethodGet, "/registry.terraform.io/hashicorp/random/index.json?sig=x", nil)
		req.Header.Set("X-Request-Id", "ci-42")
		req.Header.Set("User-Agent", `Terraform/1.9 "quoted"`)
		Instrument(next, slog.New(h), nil).ServeHTTP(httptest.NewRecorder(), req)
		// Time and duration differ from request to request.
		return regexp.MustCompile(`("time":"|time=)[^" ]+|("duration":|duration=)[0-9.µnms]+`).ReplaceAllString(buf.String(), "${1}${2}X")
	}
	var fast, std, text bytes.Buffer
	gotFast := line(jsonlog.New(&fast, nil), &fast)
	gotStd := line(slog.NewJSONHandler(&std, nil), &std)
	gotText := line(slog.NewTextHandler(&text, nil), &text)

	wantJSON := `{"time":"X","level":"INFO","msg":"request","request_id":"ci-42","method":"GET",` +
		`"path":"/registry.terraform.io/hashicorp/random/index.json","route":"index","status":418,"bytes":5,` +
		`"duration":X,"cache":"hit","aborted":false,"user_agent":"Terraform/1.9 \"quoted\"","client":"192.0.2.1"}` + "\n"
	if gotFast != wantJSON {
		t.Errorf("fast JSON handler wrote\n%s\nwant\n%s", gotFast, wantJSON)
	}
	if gotStd != wantJSON {
		t.Errorf("slog's JSON handler wrote\n%s\nwant\n%s", gotStd, wantJSON)
	}
	wantText := `time=X level=INFO msg=request request_id=ci-42 method=GET ` +
		`path=/registry.terraform.io/hashicorp/random/index.json route=index status=418 bytes=5 ` +
		`duration=X cache=hit aborted=false user_agent="Terraform/1.9 \"quoted\"" client=192.0.2.1` + "\n"
	if gotText != wantText {
		t.Errorf("text handler wrote\n%s\nwant\n%s", gotText, wantText)
	}
}

// The access-log line takes jsonlog's way through without allocating.
var _ jsonlog.Fields = (*requestLine)(nil)

// The OCI door's route labels are read as the door reads its routes:
// from the end of the path, whatever words the repository name holds.
func TestOCIRouteLabels(t *testing.T) {
	t.Parallel()
	p := "/v2/providers/registry.terraform.io/"
	d := "sha256:" + strings.Repeat("a", 64)
	for path, want := range map[string]string{
		"/v2/":                                  "oci_ping",
		"/v2/token":                             "oci_token",
		p + "acme/net/tags/list":                "oci_tags",
		p + "acme/net/manifests/1.0.0":          "oci_manifest",
		p + "acme/net/blobs/" + d:               "oci_blob",
		p + "acme/net/referrers/" + d:           "oci_referrers",
		p + "acme/net/blobs/uploads/":           "other",
		p + "acme/manifests/blobs/" + d:         "oci_blob",
		p + "acme/manifests/referrers/" + d:     "oci_referrers",
		p + "blobs/uploads/manifests/1.0.0":     "oci_manifest",
		p + "blobs/uploads/tags/list":           "oci_tags",
		p + "acme/net/manifests/1.0.0/whatever": "other",
	} {
		if got := Route(path); got != want {
			t.Errorf("Route(%s) = %s, want %s", path, got, want)
		}
	}
}

// The CLI releases door's requests have route labels of their own: an
// OpenTofu archive or HashiCorp's product document, whose paths have the
// network mirror's depth, is not counted as a provider archive or
// index.json, nor are the others lumped with unknown paths.
func TestReleasesRouteLabels(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/releases/opentofu/v1.8.1/tofu_1.8.1_linux_amd64.zip":                                    "releases_archive",
		"/releases/hashicorp/terraform/1.9.0/terraform_1.9.0_linux_amd64.zip":                     "releases_archive",
		"/releases/hashicorp/terraform/index.json":                                                "releases",
		"/releases/hashicorp/terraform/1.9.0/index.json":                                          "releases",
		"/releases/hashicorp/terraform/1.9.0/terraform_1.9.0_SHA256SUMS":                          "releases",
		"/releases/opentofu/api.json":                                                             "releases",
		"/releases/":                                                                              "releases",
		"/registry.terraform.io/hashicorp/random/terraform-provider-random_1.0.0_linux_amd64.zip": "archive",
	} {
		if got := Route(path); got != want {
			t.Errorf("Route(%s) = %s, want %s", path, got, want)
		}
	}
}

// panicObserver keeps what Instrument observed of each request.
type panicObserver struct {
	mu   sync.Mutex
	seen map[string]string // route: "code aborted"
}

func (o *panicObserver) ObserveRequest(route string, code int, _ time.Duration, _ int64, aborted bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen[route] = fmt.Sprint(code, " ", aborted)
}

// TestHandlerPanicIsAServerError: a panic in a handler (a bug of the
// mirror's, which net/http recovers and logged through the server's error
// log, at debug) is logged at error with its stack and the request's id,
// and counted as what it is: answered 500 when nothing was sent yet,
// counted as its status and aborted when the answer had begun. It was
// counted as a 200 aborted (never in the 5xx rate the alerts watch) and
// logged at debug only. A deliberate abort (http.ErrAbortHandler: a
// download that failed) is left as it was: no error line of Instrument's.
func TestHandlerPanicIsAServerError(t *testing.T) {
	t.Parallel()
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/": // before any byte: the status page's route
			w.Header().Set("Content-Length", "1000") // set, never sent
			var m map[string]int
			m["boom"]++
		case "/a/b/c/v.zip": // after the status (sent by a flush): an archive's route
			w.Header().Set("Content-Length", "1000")
			http.NewResponseController(w).Flush()
			var m map[string]int
			m["boom"]++
		case "/a/b/c/index.json": // a deliberate abort
			w.WriteHeader(http.StatusOK)
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		}
	})
	var logs bytes.Buffer
	var mu sync.Mutex
	obs := &panicObserver{seen: map[string]string{}}
	srv := httptest.NewUnstartedServer(Instrument(next, slog.New(slog.NewJSONHandler(lockedWriter{w: &logs, mu: &mu}, nil)), obs))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	defer srv.Close()

	resp, err := srv.Client().Get(srv.URL + "/")
	if err != nil {
		t.Fatalf("panic before the answer: %v; want a 500", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "internal error") || resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("panic before the answer: %d %q; want 500, internal error, with its request id", resp.StatusCode, body)
	}
	if resp, err := srv.Client().Get(srv.URL + "/a/b/c/v.zip"); err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Errorf("panic during the answer: read whole; want it broken off")
		}
	}
	if resp, err := srv.Client().Get(srv.URL + "/a/b/c/index.json"); err == nil {
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	srv.Close() // every request's line written

	obs.mu.Lock()
	if got := obs.seen["status"]; got != "500 false" {
		t.Errorf("panic before the answer observed as %q; want 500, not aborted", got)
	}
	if got := obs.seen["archive"]; got != "200 true" {
		t.Errorf("panic during the answer observed as %q; want 200 aborted", got)
	}
	if got := obs.seen["index"]; got != "200 true" {
		t.Errorf("deliberate abort observed as %q; want 200 aborted", got)
	}
	obs.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	var panics []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == "handler panicked" {
			panics = append(panics, m)
		}
	}
	if len(panics) != 2 {
		t.Fatalf("%d panics logged, want 2 (not the deliberate abort):\n%s", len(panics), logs.String())
	}
	for _, m := range panics {
		if m["level"] != "ERROR" || m["request_id"] == "" || !strings.Contains(fmt.Sprint(m["panic"]), "nil map") ||
			!strings.Contains(fmt.Sprint(m["stack"]), "TestHandlerPanicIsAServerError") {
			t.Errorf("panic logged as %v; want an error with its request id, the panic and its stack", m)
		}
	}
}

// A path that names a probe or /metrics only once decoded
// (/%68ealthz) is routed as the router reads it, on its encoded form:
// answered 404, it is logged at info under route "other", not hidden at
// debug and counted among the probes' answers, which alerts leave out.
func TestEncodedProbePathRoutedAsServed(t *testing.T) {
	t.Parallel()
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) })
	for _, path := range []string{"/%68ealthz", "/read%79z", "/%6detrics"} {
		var buf bytes.Buffer
		var routes []string
		obs := observerFunc(func(route string) { routes = append(routes, route) })
		log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		Instrument(next, log, obs).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
		if len(routes) != 1 || routes[0] != "other" {
			t.Errorf("%s counted under routes %v, want other", path, routes)
		}
		if !strings.Contains(buf.String(), `"route":"other","status":404`) {
			t.Errorf("%s answered 404 logged at info as %q, want a line with route other", path, buf.String())
		}
	}
}

// observerFunc is a RequestObserver that hands each request's route to
// its function.
type observerFunc func(route string)

func (f observerFunc) ObserveRequest(route string, _ int, _ time.Duration, _ int64, _ bool) { f(route) }
