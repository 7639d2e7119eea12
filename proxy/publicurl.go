package proxy

// How the mirror names itself in what it hands out: the public URL in
// force (--public-url), or else the URL a request was made to, from its
// Host and, from a proxy the operator trusts only, its X-Forwarded-Proto.
// Whatever a request's Host says reaches an answer only through here, and
// only after it passed ValidHost: Server refuses (400) every request
// whose Host is not a host[:port] while no public URL is in force.

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// MaxHostLen bounds a Host header the mirror takes into its URLs: a DNS
// name (253), a colon and a port.
const MaxHostLen = 253 + 1 + 5

// ValidHost reports whether h is a host[:port] the mirror may put in a
// URL it hands out: a DNS name (letters, digits, '-' and '_' in labels
// of at most 63 bytes, at most 253 in all, with no empty label but an
// optional final dot), an IPv4 address or a bracketed IPv6 address
// without a zone, and an optional decimal port of 1 to 65535. Userinfo,
// paths, queries, percent-encoding, control characters and the other
// bytes net/http lets through in a Host are not.
func ValidHost(h string) bool {
	if h == "" || len(h) > MaxHostLen {
		return false
	}
	host := h
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.HasSuffix(h, "]") {
		var port string
		host, port = h[:i], h[i+1:]
		if !validPort(port) {
			return false
		}
	}
	if strings.HasPrefix(host, "[") {
		inner, ok := strings.CutSuffix(host[1:], "]")
		if !ok {
			return false
		}
		a, err := netip.ParseAddr(inner)
		return err == nil && a.Is6() && a.Zone() == ""
	}
	if a, err := netip.ParseAddr(host); err == nil {
		// An IPv4 address passes; an IPv6 one must be bracketed (one
		// with a zone, "::%]", parses here, and is not a host).
		return a.Is4()
	}
	return validDNSName(host)
}

func validPort(p string) bool {
	if p == "" || len(p) > 5 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

func validDNSName(name string) bool {
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > 253 {
		return false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// RequestURL is the mirror's base URL as r was made to, ending in "/":
// https, or http when the mirror serves plain HTTP (plainHTTP: TLS ends
// at a proxy in front) unless a proxy the operator trusts (TrustProxies)
// says with X-Forwarded-Proto that the client used https; and r's Host,
// or "localhost" for one that is not a host[:port] (Server refuses such
// a request while no public URL is in force; a reload may have removed
// it since) or none (HTTP/1.0): a Host ValidHost refuses never reaches
// an answer. A client that is not a trusted proxy cannot change the
// scheme. It is
// what the mirror names itself by when no public URL is in force; every
// answer built from it must say it varies by Host and X-Forwarded-Proto
// (VaryByRequestURL).
func RequestURL(r *http.Request, plainHTTP bool) string {
	scheme := "https"
	if r.TLS == nil && plainHTTP && !(FromTrustedProxy(r) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")) {
		scheme = "http"
	}
	host := r.Host
	if !ValidHost(host) {
		host = "localhost"
	}
	return scheme + "://" + host + "/"
}

// VaryByRequestURL says in w's header that the answer depends on what
// RequestURL reads, so that an HTTP cache in front keeps one per Host
// (and scheme) and never hands one client's to another.
func VaryByRequestURL(w http.ResponseWriter) {
	w.Header().Add("Vary", "Host, X-Forwarded-Proto")
}

// FromTrustedProxy reports whether r came from a peer that TrustProxies
// found in the operator's trusted ranges: only then are the forwarding
// headers of r read.
func FromTrustedProxy(r *http.Request) bool {
	ctx := r.Context()
	if _, ok := ctx.Value(forwardedKey{}).(*forwardedClient); ok {
		return true
	}
	return ctx.Value(trustedPeerKey{}) != nil
}

// errBadHost is the answer to a request whose Host the mirror would have
// to name itself by, and cannot.
func errBadHost() error {
	return &httperr.RequestError{Status: http.StatusBadRequest,
		Msg: "malformed Host header: want HOST or HOST:PORT (set --public-url to name the mirror regardless of Host)"}
}
