package proxy

import (
	"bytes"
	"crypto/sha256"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestStatusConfiguration: the status page shows the configuration it is
// given, as it is at each view, in HTML and JSON; SetPublicURL changes
// the mirror URL from the next view on; without a token (client
// authentication on) the configuration is left out.
func TestStatusConfiguration(t *testing.T) {
	t.Parallel()
	var conf atomic.Pointer[Configuration]
	conf.Store(&Configuration{File: "/etc/tfmirror/tfmirror.hcl", Settings: []Setting{
		{Name: "cache-max-bytes", Attribute: "cache_max_bytes", Value: "40GiB", Source: "file"},
		{Name: "log-level", Attribute: "log_level", Value: "info", Source: "default"},
	}})
	h := newHarness(t, harnessOptions{cfg: Config{PublicURL: "https://one.example/", Settings: func() *Configuration { return conf.Load() }}})
	var st Status
	h.get("/?format=json").json(t, &st)
	if st.Configuration == nil || st.Configuration.File != "/etc/tfmirror/tfmirror.hcl" || len(st.Configuration.Settings) != 2 ||
		st.Configuration.Settings[0] != (Setting{Name: "cache-max-bytes", Attribute: "cache_max_bytes", Value: "40GiB", Source: "file"}) {
		t.Fatalf("configuration %+v", st.Configuration)
	}
	body := string(h.get("/").body)
	for _, want := range []string{`<tr id="setting-cache-max-bytes"><td><code>cache_max_bytes</code></td><td><code>40GiB</code></td><td>file</td></tr>`,
		"<code>/etc/tfmirror/tfmirror.hcl</code>", `url = "https://one.example/"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}

	conf.Store(&Configuration{Settings: []Setting{{Name: "log-level", Attribute: "log_level", Value: "debug", Source: "file"}}})
	h.server.SetPublicURL("https://two.example/")
	st = Status{}
	h.get("/?format=json").json(t, &st)
	if st.MirrorURL != "https://two.example/" || st.Configuration == nil || st.Configuration.Settings[0].Value != "debug" {
		t.Errorf("after a reload: mirror_url %q, configuration %+v", st.MirrorURL, st.Configuration)
	}

	a, err := NewAuth(AuthConfig{TokenHashes: [][32]byte{sha256.Sum256([]byte(testToken))}, SigningKey: bytes.Repeat([]byte{7}, 32), URLTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ha := newHarness(t, harnessOptions{cfg: Config{Auth: a, Settings: func() *Configuration { return conf.Load() }}})
	st = Status{}
	ha.get("/?format=json").json(t, &st)
	if st.Configuration != nil || strings.Contains(string(ha.get("/").body), "log_level") {
		t.Errorf("configuration shown without a token: %+v", st.Configuration)
	}
	st = Status{}
	ha.get("/?format=json", "Authorization", "Bearer "+testToken).json(t, &st)
	if st.Configuration == nil {
		t.Error("configuration not shown with a token")
	}
}

// TestStatusSettingsWaitingForARestart: a setting a reload found changed
// in the file but which cannot change while serving is named in the
// Health list, and its row gives the file's value beside the value in
// force, in HTML and JSON: the page showed the value in force alone, and
// an operator who had edited the file read it as the file's.
func TestStatusSettingsWaitingForARestart(t *testing.T) {
	t.Parallel()
	conf := &Configuration{File: "/etc/tfmirror/tfmirror.hcl", Settings: []Setting{
		{Name: "listen", Attribute: "listen", Value: ":8443", Source: "file", RestartPending: true, Pending: ":9443"},
		{Name: "log-level", Attribute: "log_level", Value: "debug", Source: "file"},
		{Name: "tls-san", Attribute: "tls_san", Value: "a.example", Source: "file", RestartPending: true},
	}}
	h := newHarness(t, harnessOptions{cfg: Config{Settings: func() *Configuration { return conf }}})
	var st Status
	h.get("/?format=json").json(t, &st)
	if st.Configuration == nil || len(st.Configuration.Settings) != 3 ||
		st.Configuration.Settings[0] != (Setting{Name: "listen", Attribute: "listen", Value: ":8443", Source: "file", RestartPending: true, Pending: ":9443"}) ||
		st.Configuration.Settings[1].RestartPending {
		t.Fatalf("configuration %+v", st.Configuration)
	}
	body := string(h.get("/").body)
	for _, want := range []string{
		`<li id="health-restart"><span class="warn">2 settings changed in the configuration file wait for a restart</span>: <code>listen</code>, <code>tls_san</code>;`,
		`<td><code>:8443</code> <span class="warn">the file now gives <code>:9443</code>: in force after a restart</span></td>`,
		`<td><code>a.example</code> <span class="warn">the file now gives an empty value: in force after a restart</span></td>`,
		`<td><code>debug</code></td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}

	conf = &Configuration{Settings: []Setting{{Name: "listen", Attribute: "listen", Value: ":8443", Source: "file"}}}
	if body := string(h.get("/").body); strings.Contains(body, "health-restart") || strings.Contains(body, "after a restart") {
		t.Errorf("nothing waits for a restart, and the page says something does:\n%s", body)
	}
}

// fixedRows are origin rows as the origin watch gives them.
type fixedRows []OriginHealth

func (f fixedRows) Rows() []OriginHealth { return append([]OriginHealth(nil), f...) }

// TestStatusOriginsAndPolicy: the origin rows and the policy in force
// are shown, in HTML and JSON, in the page's order (health and origins,
// cache, policy, the blocks to paste, the configuration, folded); a
// failing origin shows in the health line. Without a token (client
// authentication on) the rows stay but without the error's text, and the
// policy is left out.
func TestStatusOriginsAndPolicy(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	rows := fixedRows{
		{Host: "registry.terraform.io", State: "failing", Breaker: "closed", Failures: 2, LastSuccess: at.Add(-time.Hour),
			LastError: &OriginFailure{At: at, Cause: "certificate signed by unknown authority: set origin_ca_file", Error: "origin registry.terraform.io: versions of registry.terraform.io/acme/secret failed: x509"},
			LastHour:  OriginCounts{Requests: 12, Downloads: 4, CacheHits: 3, OriginRequests: 5, OriginFailures: 2}},
		{Host: "registry.opentofu.org", State: "unused", Breaker: "closed"},
	}
	rules := []string{`deny "registry.terraform.io/acme/*" (/etc/tfmirror/tfmirror.hcl:3)`}
	cfg := Config{Origins: rows, Policy: func() []string { return rules },
		Settings: func() *Configuration {
			return &Configuration{Settings: []Setting{{Name: "log-level", Attribute: "log_level", Value: "info", Source: "default"}}}
		}}
	h := newHarness(t, harnessOptions{cfg: cfg})
	var st Status
	h.get("/?format=json").json(t, &st)
	if len(st.Origins) != 2 || st.Origins[0].LastError == nil || st.Origins[0].LastError.Error == "" || st.Origins[0].LastHour.CacheHits != 3 {
		t.Errorf("origins %+v", st.Origins)
	}
	if st.Policy == nil || len(st.Policy.Rules) != 1 || st.Policy.Rules[0] != rules[0] {
		t.Errorf("policy %+v", st.Policy)
	}
	body := string(h.get("/").body)
	for _, want := range []string{
		`registry.terraform.io is failing (below)`,
		`<span class="state bad">failing</span>`,
		`certificate signed by unknown authority: set origin_ca_file`,
		`12 requests, 3 of 4 downloads from the cache, 5 to the origin (2 failed)`,
		`<span class="state muted">not contacted yet</span>`,
		`<pre id="policy-rules"><code>deny &#34;registry.terraform.io/acme/*&#34; (/etc/tfmirror/tfmirror.hcl:3)`,
		`<details id="configuration">`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
	order := []string{`id="health"`, `id="origins"`, `id="cache"`, `id="policy"`, `id="use"`, `id="configuration"`}
	for i := 1; i < len(order); i++ {
		if a, b := strings.Index(body, order[i-1]), strings.Index(body, order[i]); a < 0 || a > b {
			t.Errorf("%s does not come before %s", order[i-1], order[i])
		}
	}
	rules = nil
	if body := string(h.get("/").body); !strings.Contains(body, `id="policy-none"`) {
		t.Error("no policy is not said so")
	}

	a, err := NewAuth(AuthConfig{TokenHashes: [][32]byte{sha256.Sum256([]byte(testToken))}, SigningKey: bytes.Repeat([]byte{7}, 32), URLTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Auth = a
	ha := newHarness(t, harnessOptions{cfg: cfg})
	st = Status{}
	ha.get("/?format=json").json(t, &st)
	if len(st.Origins) != 2 || st.Origins[0].LastError == nil || st.Origins[0].LastError.Cause == "" || st.Origins[0].LastError.Error != "" || st.Policy != nil {
		t.Errorf("without a token: origins %+v, policy %+v", st.Origins, st.Policy)
	}
	if strings.Contains(string(ha.get("/").body), "acme/secret") {
		t.Error("the page shows an origin error's text without a token")
	}
}

// TestStatusOriginFailingAtTheProxy: an origin whose last request the
// upstream proxy refused or failed is shown as the proxy's trouble, in
// its row and in the Health list, not as the origin failing.
func TestStatusOriginFailingAtTheProxy(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	rows := fixedRows{
		{Host: "registry.terraform.io", State: "proxy", Breaker: "closed", LastSuccess: at.Add(-time.Hour),
			LastError: &OriginFailure{At: at, Cause: "the upstream proxy (upstream_proxy, --upstream-proxy, or HTTPS_PROXY) refused the mirror's credentials (HTTP 407 Proxy Authentication Required): check the user and password of its URL"}},
		{Host: "registry.opentofu.org", State: "ok", Breaker: "closed", LastSuccess: at},
	}
	h := newHarness(t, harnessOptions{cfg: Config{Origins: rows}})
	body := string(h.get("/").body)
	for _, want := range []string{
		`the upstream proxy fails the requests for registry.terraform.io (below)`,
		`<span class="state bad">failing at the upstream proxy</span>`,
		`refused the mirror&#39;s credentials`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "registry.terraform.io is failing") {
		t.Errorf("the page says the origin is failing:\n%s", body)
	}
}

// TestStatusLastReload: the Health list says how the last reload ended,
// and why a file was refused; nothing before the first reload, and
// nothing without a token (client authentication on), as for the rest
// of the configuration.
func TestStatusLastReload(t *testing.T) {
	t.Parallel()
	var conf atomic.Pointer[Configuration]
	conf.Store(&Configuration{Settings: []Setting{}})
	h := newHarness(t, harnessOptions{cfg: Config{Settings: func() *Configuration { return conf.Load() }}})
	if body := string(h.get("/").body); strings.Contains(body, `id="health-reload"`) {
		t.Errorf("a last reload shown before any:\n%s", body)
	}
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	conf.Store(&Configuration{Settings: []Setting{}, LastReload: &Reload{At: at,
		Error: "client tokens file /etc/tfmirror/tokens refused; the tokens in force stay: --auth-tokens-file: /etc/tfmirror/tokens:2: a token of 5 characters is too short <x>"}})
	var st Status
	h.get("/?format=json").json(t, &st)
	if r := st.Configuration.LastReload; r == nil || r.Applied || !r.At.Equal(at) || !strings.Contains(r.Error, "tokens:2") {
		t.Errorf("JSON last reload %+v", r)
	}
	body := string(h.get("/").body)
	for _, want := range []string{`<li id="health-reload">`, `2026-11-29 12:00 UTC: <span class="bad">refused</span>`,
		"<code>client tokens file /etc/tfmirror/tokens refused; the tokens in force stay: --auth-tokens-file: /etc/tfmirror/tokens:2: a token of 5 characters is too short &lt;x&gt;</code>"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
	conf.Store(&Configuration{Settings: []Setting{}, LastReload: &Reload{At: at, Applied: true}})
	if body := string(h.get("/").body); !strings.Contains(body, `2026-11-29 12:00 UTC: <span class="ok">put in force</span>`) {
		t.Errorf("page lacks the reload put in force:\n%s", body)
	}

	conf.Store(&Configuration{Settings: []Setting{}, LastReload: &Reload{At: at, Error: "refused"}})
	a, err := NewAuth(AuthConfig{TokenHashes: [][32]byte{sha256.Sum256([]byte(testToken))}, SigningKey: bytes.Repeat([]byte{7}, 32), URLTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ha := newHarness(t, harnessOptions{cfg: Config{Auth: a, Settings: func() *Configuration { return conf.Load() }}})
	if body := string(ha.get("/").body); strings.Contains(body, `id="health-reload"`) {
		t.Errorf("the last reload shown without a token:\n%s", body)
	}
}

// TestStatusSharedStore: with a shared store the page shows where it is
// and its ID, in HTML and JSON, to those who may see the configuration:
// without a token (client authentication on) it is left out of both, as
// bucket names are. Without a shared store there is nothing.
func TestStatusSharedStore(t *testing.T) {
	t.Parallel()
	shared := &StatusSharedStore{Location: "s3://tfm-prod/mirror/", Endpoint: "https://minio.corp.test:9000", StoreID: "prod-mirrors"}
	h := newHarness(t, harnessOptions{cfg: Config{SharedStore: shared}})
	var raw struct {
		SharedStore map[string]any `json:"shared_store"`
	}
	h.get("/?format=json").json(t, &raw)
	want := map[string]any{"location": "s3://tfm-prod/mirror/", "endpoint": "https://minio.corp.test:9000", "store_id": "prod-mirrors"}
	if !maps.Equal(raw.SharedStore, want) {
		t.Errorf("shared_store %v, want %v", raw.SharedStore, want)
	}
	body := string(h.get("/").body)
	if w := `<li id="health-shared-store">Shared store <code>s3://tfm-prod/mirror/</code> at <code>https://minio.corp.test:9000</code>, store ID <code>prod-mirrors</code>: every replica sharing it must have the same ID (<code>--shared-store-id</code>)`; !strings.Contains(body, w) {
		t.Errorf("page lacks %q:\n%s", w, body)
	}

	a, err := NewAuth(AuthConfig{TokenHashes: [][32]byte{sha256.Sum256([]byte(testToken))}, SigningKey: bytes.Repeat([]byte{7}, 32), URLTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ha := newHarness(t, harnessOptions{cfg: Config{Auth: a, SharedStore: shared}})
	var st Status
	ha.get("/?format=json").json(t, &st)
	if st.SharedStore != nil || strings.Contains(string(ha.get("/").body), "tfm-prod") {
		t.Errorf("shared store shown without a token: %+v", st.SharedStore)
	}
	st = Status{}
	ha.get("/?format=json", "Authorization", "Bearer "+testToken).json(t, &st)
	if st.SharedStore == nil || *st.SharedStore != *shared {
		t.Errorf("shared store with a token: %+v, want %+v", st.SharedStore, shared)
	}

	none := newHarness(t, harnessOptions{})
	var rawNone map[string]any
	none.get("/?format=json").json(t, &rawNone)
	if v, ok := rawNone["shared_store"]; ok {
		t.Errorf("shared_store %v without a shared store", v)
	}
	if strings.Contains(string(none.get("/").body), `id="health-shared-store"`) {
		t.Error("the page shows a shared store without one")
	}
}
