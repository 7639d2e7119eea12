package releases_test

import (
	"strings"
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

// A releases URL has no query and no fragment: the door joins the
// release files' paths after it (a query would end up inside them), and
// a token in it would be shown wherever the URL is. The refusal names
// neither.
func TestCheckOriginRefusesQueryOrFragment(t *testing.T) {
	for _, u := range []string{"https://releases.example/?token=QTOK", "https://releases.example/tofu/api.json?token=QTOK", "https://releases.example/#QTOK", "https://releases.example/?"} {
		err := releases.CheckOrigin(u)
		if err == nil {
			t.Errorf("CheckOrigin(%q) accepted", u)
			continue
		}
		if strings.Contains(err.Error(), "QTOK") || !strings.Contains(err.Error(), "--credentials-file") {
			t.Errorf("CheckOrigin(%q): %v; want a refusal that does not repeat the query and says where a token goes", u, err)
		}
	}
}
