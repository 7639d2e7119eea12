package proxy

// The client address of a request: the connection's peer, or, when the
// peer is a proxy the operator trusts, the address it says it received
// the request from (X-Forwarded-For). The limit of failed authentication
// attempts counts against it, and the access log names it.

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// MaxForwardedEntries is the most X-Forwarded-For entries read, from the
// right, before the client address falls back to the peer's.
const MaxForwardedEntries = 32

// forwardedKey is the context key of the *forwardedClient TrustProxies
// found.
type forwardedKey struct{}

// trustedPeerKey is the context key that says TrustProxies found the
// peer trusted but no client in X-Forwarded-For.
type trustedPeerKey struct{}

// forwardedClient is a client address taken from X-Forwarded-For.
type forwardedClient struct {
	addr netip.Addr
	text string // addr, as logged
}

// TrustProxies is the layer that takes each request's client address from
// X-Forwarded-For when its connection's peer is in one of trusted (the
// operator's proxies: an ingress, a load balancer): the rightmost entry
// that is not itself in a trusted range, each trusted proxy having
// appended the address it received the request from. The entries left of
// it are never read: the client writes them. A header that is missing,
// holds an entry that is not an IP address (right of the client's), or
// only trusted entries within MaxForwardedEntries leaves the peer as the
// client. Without trusted ranges it returns next: no header is read.
// ClientAddr reads what it found; put it in front of everything that asks.
func TrustProxies(next http.Handler, trusted []netip.Prefix) http.Handler {
	if len(trusted) == 0 {
		return next
	}
	trusted = append([]netip.Prefix(nil), trusted...)
	for i, p := range trusted {
		trusted[i] = p.Masked()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer, ok := peerAddr(r)
		if !ok || !inPrefixes(trusted, peer) {
			next.ServeHTTP(w, r)
			return
		}
		addr, ok := forwardedFor(r.Header["X-Forwarded-For"], trusted)
		if !ok {
			// The proxy's own request, or one whose header names no
			// client: the proxy is the client (and the log says why).
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), trustedPeerKey{}, true)))
			return
		}
		c := &forwardedClient{addr: addr, text: addr.String()}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), forwardedKey{}, c)))
	})
}

// ClientAddr returns r's client address: the one TrustProxies took from
// X-Forwarded-For, or else the connection's peer; ok is false when the
// peer has no IP address (a Unix socket).
func ClientAddr(r *http.Request) (addr netip.Addr, ok bool) {
	if c, isSet := r.Context().Value(forwardedKey{}).(*forwardedClient); isSet {
		return c.addr, true
	}
	return peerAddr(r)
}

// clientSource says where r's client address came from: "x-forwarded-for",
// "trusted-proxy" (the peer, a trusted proxy whose X-Forwarded-For named
// no client) or "peer" (a peer not trusted, or no proxy trusted at all).
func clientSource(r *http.Request) string {
	ctx := r.Context()
	if _, ok := ctx.Value(forwardedKey{}).(*forwardedClient); ok {
		return "x-forwarded-for"
	}
	if ctx.Value(trustedPeerKey{}) != nil {
		return "trusted-proxy"
	}
	return "peer"
}

// clientText is r's client address as the access log writes it, without
// an allocation for a peer's: "" when the peer has no IP address.
func clientText(r *http.Request) string {
	if c, ok := r.Context().Value(forwardedKey{}).(*forwardedClient); ok {
		return c.text
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return ""
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return ""
	}
	return host
}

// peerAddr is the IP address of r's connection's peer, IPv4 addresses
// in IPv6 unmapped, without a zone.
func peerAddr(r *http.Request) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap().WithZone(""), true
}

// forwardedFor returns the rightmost address of the X-Forwarded-For
// header lines values (one list, in order) that is not in trusted,
// reading at most MaxForwardedEntries entries; ok is false when an entry
// read is not an IP address, or none read is untrusted.
func forwardedFor(values []string, trusted []netip.Prefix) (addr netip.Addr, ok bool) {
	read := 0
	for i := len(values) - 1; i >= 0; i-- {
		rest := values[i]
		for {
			entry := rest
			cut := strings.LastIndexByte(rest, ',')
			if cut >= 0 {
				entry, rest = rest[cut+1:], rest[:cut]
			}
			if read++; read > MaxForwardedEntries {
				return netip.Addr{}, false
			}
			// Empty entries ("a, , b", a trailing comma) are no
			// entries, as the list syntax of HTTP has it.
			if entry = strings.TrimSpace(entry); entry != "" {
				a, valid := parseForwarded(entry)
				if !valid {
					return netip.Addr{}, false
				}
				if !inPrefixes(trusted, a) {
					return a, true
				}
			}
			if cut < 0 {
				break
			}
		}
	}
	return netip.Addr{}, false
}

// parseForwarded parses an X-Forwarded-For entry: an IP address, or one
// with a port ("192.0.2.7:4711", "[2001:db8::7]:4711"), which some
// proxies write.
func parseForwarded(entry string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(entry)
	if err != nil {
		ap, err := netip.ParseAddrPort(entry)
		if err != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone(""), true
}

func inPrefixes(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
