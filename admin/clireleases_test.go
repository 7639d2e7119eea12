package admin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	relside "github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// cliRig is an admin API whose releases side is before a stand-in release
// origin (terraform 1.5.7 and 1.6.0, tofu 1.8.0, for linux_amd64), its
// keys trusted, served on a socket.
type cliRig struct {
	origin *fakeorigin.Releases
	side   *relside.ReleasesSide
	api    *API
	met    *countingSync
	log    *logbuf.Buffer
	dir    string // the socket's data directory
	post   func(path, body string) (int, []byte)
}

func newCLIRig(t *testing.T) *cliRig {
	t.Helper()
	o, err := fakeorigin.StartReleases()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	o.Add("hashicorp", "terraform", "1.5.7", "linux_amd64")
	o.Add("hashicorp", "terraform", "1.6.0", "linux_amd64")
	o.Add("opentofu", "tofu", "1.8.0", "linux_amd64")
	r := &cliRig{origin: o, side: relside.StartReleasesSide(t, o, releases.Config{}),
		met: &countingSync{outcomes: map[string]int{}}, log: &logbuf.Buffer{}}
	h := newHarness(t, harnessOptions{})
	logger := slog.New(slog.NewJSONHandler(r.log, nil))
	r.api = h.newAPI(t, logger, r.met, Options{Releases: r.side.Served})
	r.dir, r.post = socket(t, r.api)
	return r
}

// TestCLIEnsureThroughTheSocket: through the admin socket, sync lists a
// product's versions and makes sure an archive is cached: fetched once
// and verified (its sha256 the one the origin's signed SHA256SUMS
// lists), then found cached; an archive the origin does not publish is
// said so and fetches nothing. Ensure returns once the archive is in the
// cache. Each ensure is in the audit log and in
// the sync metrics.
func TestCLIEnsureThroughTheSocket(t *testing.T) {
	r := newCLIRig(t)
	ctx := context.Background()
	c, err := Dial(ctx, r.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	vs, err := c.CLIVersions(ctx, CLIRequest{Product: "terraform"})
	if err != nil || !slices.Equal(vs, []string{"1.6.0", "1.5.7"}) {
		t.Fatalf("terraform versions: %v %v", vs, err)
	}
	if vs, err := c.CLIVersions(ctx, CLIRequest{Product: "tofu"}); err != nil || !slices.Equal(vs, []string{"1.8.0"}) {
		t.Fatalf("tofu versions: %v %v", vs, err)
	}

	want := r.origin.Archive("terraform", "1.6.0", "linux_amd64")
	sum := sha256.Sum256(want)
	req := CLIRequest{Product: "terraform", Version: "1.6.0", Platform: "linux_amd64"}
	// A dry run's look fetches no archive.
	look, err := c.LookCLI(ctx, req)
	if err != nil || look.CachedAlready || look.SHA256 != hex.EncodeToString(sum[:]) || look.Held != "" || look.Unpublished {
		t.Fatalf("look before the ensure: %+v %v", look, err)
	}
	if n := r.origin.Hits("/hc/terraform/1.6.0/terraform_1.6.0_linux_amd64.zip"); n != 0 {
		t.Fatalf("a look fetched the archive %d times", n)
	}
	got, err := c.EnsureCLI(ctx, req)
	if err != nil || got.CachedAlready || got.Bytes != int64(len(want)) || got.SHA256 != hex.EncodeToString(sum[:]) ||
		got.Archive != "terraform_1.6.0_linux_amd64.zip" || got.Held != "" || got.Unpublished {
		t.Fatalf("first ensure: %+v %v", got, err)
	}
	if !r.side.Releases.Cached(got.SHA256) {
		t.Fatal("ensure returned before the archive was in the cache")
	}
	again, err := c.EnsureCLI(ctx, req)
	if err != nil || !again.CachedAlready || again.Bytes != got.Bytes || again.SHA256 != got.SHA256 {
		t.Fatalf("second ensure: %+v %v", again, err)
	}
	if look, err := c.LookCLI(ctx, req); err != nil || !look.CachedAlready || look.SHA256 != got.SHA256 {
		t.Fatalf("look once cached: %+v %v", look, err)
	}
	if n := r.origin.Hits("/hc/terraform/1.6.0/terraform_1.6.0_linux_amd64.zip"); n != 1 {
		t.Errorf("the archive was fetched %d times, want 1", n)
	}
	if un, err := c.LookCLI(ctx, CLIRequest{Product: "terraform", Version: "1.6.0", Platform: "windows_amd64"}); err != nil || !un.Unpublished || un.CachedAlready {
		t.Fatalf("look of an unpublished platform: %+v %v", un, err)
	}

	before := r.origin.TotalHits()
	un, err := c.EnsureCLI(ctx, CLIRequest{Product: "terraform", Version: "1.6.0", Platform: "windows_amd64"})
	if err != nil || !un.Unpublished || un.Bytes != 0 {
		t.Fatalf("an unpublished platform: %+v %v", un, err)
	}
	if n := r.origin.TotalHits() - before; n != 0 {
		t.Errorf("an archive the signed SHA256SUMS does not list made %d origin requests", n)
	}
	if r.met.outcomes["fetched"] != 1 || r.met.outcomes["cached"] != 1 || r.met.outcomes["failed"] != 0 {
		t.Errorf("sync metrics: %v", r.met.outcomes)
	}
	lines := logLines(t, r.log, "admin sync: CLI archive ensured")
	var fetched []any
	for _, l := range lines {
		if l["product"] != "terraform" || l["caller_uid"] == nil {
			t.Errorf("audit line %v", l)
		}
		fetched = append(fetched, l["fetched"])
	}
	if !slices.Equal(fetched, []any{true, false, false}) {
		t.Errorf("audit lines' fetched: %v, want true, false, false", fetched)
	}
}

// TestCLIEnsureRefusesWhatFailsVerification: a tampered archive is an
// error, counted as failed, and not cached: the next ensure fetches it
// again.
func TestCLIEnsureRefusesWhatFailsVerification(t *testing.T) {
	r := newCLIRig(t)
	r.origin.Tamper("terraform_1.5.7_linux_amd64.zip")
	body := `{"product":"terraform","version":"1.5.7","platform":"linux_amd64"}`
	for i := range 2 {
		status, ans := r.post("/v1/cli/ensure", body)
		if status == http.StatusOK || !strings.Contains(string(ans), "sha256") {
			t.Fatalf("ensure %d of a tampered archive: %d %s", i+1, status, ans)
		}
	}
	if n := r.origin.Hits("/hc/terraform/1.5.7/terraform_1.5.7_linux_amd64.zip"); n != 2 {
		t.Errorf("the tampered archive was fetched %d times, want 2 (never cached)", n)
	}
	if r.met.outcomes["failed"] != 2 {
		t.Errorf("sync metrics: %v", r.met.outcomes)
	}
}

// TestCLIEnsureHeldByThePolicy: a version the policy denies is answered
// as held, with the policy's reason, and fetches nothing; the version
// list leaves it out.
func TestCLIEnsureHeldByThePolicy(t *testing.T) {
	r := newCLIRig(t)
	r.side.Engine.SetPolicy(enginetest.DecodePolicy(t, `
deny_version "releases.hashicorp.com/hashicorp/terraform" {
  versions = ["1.6.0"]
  reason   = "use 1.5.7"
}
`))
	status, body := r.post("/v1/cli/versions", `{"product":"terraform"}`)
	var vs []string
	if status != http.StatusOK || json.Unmarshal(body, &vs) != nil || !slices.Equal(vs, []string{"1.5.7"}) {
		t.Fatalf("versions under the policy: %d %s", status, body)
	}
	status, body = r.post("/v1/cli/look", `{"product":"terraform","version":"1.6.0","platform":"linux_amd64"}`)
	var look CLIEnsured
	if status != http.StatusOK || json.Unmarshal(body, &look) != nil || !strings.Contains(look.Held, "use 1.5.7") || look.CachedAlready {
		t.Fatalf("look of a denied version: %d %s", status, body)
	}
	status, body = r.post("/v1/cli/ensure", `{"product":"terraform","version":"1.6.0","platform":"linux_amd64"}`)
	var got CLIEnsured
	if status != http.StatusOK || json.Unmarshal(body, &got) != nil || !strings.Contains(got.Held, "use 1.5.7") || got.Bytes != 0 {
		t.Fatalf("ensure of a denied version: %d %s", status, body)
	}
	if n := r.origin.Hits("/hc/terraform/1.6.0/terraform_1.6.0_linux_amd64.zip"); n != 0 {
		t.Errorf("the denied version's archive was fetched")
	}
	if len(r.met.outcomes) != 0 {
		t.Errorf("a held version counted in the sync metrics: %v", r.met.outcomes)
	}
}

// TestCLIRequestsRefused: what a caller sends is checked before anything
// is asked of the origin: every bad product, version, platform and body
// is a 400 (an oversized body too), and an API without a releases side
// answers 409.
func TestCLIRequestsRefused(t *testing.T) {
	r := newCLIRig(t)
	long := strings.Repeat("a", maxCLIProduct+1)
	for _, tc := range []struct{ path, body string }{
		{"/v1/cli/versions", `{}`},
		{"/v1/cli/versions", `{"product":""}`},
		{"/v1/cli/versions", `{"product":"Terraform"}`},
		{"/v1/cli/versions", `{"product":"../terraform"}`},
		{"/v1/cli/versions", `{"product":"terraform/1.6.0"}`},
		{"/v1/cli/versions", `{"product":"terraform\u0000"}`},
		{"/v1/cli/versions", `{"product":"` + long + `"}`},
		{"/v1/cli/versions", `{"product":"terraform","version":"1.6.0"}`},
		{"/v1/cli/versions", `{"product":["terraform"]}`},
		{"/v1/cli/versions", `not json`},
		{"/v1/cli/ensure", `{"product":"terraform","platform":"linux_amd64"}`},
		{"/v1/cli/ensure", `{"product":"terraform","version":"v1.6.0","platform":"linux_amd64"}`},
		{"/v1/cli/ensure", `{"product":"terraform","version":"1.6","platform":"linux_amd64"}`},
		{"/v1/cli/ensure", `{"product":"terraform","version":"1.6.0/../../x","platform":"linux_amd64"}`},
		{"/v1/cli/ensure", `{"product":"terraform","version":"` + strings.Repeat("1", 100) + `.0.0","platform":"linux_amd64"}`},
		{"/v1/cli/ensure", `{"product":"terraform","version":"1.6.0"}`},
		{"/v1/cli/ensure", `{"product":"terraform","version":"1.6.0","platform":"linux"}`},
		{"/v1/cli/ensure", `{"product":"terraform","version":"1.6.0","platform":"linux_amd64/../x"}`},
		{"/v1/cli/ensure", `{"product":"terraform","version":"1.6.0","platform":"linux_amd64","pad":"` + strings.Repeat("x", maxRequest) + `"}`},
		{"/v1/cli/look", `{"product":"terraform","version":"v1.6.0","platform":"linux_amd64"}`},
		{"/v1/cli/look", `{"product":"terraform","version":"1.6.0","platform":"linux_amd64/../x"}`},
	} {
		status, body := r.post(tc.path, tc.body)
		if status != http.StatusBadRequest {
			t.Errorf("%s %.100s: %d %s, want 400", tc.path, tc.body, status, body)
		}
	}
	if n := r.origin.TotalHits(); n != 0 {
		t.Errorf("refused requests made %d origin requests", n)
	}

	// A product this mirror does not serve: 404, from the releases side.
	if status, body := r.post("/v1/cli/versions", `{"product":"vault"}`); status != http.StatusNotFound {
		t.Errorf("an unserved product: %d %s, want 404", status, body)
	}

	h := newHarness(t, harnessOptions{})
	_, post := socket(t, h.newAPI(t, nil, nil, Options{}))
	if status, body := post("/v1/cli/versions", `{"product":"terraform"}`); status != http.StatusConflict {
		t.Errorf("versions without a releases side: %d %s, want 409", status, body)
	}
	if status, body := post("/v1/cli/look", `{"product":"terraform","version":"1.6.0","platform":"linux_amd64"}`); status != http.StatusConflict {
		t.Errorf("look without a releases side: %d %s, want 409", status, body)
	}
	if status, body := post("/v1/cli/ensure", `{"product":"terraform","version":"1.6.0","platform":"linux_amd64"}`); status != http.StatusConflict {
		t.Errorf("ensure without a releases side: %d %s, want 409", status, body)
	}
}

// TestCLIRefusesUnknownCaller: the CLI calls are behind the socket's
// guard like every admin call: a request whose caller's credentials were
// not read is refused and asks nothing of the origin.
func TestCLIRefusesUnknownCaller(t *testing.T) {
	r := newCLIRig(t)
	srv := httptest.NewServer(r.api.Handler())
	defer srv.Close()
	for _, p := range []string{"/v1/cli/versions", "/v1/cli/ensure", "/v1/cli/look"} {
		resp, err := http.Post(srv.URL+p, "application/json", strings.NewReader(`{"product":"terraform","version":"1.6.0","platform":"linux_amd64"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s from an unknown caller: %d, want 403", p, resp.StatusCode)
		}
	}
	if n := r.origin.TotalHits(); n != 0 {
		t.Errorf("refused requests reached the origin %d times", n)
	}
}

// TestCLIClientOfAnEarlierServe: a serve without the CLI routes (an
// earlier release) answers 404 without an ErrorBody; the client says
// what that means instead of "not found".
func TestCLIClientOfAnEarlierServe(t *testing.T) {
	c := dialEarlierServe(t)
	if _, err := c.CLIVersions(context.Background(), CLIRequest{Product: "terraform"}); err == nil || !strings.Contains(err.Error(), "earlier release") {
		t.Fatalf("versions from an earlier serve: %v", err)
	}
	if _, err := c.EnsureCLI(context.Background(), CLIRequest{Product: "terraform", Version: "1.6.0", Platform: "linux_amd64"}); err == nil || !strings.Contains(err.Error(), "earlier release") {
		t.Fatalf("ensure from an earlier serve: %v", err)
	}
}

// dialEarlierServe is a client of an admin socket whose server has no
// route at all, as a serve of an earlier release has none of the routes
// added since: it answers every call 404 without an ErrorBody.
func dialEarlierServe(t *testing.T) *Client {
	t.Helper()
	dir := t.TempDir()
	ln, err := Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NewServeMux()} // every path: 404 page not found
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	c, err := Dial(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestCLIEnsureKeepsOpenTofusCosignFiles: tenv's artifact mirror mode
// downloads a stable OpenTofu release's cosign signature and certificate
// (tofu_VERSION_SHA256SUMS.sig, .pem) before it checks anything, with or
// without cosign, and fails the install when they are answered 404. A
// sync that ensures an OpenTofu archive keeps them too, so that a sealed
// mirror on the same data directory, or one an export of it was imported
// into, serves them: the door fetches them only when a client asks.
// A release published without them is ensured all the same.
func TestCLIEnsureKeepsOpenTofusCosignFiles(t *testing.T) {
	r := newCLIRig(t)
	r.origin.Add("opentofu", "tofu", "1.8.1", "linux_amd64")
	r.origin.Withhold("tofu_1.8.1_SHA256SUMS.sig", true)
	r.origin.Withhold("tofu_1.8.1_SHA256SUMS.pem", true)
	ctx := context.Background()
	c, err := Dial(ctx, r.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := c.EnsureCLI(ctx, CLIRequest{Product: "tofu", Version: "1.8.0", Platform: "linux_amd64"}); err != nil || got.Unpublished || got.Held != "" {
		t.Fatalf("ensure: %+v %v", got, err)
	}
	var held []string
	if err := r.side.Releases.AirGap().Held(func(h releases.HeldVersion) error {
		if h.Version != "1.8.0" {
			return nil
		}
		for name := range h.PassedThrough {
			held = append(held, name)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(held)
	if want := []string{"tofu_1.8.0_SHA256SUMS.pem", "tofu_1.8.0_SHA256SUMS.sig"}; !slices.Equal(held, want) {
		t.Errorf("the cache holds the files passed through %q after the ensure, want %q", held, want)
	}

	// Published without them: ensured all the same.
	if got, err := c.EnsureCLI(ctx, CLIRequest{Product: "tofu", Version: "1.8.1", Platform: "linux_amd64"}); err != nil || got.Unpublished || got.Held != "" || got.Bytes == 0 {
		t.Fatalf("ensure of a release without cosign files: %+v %v", got, err)
	}
}
