package proxy

import (
	"bytes"
	"crypto/sha256"
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
