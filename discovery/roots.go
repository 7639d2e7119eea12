package discovery

// The CAs trusted for TLS may change while the client serves (a TLS-
// inspecting proxy's CA renewed in --origin-ca-file's files): every
// connection from then on is checked against the new ones, with the
// standard library's own verification, by a new *http.Transport; the
// connections the old one verified are not reused.

import (
	"crypto/x509"
	"net/http"
	"sync/atomic"
)

// rootsTransport is the bottom of the client's transports: the guarded
// *http.Transport trusting the CAs in force. SetRootCAs replaces it.
type rootsTransport struct {
	make func(roots *x509.CertPool) *http.Transport
	cur  atomic.Pointer[http.Transport]
}

func (r *rootsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return r.cur.Load().RoundTrip(req)
}

// SetRootCAs puts roots in force as the CAs trusted for TLS to origins,
// download hosts, module source hosts and an https:// upstream proxy, as
// Config.RootCAs (nil: the system roots). Each request from then on is
// made on a connection verified against them, so that a CA removed is
// trusted no more: the idle connections verified against the CAs before
// are closed. Requests under way finish on the connections they have,
// which their transport, used no more, closes once they have been idle
// for its IdleConnTimeout.
func (c *Client) SetRootCAs(roots *x509.CertPool) {
	b := c.tr.base
	old := b.cur.Swap(b.make(roots))
	old.CloseIdleConnections()
}
