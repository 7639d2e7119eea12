package releases_test

import (
	"testing"

	"github.com/tfmirror/tfmirror/v2/releases"
)

// A releases URL whose host has non-ASCII letters may be given as a URL
// is usually written, its host in punycode, or in Unicode.
func TestCheckOriginIDNHost(t *testing.T) {
	for _, u := range []string{"https://xn--bcher-kva.example/releases", "https://xn--bcher-kva.example:8443/", "https://bücher.example/"} {
		if err := releases.CheckOrigin(u); err != nil {
			t.Errorf("CheckOrigin(%q): %v", u, err)
		}
	}
}

// A releases URL names a host, and a port from 1 to 65535 if any.
func TestCheckOriginRefusesNoHostOrPort(t *testing.T) {
	for _, u := range []string{"https://:8443/", "https://releases.example:0/", "https://releases.example:65536/"} {
		if err := releases.CheckOrigin(u); err == nil {
			t.Errorf("CheckOrigin(%q) accepted", u)
		}
	}
}
