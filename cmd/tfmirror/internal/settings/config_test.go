package settings

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// --trusted-proxies takes CIDRs and single addresses; anything else is
// refused with the value and the flag named.
func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	got, err := ParseTrustedProxies([]string{"10.0.0.0/8", " 192.0.2.7 ", "2001:db8::/32", "10.1.2.3/16", "::ffff:172.16.0.0/108", "2001:db8::1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("2001:db8::/32"),
		netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("2001:db8::1/128")}
	if !slices.Equal(got, want) {
		t.Errorf("parsed %v, want %v", got, want)
	}
	for _, bad := range []string{"10.0.0.0/33", "10.0.0.0/", "ingress.example.com", "10.0.0.0/8,", "fe80::1%eth0", "2001:db8::/129", "*"} {
		var c Config
		allSettings(&c)
		c.TrustedProxies = []string{"10.0.0.0/8", bad}
		err := c.Validate()
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "--trusted-proxies") || !strings.Contains(msg, `"`+bad+`"`) {
			t.Errorf("%q: error %q does not name the flag and the value", bad, msg)
		}
	}
}

// Validate names every problem (config check lists them all at once): a
// --tls-san it refuses does not hide the others.
func TestValidateNamesEveryProblem(t *testing.T) {
	t.Parallel()
	var c Config
	allSettings(&c)
	c.TLSSAN = []string{"bad name"}
	c.LogFormat = "yaml"
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "--tls-san") || !strings.Contains(err.Error(), "--log-format") {
		t.Errorf("Validate: %v, want both --tls-san and --log-format named", err)
	}
}

// An allowed origin may be given as the status page, the metrics and the
// records spell it (an IDN host in punycode), as well as a person writes
// it: both are the one host, and --allow-unsigned-hosts may name it
// either way.
func TestAllowedOriginInPunycode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ origin, unsigned string }{
		{"xn--bcher-kva.example", "bücher.example"},
		{"bücher.example:8443", "xn--bcher-kva.example:8443"},
	} {
		var c Config
		allSettings(&c)
		c.AllowedOrigins = []string{tc.origin}
		c.AllowUnsignedHosts = []string{tc.unsigned}
		if err := c.ValidateEngine(); err != nil {
			t.Errorf("--allowed-origins %s, --allow-unsigned-hosts %s: %v", tc.origin, tc.unsigned, err)
		}
	}
}
