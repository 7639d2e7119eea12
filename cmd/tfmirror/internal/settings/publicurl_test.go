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
