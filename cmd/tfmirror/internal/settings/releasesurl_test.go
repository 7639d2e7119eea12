package settings

import (
	"strings"
	"testing"
)

// The CLI releases' origin URLs are bases the door joins the files'
// paths after: a query or a fragment would end up inside them (a
// ?token=... sent as /?token=.../terraform/index.json), and a token in
// one would be shown wherever the URL is. Each of the three is refused
// with one, naming its flag, saying where a token goes, and never
// repeating the query.
func TestReleasesURLsRefuseQueryAndFragment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flag string
		set  func(*Config, string)
	}{
		{"--releases-hashicorp-url", func(c *Config, v string) { c.ReleasesHashiCorpURL = v }},
		{"--releases-opentofu-url", func(c *Config, v string) { c.ReleasesOpenTofuURL = v }},
		{"--releases-opentofu-api-url", func(c *Config, v string) { c.ReleasesOpenTofuAPIURL = v }},
	} {
		for _, bad := range []string{"https://127.0.0.1:18700/?token=QTOK", "https://releases.corp.example/tofu/#QTOK"} {
			var c Config
			allSettings(&c)
			tc.set(&c, bad)
			err := c.Validate()
			if err == nil {
				t.Errorf("%s %q accepted", tc.flag, bad)
				continue
			}
			if msg := err.Error(); !strings.HasPrefix(msg, tc.flag+": ") || !strings.Contains(msg, "query") || !strings.Contains(msg, "--credentials-file") || strings.Contains(msg, "QTOK") {
				t.Errorf("%s %q: error %q does not begin with the flag, say why and where a token goes, or quotes the query", tc.flag, bad, msg)
			}
		}
	}
}
