// Package hostport checks the authority of a URL the operator configures
// for the mirror to reach or to be reached at (its public URL, an
// outbound proxy, a shared store's endpoint): that it names a host, and
// a port net/http can dial. url.Parse takes "https://:8443/", whose
// empty host net/http dials as the local system, and any port of
// digits, 99999 and 0 among them.
package hostport

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
)

// Check returns an error when u names no host, or a port outside 1 to
// 65535; an empty port ("host:") is the scheme's, as net/http reads it.
func Check(u *url.URL) error {
	if u.Hostname() == "" {
		return errors.New("names no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %s is not one from 1 to 65535", p)
		}
	}
	return nil
}
