package settings

import (
	"strings"
	"testing"
)

// --public-url is shown to anyone who reaches the mirror: the status page
// (also without a client token), the CLI releases door's index.json, the
// OCI door's token realm. It is no secret setting, so config check and the
// status page's configuration print it as given. A URL with credentials
// in its userinfo (a front proxy's basic auth) is refused, naming the
// flag and never the password, as are a query and a fragment, which no
// base URL has.
func TestPublicURLRefusesUserinfo(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"https://ci:s3cretPassw0rd@mirror.example.com/",
		"https://s3cretPassw0rd@mirror.example.com:8443/",
		"https://mirror.example.com/?token=s3cretPassw0rd",
		"https://mirror.example.com/#s3cretPassw0rd",
	} {
		var c Config
		allSettings(&c)
		c.PublicURL = bad
		err := c.Validate()
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "--public-url") || strings.Contains(msg, "s3cretPassw0rd") {
			t.Errorf("%q: error %q does not name the flag, or quotes the secret", bad, msg)
		}
	}
}

// TestURLsNameAHostAndAPort: --public-url and --upstream-proxy must name
// a host, and a port from 1 to 65535 if any. url.Parse takes
// "https://:8443/" and "http://u:p@:3128", whose empty host net/http
// dials as this system (every origin request sent to a local port), and
// any port of digits; HTTPS_PROXY of the same URLs is refused, so the
// settings are too, naming the flag and never the proxy's password.
func TestURLsNameAHostAndAPort(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flag, value string
		set         func(*Config, string)
	}{
		{"--public-url", "https://:8443/", func(c *Config, v string) { c.PublicURL = v }},
		{"--public-url", "https://mirror.example.com:99999/", func(c *Config, v string) { c.PublicURL = v }},
		{"--public-url", "https://mirror.example.com:0/", func(c *Config, v string) { c.PublicURL = v }},
		{"--upstream-proxy", "http://mirror:s3cretPassw0rd@:3128", func(c *Config, v string) { c.UpstreamProxy = v }},
		{"--upstream-proxy", "socks5://:1080", func(c *Config, v string) { c.UpstreamProxy = v }},
		{"--upstream-proxy", "http://mirror:s3cretPassw0rd@proxy.corp.example:65536", func(c *Config, v string) { c.UpstreamProxy = v }},
		{"--upstream-proxy", "http://proxy.corp.example:0", func(c *Config, v string) { c.UpstreamProxy = v }},
	} {
		var c Config
		allSettings(&c)
		tc.set(&c, tc.value)
		err := c.Validate()
		if err == nil {
			t.Errorf("%s %q accepted", tc.flag, tc.value)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tc.flag) || strings.Contains(msg, "s3cretPassw0rd") {
			t.Errorf("%s %q: error %q does not name the flag, or quotes the password", tc.flag, tc.value, msg)
		}
	}
	for _, ok := range []string{"https://mirror.example.com/", "https://mirror.example.com:8443/", "http://[::1]:8080/"} {
		var c Config
		allSettings(&c)
		c.PublicURL = ok
		if err := c.Validate(); err != nil {
			t.Errorf("--public-url %q: %v", ok, err)
		}
	}
}
