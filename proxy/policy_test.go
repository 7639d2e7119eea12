package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// policyHarness is a mirror whose engine and front door read clock, in
// front of an origin whose test provider has the versions given, each
// signed at the time given before the clock's start.
func policyHarness(t *testing.T, signed map[string]time.Duration) (*harness, *testClock) {
	t.Helper()
	// The cache dates version lists by the real clock: a month's
	// freshness keeps them fresh however far the test moves its clock,
	// so that what ends a kept answer is the policy alone.
	clock := &testClock{now: time.Now().Truncate(time.Second)}
	h := newHarness(t, harnessOptions{cfg: Config{Now: clock.Now}, engine: mirror.Config{Now: clock.Now, VersionsTTL: 30 * day}})
	var vs []string
	for v := range signed {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	h.origin.AddProvider(ns, typ, vs, platforms)
	for v, ago := range signed {
		h.origin.SetSignedAt(ns, typ, v, clock.Now().Add(-ago))
	}
	return h, clock
}

// indexVersions returns the versions index.json lists.
func (h *harness) indexVersions() []string {
	h.t.Helper()
	r := h.get(providerPath("index.json"))
	if r.status != 200 {
		h.t.Fatalf("index.json: %d %s", r.status, r.body)
	}
	var idx struct {
		Versions map[string]any `json:"versions"`
	}
	r.json(h.t, &idx)
	var out []string
	for v := range idx.Versions {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// isHot says whether the front door keeps an answer for path to send
// again without asking the engine for it.
func (h *harness) isHot(path string) bool {
	h.server.hot.mu.RLock()
	defer h.server.hot.mu.RUnlock()
	_, ok := h.server.hot.docs[path]
	return ok
}

const day = 24 * time.Hour

// A warm index.json and VERSION.json, sent from the hot path, change the
// moment the clock crosses the minimum release age of a held version,
// and right after SetPolicy: the policy is never bypassed by an answer
// kept for reuse.
func TestHotDocumentsFollowThePolicy(t *testing.T) {
	t.Parallel()
	h, clock := policyHarness(t, map[string]time.Duration{"1.0.0": 365 * day, "1.1.0": time.Hour})
	h.engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	index, fresh := providerPath("index.json"), providerPath("1.1.0.json")

	for range 2 {
		if got := h.indexVersions(); !slices.Equal(got, []string{"1.0.0"}) {
			t.Fatalf("index.json lists %v, want only 1.0.0", got)
		}
	}
	if !h.isHot(index) {
		t.Fatal("index.json is not kept on the hot path")
	}
	r := h.get(fresh)
	if r.status != 451 || !strings.Contains(string(r.body), "minimum release age") {
		t.Fatalf("1.1.0.json inside the window: %d %s, want 451 naming the age gate", r.status, r.body)
	}
	// One second before the gate nothing changes; at the gate the kept
	// answer ends.
	clock.Add(71*time.Hour - time.Second)
	if got := h.indexVersions(); !slices.Equal(got, []string{"1.0.0"}) {
		t.Fatalf("index.json a second before the gate lists %v", got)
	}
	clock.Add(time.Second)
	if got := h.indexVersions(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("index.json once the gate is crossed lists %v, want both", got)
	}
	for range 2 {
		if r := h.get(fresh); r.status != 200 {
			t.Fatalf("1.1.0.json once the gate is crossed: %d %s", r.status, r.body)
		}
	}
	if !h.isHot(index) || !h.isHot(fresh) {
		t.Fatal("index.json and 1.1.0.json are not kept on the hot path once allowed")
	}

	h.engine.SetPolicy(enginetest.DecodePolicy(t, `
deny_version "`+originHost+"/"+ns+"/"+typ+`" {
  versions = "= 1.1.0"
  reason   = "CVE-2026-1234: use 1.0.0"
}`))
	if got := h.indexVersions(); !slices.Equal(got, []string{"1.0.0"}) {
		t.Fatalf("index.json right after SetPolicy lists %v, want only 1.0.0", got)
	}
	r = h.get(fresh)
	if r.status != 451 || !strings.Contains(string(r.body), "CVE-2026-1234: use 1.0.0") {
		t.Fatalf("1.1.0.json right after SetPolicy: %d %s, want 451 with the reason", r.status, r.body)
	}
	h.engine.SetPolicy(nil)
	if got := h.indexVersions(); !slices.Equal(got, []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("index.json with no policy lists %v", got)
	}
}

// The status page lists what the package policy holds back apart from
// the unsigned imports it withholds: each version with its rule, reason
// and when it becomes available, under a summary line; the JSON form
// carries the same.
func TestStatusPageShowsHeldVersions(t *testing.T) {
	t.Parallel()
	h, clock := policyHarness(t, map[string]time.Duration{
		"1.0.0": 365 * day, "1.0.1": 300 * day, "1.1.0": 7 * time.Hour, "1.2.0": time.Hour,
	})
	addr := originHost + "/" + ns + "/" + typ
	h.engine.SetPolicy(enginetest.DecodePolicy(t, `
minimum_release_age = "48h"
deny_version "`+addr+`" {
  versions = "= 1.0.1"
  reason   = "CVE-2026-1234: use 1.0.0"
}`))
	if got := h.indexVersions(); !slices.Equal(got, []string{"1.0.0"}) {
		t.Fatalf("index.json lists %v, want only 1.0.0", got)
	}

	var st Status
	h.get("/?format=json").json(t, &st)
	signed := clock.Now()
	want := []unsigned.Version{
		{Provider: addr, Version: "1.0.1", Rule: policy.RuleDenyVersion, Reason: "CVE-2026-1234: use 1.0.0"},
		{Provider: addr, Version: "1.1.0", Rule: policy.RuleMinReleaseAge, AvailableAt: signed.Add(41 * time.Hour)},
		{Provider: addr, Version: "1.2.0", Rule: policy.RuleMinReleaseAge, AvailableAt: signed.Add(47 * time.Hour)},
	}
	if len(st.Withheld) != len(want) {
		t.Fatalf("status JSON withheld %+v, want %d versions", st.Withheld, len(want))
	}
	for i, w := range want {
		got := st.Withheld[i]
		if got.Provider != w.Provider || got.Version != w.Version || got.Rule != w.Rule || !got.AvailableAt.Equal(w.AvailableAt) ||
			w.Reason != "" && got.Reason != w.Reason || got.Reason == "" {
			t.Errorf("withheld[%d] = %+v, want %+v", i, got, w)
		}
	}
	if st.HeldBack == nil || st.HeldBack.Versions != 3 || !st.HeldBack.NextAvailableAt.Equal(signed.Add(41*time.Hour)) ||
		st.HeldBack.Text != "held back: 3 versions, next released in 41 h" {
		t.Errorf("status JSON held_back = %+v", st.HeldBack)
	}

	page := string(h.get("/").body)
	held := page[strings.Index(page, `<table id="held">`):]
	held = held[:strings.Index(held, "</table>")]
	for _, s := range []string{"held back: 3 versions, next released in 41 h", "Held back by the package policy"} {
		if !strings.Contains(page, s) {
			t.Errorf("the status page lacks %q", s)
		}
	}
	for _, s := range []string{"1.0.1", "deny_version", "CVE-2026-1234: use 1.0.0", "1.1.0", "1.2.0", "min_release_age",
		signed.Add(41 * time.Hour).UTC().Format("2006-01-02 15:04 UTC")} {
		if !strings.Contains(held, s) {
			t.Errorf("the held-back table lacks %q:\n%s", s, held)
		}
	}
	if strings.Contains(page, `<table id="withheld">`) || strings.Contains(page, "--allow-unsigned-hosts") {
		t.Errorf("versions held by the policy are shown as unsigned imports:\n%s", page)
	}

	// As the clock moves, the summary counts down and drops what is out.
	clock.Add(41 * time.Hour)
	h.indexVersions()
	st = Status{}
	h.get("/?format=json").json(t, &st)
	if st.HeldBack == nil || st.HeldBack.Text != "held back: 2 versions, next released in 6 h" {
		t.Errorf("41 h later, held_back = %+v", st.HeldBack)
	}
	h.engine.SetPolicy(nil)
	raw := h.get("/?format=json").body
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	if _, ok := fields["held_back"]; ok {
		t.Errorf("with no policy the status still sums up held versions: %s", fields["held_back"])
	}
}

// The summary line's wording.
func TestHeldSummaryText(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		held []unsigned.Version
		want string
	}{
		{"one denied", []unsigned.Version{{Version: "1.0.1", Rule: policy.RuleDenyVersion}}, "held back: 1 version"},
		{"hours rounded up", []unsigned.Version{
			{Version: "1.0.1", Rule: policy.RuleDenyVersion},
			{Version: "1.1.0", Rule: policy.RuleMinReleaseAge, AvailableAt: now.Add(40*time.Hour + time.Minute)},
			{Version: "1.2.0", Rule: policy.RuleMinReleaseAge, AvailableAt: now.Add(70 * time.Hour)},
		}, "held back: 3 versions, next released in 41 h"},
		{"minutes", []unsigned.Version{{Version: "1.1.0", Rule: policy.RuleMinReleaseAge, AvailableAt: now.Add(25 * time.Minute)}},
			"held back: 1 version, next released in 25 min"},
		{"due", []unsigned.Version{{Version: "1.1.0", Rule: policy.RuleMinReleaseAge, AvailableAt: now}},
			"held back: 1 version, next released in less than a minute"},
		{"addresses", []unsigned.Version{{Rule: policy.RuleAllowList}, {Rule: policy.RuleDeny}, {Version: "2.0.0", Rule: policy.RuleDenyVersion}},
			"held back: 1 version, 2 addresses refused whole"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			all := append([]unsigned.Version{{Provider: "x/y/z", Version: "0.1.0", Platforms: []string{"linux_amd64"}}}, tc.held...)
			unsigned, held, sum := splitWithheld(all, now)
			if len(unsigned) != 1 || len(held) != len(tc.held) {
				t.Fatalf("parted into %d unsigned and %d held", len(unsigned), len(held))
			}
			if sum == nil || sum.Text != tc.want {
				t.Fatalf("summary %+v, want %q", sum, tc.want)
			}
		})
	}
	if _, _, sum := splitWithheld([]unsigned.Version{{Version: "0.1.0"}}, now); sum != nil {
		t.Fatalf("a summary with nothing held back: %+v", sum)
	}
}

// TestStatusHeldListBounded: the policy refuses an address before any
// origin is asked, whether it exists or not, so a client can have it
// refuse thousands of names it makes up, each remembered as held back
// (to 16,384). A view of the status page lists at most its limit of
// them (those under its prefix, when it has one), with a line on how many
// more there are; the summary counts them all. Before, every view
// listed every one: 3 MB of HTML and 0.4 s of CPU per view, with no token
// needed when client authentication is off.
func TestStatusHeldListBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	h.engine.SetPolicy(enginetest.DecodePolicy(t, `allow = ["`+originHost+`/`+ns+`/*"]`))
	const invented = 300
	for i := range invented {
		if r := h.get(fmt.Sprintf("/%s/made-up-%03d/p/index.json", originHost, i)); r.status != http.StatusNotFound {
			t.Fatalf("a refused address: %d %s", r.status, r.body)
		}
	}
	if n := h.origin.TotalHits(); n != 0 {
		t.Fatalf("%d origin requests for refused addresses", n)
	}

	var st Status
	h.get("/?format=json&limit=20").json(t, &st)
	if len(st.Withheld) != 20 || st.HeldBack == nil || st.HeldBack.Addresses != invented || st.HeldBack.Omitted != invented-20 {
		t.Errorf("limit 20: %d withheld listed, held_back %+v; want 20 listed, %d counted, %d omitted", len(st.Withheld), st.HeldBack, invented, invented-20)
	}
	page := string(h.get("/").body)
	rows := 0
	if i := strings.Index(page, `<table id="held">`); i >= 0 {
		held := page[i:]
		rows = strings.Count(held[:strings.Index(held, "</table>")], "<tr>") - 1
	}
	if rows != statusDefaultLimit || !strings.Contains(page, fmt.Sprintf("%d more", invented-statusDefaultLimit)) {
		t.Errorf("the page lists %d held back, want %d and a line on the %d more", rows, statusDefaultLimit, invented-statusDefaultLimit)
	}
	st = Status{}
	h.get("/?format=json&prefix="+originHost+"/made-up-29").json(t, &st)
	if len(st.Withheld) != 10 || st.Withheld[0].Provider != originHost+"/made-up-290/p" || st.HeldBack.Omitted != 0 {
		t.Errorf("by prefix: %+v, held_back %+v; want the 10 under it", st.Withheld, st.HeldBack)
	}
}

// TestStatusViewCostsNoWorkPerRefusal: the policy refuses a made-up
// address before any origin is asked, so a client can fill the mirror's
// memory of refusals (thousands) and view the status page, which lists
// what the policy holds back, as often as it likes; refusing one more
// name before each view too. A view judged, sorted and copied every
// refusal again: some 3 allocations and tens of microseconds each, tens
// of milliseconds a view. It now takes the last answer while it holds,
// and while it is that big, for a second whatever was refused since; a
// new policy is shown at once.
func TestStatusViewCostsNoWorkPerRefusal(t *testing.T) {
	// Not parallel: testing.AllocsPerRun counts the process's allocations.
	h := newHarness(t, harnessOptions{})
	h.engine.SetPolicy(enginetest.DecodePolicy(t, `allow = ["`+originHost+`/`+ns+`/*"]`))
	const invented = 4000
	refuse := func(i int) {
		rec := httptest.NewRecorder()
		h.server.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, fmt.Sprintf("/%s/made-up-%05d/p/index.json", originHost, i), nil))
		if rec.Code != http.StatusNotFound {
			t.Fatalf("a refused address: %d %s", rec.Code, rec.Body)
		}
	}
	for i := range invented {
		refuse(i)
	}
	view := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.server.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?format=json", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("status page: %d %s", rec.Code, rec.Body)
		}
		return rec
	}
	var st Status
	if err := json.Unmarshal(view().Body.Bytes(), &st); err != nil || st.HeldBack == nil || st.HeldBack.Addresses != invented {
		t.Fatalf("held back %+v (%v), want the %d addresses refused", st.HeldBack, err, invented)
	}
	if n := testing.AllocsPerRun(10, func() { view() }); n > invented/4 {
		t.Errorf("a view of %d refusals: %.0f allocations, want far fewer than one a refusal", invented, n)
	}
	// A refusal before each view: the list is made again once a second
	// at most, whatever the runs take on a loaded machine. Made again
	// each time, it took some 3.5 allocations a refusal a view.
	next := invented
	const runs = 30
	total, took := countAllocs(runs, func() { refuse(next); next++; view() })
	if allowed := runs*invented/4 + (int(took.Seconds())+2)*4*invented; total > allowed {
		t.Errorf("%d refusals and views, of %d refusals, in %s: %d allocations, want at most %d (a list made again once a second)",
			runs, invented, took, total, allowed)
	}
	h.engine.SetPolicy(nil)
	st = Status{}
	if err := json.Unmarshal(view().Body.Bytes(), &st); err != nil || st.HeldBack != nil || len(st.Withheld) != 0 {
		t.Errorf("with the policy lifted, the page still lists %d held back (%+v)", len(st.Withheld), st.HeldBack)
	}
}

// countAllocs runs f runs times and returns the allocations the process
// made meanwhile, and the time they took.
func countAllocs(runs int, f func()) (int, time.Duration) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for range runs {
		f()
	}
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	return int(after.Mallocs - before.Mallocs), took
}
