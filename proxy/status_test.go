package proxy

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/internal/fakeorigin"
)

// statusHarness returns a mirror that has cached version 1.0.0 of the test
// provider for linux_amd64 only.
func statusHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := newHarness(t, harnessOptions{cfg: cfg, origin: fakeorigin.Options{}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	if r := h.get(archivePath("1.0.0", "linux_amd64")); r.status != 200 || r.err != nil {
		t.Fatalf("archive: status %d err %v", r.status, r.err)
	}
	h.waitCommitted(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"))
	return h
}

func TestStatusJSON(t *testing.T) {
	h := statusHarness(t, Config{PublicURL: "https://mirror.example.com/", Version: "1.2.3"})
	r := h.get("/?format=json")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var st Status
	r.json(t, &st)
	if st.MirrorURL != "https://mirror.example.com/" || st.Version != "1.2.3" {
		t.Errorf("mirror_url %q version %q", st.MirrorURL, st.Version)
	}
	if len(st.AllowedOrigins) != 1 || st.AllowedOrigins[0] != originHost {
		t.Errorf("allowed_origins %v", st.AllowedOrigins)
	}
	size := int64(len(h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")))
	if st.Archives != 1 || st.Bytes != size {
		t.Errorf("cached_archives %d cached_bytes %d, want 1 and %d", st.Archives, st.Bytes, size)
	}
	if len(st.Providers) != 1 {
		t.Fatalf("providers %+v, want one", st.Providers)
	}
	p := st.Providers[0]
	if p.Address != originHost+"/"+ns+"/"+typ || len(p.Versions) != 1 || p.Versions[0].Version != "1.0.0" {
		t.Fatalf("provider %+v", p)
	}
	cached := map[string]bool{}
	for _, pl := range p.Versions[0].Platforms {
		cached[pl.Platform] = pl.Cached
		if pl.Cached && pl.Size != size {
			t.Errorf("%s: size %d, want %d", pl.Platform, pl.Size, size)
		}
	}
	if c, ok := cached["linux_amd64"]; !ok || !c {
		t.Errorf("linux_amd64 not listed as cached: %+v", p.Versions[0].Platforms)
	}
	for pl, c := range cached {
		if pl != "linux_amd64" && c {
			t.Errorf("%s listed as cached, but only linux_amd64 was fetched", pl)
		}
	}
}

func TestStatusHTML(t *testing.T) {
	h := statusHarness(t, Config{})
	r := h.get("/")
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	body := string(r.body)
	// Without --public-url the block names the URL the page was asked on.
	host := strings.TrimPrefix(h.http.URL, "http://")
	wantBlock := "provider_installation {\n  network_mirror {\n    url = \"https://" + host + "/\"\n  }\n}"
	if !strings.Contains(body, wantBlock) {
		t.Errorf("page lacks the provider_installation block %q:\n%s", wantBlock, body)
	}
	row := "<td><code>" + originHost + "/<wbr>" + ns + "/<wbr>" + typ + "</code></td><td>1.0.0</td>"
	if !strings.Contains(body, row) {
		t.Errorf("page lacks the provider row %q:\n%s", row, body)
	}
	if !strings.Contains(body, `linux_amd64 <span class="ok"`) || strings.Count(body, "✓</span>") != 1 {
		t.Errorf("want exactly one cached mark, on linux_amd64:\n%s", body)
	}
	if !strings.Contains(body, "1 archive cached, 283 B in all.") {
		t.Errorf("page lacks the cache totals:\n%s", body)
	}
}

func TestStatusHTMLEmptyCache(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	r := h.get("/")
	if r.status != 200 || !strings.Contains(string(r.body), "Nothing yet") || strings.Contains(string(r.body), `id="providers"`) {
		t.Errorf("empty cache page: status %d\n%s", r.status, r.body)
	}
}

func TestStatusTemplateEscapes(t *testing.T) {
	const evil = `"><script>alert(1)</script><img src=x onerror=alert(2)>`
	st := &Status{
		MirrorURL:      "https://m.example/" + evil,
		Version:        evil,
		AllowedOrigins: []string{evil},
		Platforms:      []string{evil},
		Providers: []StatusProvider{{
			Address:  evil,
			Versions: []StatusVersion{{Version: evil, Platforms: []StatusPlatform{{Platform: evil, Cached: true, Size: 1}}}},
		}},
		Generated: time.Unix(0, 0).UTC(),
	}
	var buf bytes.Buffer
	if err := statusTemplate.Execute(&buf, st); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, bad := range []string{"<script>", "<img", `"><`} {
		if strings.Contains(out, bad) {
			t.Errorf("output contains unescaped %q:\n%s", bad, out)
		}
	}
	if n := strings.Count(out, "&lt;script&gt;alert(1)&lt;/script&gt;"); n < 6 {
		t.Errorf("hostile text shown escaped %d times, want at least 6 (every field):\n%s", n, out)
	}
}
