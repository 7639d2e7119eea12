package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/idna"
)

// Address ranges that are never dialled unless Config.AllowPrivate is set.
// IPv6 addresses must also lie in global unicast space (2000::/3); the
// IPv4-mapped, NAT64 and 6to4 forms are judged by the IPv4 address they carry.
var (
	blockedV4 = mustPrefixes(
		"0.0.0.0/8",       // "this network", includes the unspecified address
		"10.0.0.0/8",      // private
		"100.64.0.0/10",   // carrier-grade NAT
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local (cloud metadata services live here)
		"172.16.0.0/12",   // private
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation
		"192.88.99.0/24",  // 6to4 relay anycast
		"192.168.0.0/16",  // private
		"198.18.0.0/15",   // benchmarking
		"198.51.100.0/24", // documentation
		"203.0.113.0/24",  // documentation
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, includes broadcast
	)
	globalUnicastV6 = netip.MustParsePrefix("2000::/3")
	blockedV6       = mustPrefixes(
		"2001::/23",     // IETF protocol assignments (Teredo, benchmarking, ORCHID)
		"2001:db8::/32", // documentation
		"3fff::/20",     // documentation
	)
	nat64V6   = netip.MustParsePrefix("64:ff9b::/96") // well-known NAT64 prefix, IPv4 in the last 32 bits
	sixToFour = netip.MustParsePrefix("2002::/16")    // 6to4, IPv4 in bits 16..47
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// IsPublicAddr reports whether a is a public unicast address that tfmirror
// may connect to when Config.AllowPrivate is false. Loopback, private
// (RFC 1918, ULA fc00::/7), carrier-grade NAT, link-local, unspecified,
// multicast, documentation, benchmarking and reserved ranges are not public,
// nor are IPv4-mapped, NAT64 or 6to4 IPv6 forms of such IPv4 addresses.
func IsPublicAddr(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.WithZone("").Unmap()
	if a.Is4() {
		return publicV4(a)
	}
	switch {
	case nat64V6.Contains(a):
		b := a.As16()
		return publicV4(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(a):
		b := a.As16()
		return publicV4(netip.AddrFrom4([4]byte(b[2:6])))
	case !globalUnicastV6.Contains(a):
		return false
	}
	for _, p := range blockedV6 {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

func publicV4(a netip.Addr) bool {
	for _, p := range blockedV4 {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// checkAddr returns an error wrapping ErrPrivateAddress unless a is public.
func checkAddr(a netip.Addr) error {
	if IsPublicAddr(a) {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrPrivateAddress, a.WithZone(""))
}

// guardControl is the net.Dialer Control hook: it sees the address actually
// being connected to, after name resolution, so a name that resolves to a
// private address (DNS rebinding included) is refused.
func guardControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable dial address %q", ErrPrivateAddress, address)
	}
	return checkAddr(ap.Addr())
}

// dialGuard holds the address policy of the transport's connections
// (Config.AllowPrivate, Config.DialContext, Config.Proxy).
type dialGuard struct {
	allowPrivate bool
	dialContext  func(ctx context.Context, network, addr string) (net.Conn, error) // replaces the guard when set
	proxy        func(*http.Request) (*url.URL, error)
	lookup       func(ctx context.Context, network, host string) ([]netip.Addr, error) // a proxied target's addresses
	guarded      *net.Dialer
	open         *net.Dialer
	// proxyHandshake bounds a SOCKS5 proxy's handshake and an HTTP
	// proxy's answer to CONNECT (proxyConn): proxyHandshakeTimeout,
	// which tests shorten.
	proxyHandshake time.Duration
}

// proxyChoiceKey is the context key of a request's *proxyChoice.
type proxyChoiceKey struct{}

// proxyChoice is where one request's proxy decision is written: proxyFor
// writes the dial address of the proxy it chose, and dial lets that one
// address past the guard for the connections made for that request. A
// request sent direct, even to the proxy's own address (a URL naming it,
// which NO_PROXY sends direct), is guarded like any other.
//
// It also follows the request's way through an HTTP proxy asked with
// CONNECT (connectBroken): dial marks the connection to the proxy opened,
// the *http.Transport's OnProxyConnectResponse the proxy's answer read,
// and the request's trace the connection it was given, whose CONNECT
// was answered, its own or another request's; and it holds the
// connections to the proxy dialled for the request whose CONNECT is
// not answered (tunnels), which that answer's bound applies to.
type proxyChoice struct {
	addr atomic.Pointer[string]
	// connect: the proxy is an HTTP proxy, asked with CONNECT.
	connect atomic.Bool
	// dialed: a connection to the proxy was opened for the request.
	dialed atomic.Bool
	// answered: the proxy answered the CONNECT with an HTTP response.
	answered atomic.Bool
	// got: the request was given a connection, over which it is sent
	// (from when it asks for one, for each time it does).
	got atomic.Bool
	// socks: the proxy is a SOCKS5 proxy, whose handshake dial bounds.
	socks atomic.Bool

	mu sync.Mutex
	// tunnels are the connections to the HTTP proxy dialled for the
	// request whose CONNECT was not answered yet: the *http.Transport's
	// GetProxyConnectHeader bounds one (dialGuard.connectAsked) and its
	// OnProxyConnectResponse lifts the bound (connectAnswered). Its
	// hooks are told of the dial's context, not of the connection: each
	// is known by the context it was dialled on (net/http's dial, its
	// CONNECT and the answer share one, of that dial alone), so that a
	// request dialling again while its first dial waits for its answer
	// (it was given another connection meanwhile, which failed) has
	// each bounded from its own CONNECT until its own answer.
	tunnels []tunnelDial
}

// tunnelDial is a connection to an HTTP proxy, dialled on dial.
type tunnelDial struct {
	dial context.Context
	conn *proxyConn
}

// connectAnswered lifts the bound of the request's connection to the
// HTTP proxy dialled on ctx: the proxy answered its CONNECT. Should none
// be known by ctx, it lifts the bound of every one asked: a tunnel the
// proxy opened is never cut.
func (pc *proxyChoice) connectAnswered(ctx context.Context) {
	pc.answered.Store(true)
	pc.mu.Lock()
	defer pc.mu.Unlock()
	mine := slices.ContainsFunc(pc.tunnels, func(t tunnelDial) bool { return t.dial == ctx })
	pc.tunnels = slices.DeleteFunc(pc.tunnels, func(t tunnelDial) bool {
		if t.dial == ctx || !mine && t.conn.asked.Load() {
			t.conn.lift()
			return true
		}
		return false
	})
}

// choiceOf is ctx's *proxyChoice, nil when it has none.
func choiceOf(ctx context.Context) *proxyChoice {
	pc, _ := ctx.Value(proxyChoiceKey{}).(*proxyChoice)
	return pc
}

// withProxyChoice returns ctx with a fresh proxyChoice: every request
// gets one (policyTransport) before it reaches the *http.Transport. Its
// trace marks the connection the request is given (got): a request
// waiting for its own dial may be given another request's connection,
// idle or HTTP/2's shared one, while the proxy has not yet answered its
// own CONNECT.
func withProxyChoice(ctx context.Context) context.Context {
	pc := &proxyChoice{}
	ctx = context.WithValue(ctx, proxyChoiceKey{}, pc)
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn: func(string) { pc.got.Store(false) },
		GotConn: func(httptrace.GotConnInfo) { pc.got.Store(true) },
	})
}

// viaProxy reports whether addr is the proxy that ctx's request was sent
// through. Host names are compared without case: net/http dials the
// proxy's host as its URL spells it (PROXY.corp.example).
func viaProxy(ctx context.Context, addr string) bool {
	pc := choiceOf(ctx)
	if pc == nil {
		return false
	}
	a := pc.addr.Load()
	return a != nil && strings.EqualFold(*a, addr)
}

func newDialGuard(cfg Config) *dialGuard {
	lookup := cfg.LookupNetIP
	if lookup == nil {
		lookup = net.DefaultResolver.LookupNetIP
	}
	return &dialGuard{
		allowPrivate:   cfg.AllowPrivate,
		dialContext:    cfg.DialContext,
		proxy:          cfg.Proxy,
		lookup:         lookup,
		guarded:        &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second, Control: guardControl},
		open:           &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second},
		proxyHandshake: proxyHandshakeTimeout,
	}
}

// dial is the transport's DialContext. Connections to the HTTP proxy itself
// (an operator's explicit choice, often on a private network) for requests
// sent through it are exempt from the guard; everything else goes through
// guardControl. A connection to the proxy is marked in the request's
// proxyChoice and is a proxyConn; a SOCKS5 proxy's gets the deadline of
// its handshake (proxyConn.bound), an HTTP proxy's asked with CONNECT
// that of its answer, once it is asked (connectAsked).
func (g *dialGuard) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	proxied := viaProxy(ctx, addr)
	var conn net.Conn
	var err error
	switch {
	case g.dialContext != nil:
		conn, err = g.dialContext(ctx, network, addr)
	case g.allowPrivate || proxied:
		conn, err = g.open.DialContext(ctx, network, addr)
	default:
		conn, err = g.guarded.DialContext(ctx, network, addr)
	}
	if err != nil || !proxied {
		return conn, err
	}
	pc := choiceOf(ctx)
	pc.dialed.Store(true)
	c := &proxyConn{Conn: conn, limit: g.proxyHandshake}
	switch {
	case pc.socks.Load():
		c.socks = true
		c.bound()
	case pc.connect.Load():
		pc.mu.Lock()
		pc.tunnels = append(pc.tunnels, tunnelDial{dial: ctx, conn: c})
		pc.mu.Unlock()
	}
	return c, nil
}

// connectAsked is the *http.Transport's GetProxyConnectHeader, called
// once the connection to an HTTP proxy is open (and its TLS, for an
// https:// proxy, done), before the CONNECT is written: it bounds the
// connection to the proxy dialled on ctx, whose CONNECT names the host
// (one known by no context is not bounded). net/http dials on a context
// of its own, which no request's end cancels and which has no deadline,
// and on such a context gives the proxy a minute to answer: a proxy
// that took the CONNECT and did not answer held the connection, and the
// goroutine dialling it, that long after the request had given up. It
// adds no header.
func (g *dialGuard) connectAsked(ctx context.Context, _ *url.URL, _ string) (http.Header, error) {
	pc := choiceOf(ctx)
	if pc == nil {
		return nil, nil
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, t := range pc.tunnels {
		if t.dial == ctx && !t.conn.asked.Load() {
			t.conn.asked.Store(true)
			t.conn.bound()
		}
	}
	return nil, nil
}

// proxyConn is a connection to the upstream proxy, through which its
// tunnel to the host runs: its errors name no address, where net/http's
// ("read tcp 10.0.0.7:41234->10.1.2.3:3128: read: connection reset by
// peer") name the proxy's, often an internal one, to the client the
// error is answered to.
//
// A SOCKS5 proxy's connection has a deadline until the proxy's reply to
// the connection request has been read (bound): net/http runs the SOCKS5
// handshake on a context of its own, which no request's end cancels and
// which has no deadline, so a proxy that accepted the connection and
// never answered held it, and the goroutine dialling it, for as long as
// it kept it open. An HTTP proxy's has the same deadline from when it
// is asked with CONNECT until its answer has been read (connectAsked,
// proxyChoice.connectAnswered); before that, the TLS handshake with an
// https:// proxy has net/http's bound (TLSHandshakeTimeout). What
// follows is bounded by net/http: the TLS handshake with the host
// (TLSHandshakeTimeout), then the requests' own timeouts and the idle
// connections'. The deadline is lifted before the connection goes to
// any request: a download through the tunnel may take hours, and a
// connection idle in the pool is net/http's to close.
type proxyConn struct {
	net.Conn
	// limit is the handshake's bound (dialGuard.proxyHandshake).
	limit time.Duration
	// bounded: the handshake's deadline, at deadline (UnixNano), is in
	// force.
	bounded  atomic.Bool
	deadline atomic.Int64
	// asked: the connection request, naming the host, was sent (or is
	// being sent): from then on the proxy is connecting to the host.
	asked atomic.Bool
	// socks: the proxy is a SOCKS5 proxy, whose handshake the
	// connection follows itself: its reply to the connection request
	// (asked) lifts the bound. The first bytes of that reply are in
	// reply, of which got were read, by the goroutine dialling.
	socks bool
	reply [5]byte
	got   int
}

// bound sets the connection's deadline limit from now, for the
// handshake.
func (c *proxyConn) bound() {
	d := time.Now().Add(c.limit)
	c.deadline.Store(d.UnixNano())
	c.bounded.Store(true)
	c.Conn.SetDeadline(d)
}

// lift ends the handshake's deadline.
func (c *proxyConn) lift() {
	if c.bounded.CompareAndSwap(true, false) {
		c.Conn.SetDeadline(time.Time{})
	}
}

func (c *proxyConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.bounded.Load() {
		if c.socks && c.asked.Load() && c.replied(p[:n]) {
			c.lift()
		}
		return n, c.failed(err)
	}
	return n, unaddressed(err)
}

func (c *proxyConn) Write(p []byte) (int, error) {
	if c.bounded.Load() {
		if c.socks && socksConnectRequest(p) {
			c.asked.Store(true)
		}
		n, err := c.Conn.Write(p)
		return n, c.failed(err)
	}
	n, err := c.Conn.Write(p)
	return n, unaddressed(err)
}

// failed is err, a read's or a write's in the handshake, without
// addresses, or the handshake's deadline passed (a *proxyStall).
func (c *proxyConn) failed(err error) error {
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && time.Now().UnixNano() >= c.deadline.Load() {
		return &proxyStall{hostAsked: c.asked.Load(), limit: c.limit}
	}
	return unaddressed(err)
}

// replied takes p, the next bytes of the proxy's reply to the connection
// request, and reports whether the reply has been read whole (RFC 1928
// section 6: version, reply, a reserved byte, the address type, the
// bound address, 4 or 16 bytes or a name after its length, and a port).
func (c *proxyConn) replied(p []byte) bool {
	for _, b := range p {
		if c.got < len(c.reply) {
			c.reply[c.got] = b
		}
		c.got++
	}
	if c.got < 4 {
		return false
	}
	size := 4 + 2
	switch c.reply[3] {
	case 1:
		size += 4
	case 4:
		size += 16
	case 3:
		if c.got < 5 {
			return false
		}
		size += 1 + int(c.reply[4])
	default:
		return false // not SOCKS5: the dialer gives up
	}
	return c.got >= size
}

// socksConnectRequest reports whether p is a SOCKS5 connection request
// (RFC 1928 section 4: version 5, command CONNECT, a reserved zero, an
// address type, at least 8 bytes), as net/http's SOCKS5 dialer writes it
// in one write; its greeting (3 or 4 bytes) and its user and password
// (version 1) are not.
func socksConnectRequest(p []byte) bool {
	return len(p) >= 8 && p[0] == 5 && p[1] == 1 && p[2] == 0 && (p[3] == 1 || p[3] == 3 || p[3] == 4)
}

// unaddressed is err, a connection's, without the addresses of the
// *net.OpError it is.
func unaddressed(err error) error {
	op, ok := err.(*net.OpError)
	if !ok || (op.Source == nil && op.Addr == nil) {
		return err
	}
	bare := *op
	bare.Source, bare.Addr = nil, nil
	return &bare
}

// targetLookupTimeout bounds the resolution of a proxied request's target
// host (proxyFor): a resolver that does not answer by then, as on a sealed
// network whose only way to names is the proxy, leaves the name to the
// proxy instead of holding every request back.
const targetLookupTimeout = 2 * time.Second

// proxyFor wraps Config.Proxy. When a request goes through a proxy, the
// proxy resolves and connects to the target, so the dial guard only sees the
// proxy's address: the target host is then checked here instead, as an IP
// literal or by resolving its name. This is best effort: the proxy resolves
// the name again, with its own resolver, when it connects, and may get
// another answer (a name whose answers change from one query to the next,
// DNS rebinding, or a resolver of the proxy's that knows internal names);
// and a name that does not resolve here within targetLookupTimeout is left
// to the proxy. Only the proxy's own egress policy can stop it connecting
// to a private address.
func (g *dialGuard) proxyFor(req *http.Request) (*url.URL, error) {
	u, err := g.proxy(req)
	if err != nil || u == nil {
		return u, err
	}
	if !g.allowPrivate {
		if err := g.checkTargetHost(req.Context(), req.URL.Hostname()); err != nil {
			return nil, err
		}
	}
	if pc := choiceOf(req.Context()); pc != nil {
		addr := proxyDialAddr(u)
		pc.addr.Store(&addr)
		pc.connect.Store((u.Scheme == "http" || u.Scheme == "https") && req.URL.Scheme == "https")
		pc.socks.Store(u.Scheme == "socks5" || u.Scheme == "socks5h")
	}
	return u, nil
}

// checkTargetHost refuses a proxied request's target host when it is a
// non-public address, in any spelling a resolver reads as one, or a name
// that resolves here to one (any of its addresses). A name that does not
// resolve here is let through. The host is judged as the proxy is asked
// for it (targetName): full-width digits and dots are an IPv4 address.
func (g *dialGuard) checkTargetHost(ctx context.Context, host string) error {
	host = targetName(host)
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if a, err := netip.ParseAddr(h); err == nil {
		return checkAddr(a)
	}
	if endsInNumber(h) {
		// Not a name: an IPv4 address in one of inet_aton's other forms
		// (127.1, 2130706433, 0x7f000001, 0177.0.0.1), which the proxy's
		// resolver reads as the address it spells while ours finds no
		// such name.
		return fmt.Errorf("%w: %s is an IPv4 address in a form other than dotted decimal", ErrPrivateAddress, host)
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return fmt.Errorf("%w: %s", ErrPrivateAddress, host)
	}
	lctx, cancel := context.WithTimeout(ctx, targetLookupTimeout)
	defer cancel()
	addrs, err := g.lookup(lctx, "ip", host)
	if err != nil {
		return nil // the proxy may resolve names this machine cannot
	}
	for _, a := range addrs {
		if err := checkAddr(a); err != nil {
			return fmt.Errorf("%s resolves to a non-public address: %w", host, err)
		}
	}
	return nil
}

// targetName is the name net/http asks a proxy for, in its CONNECT, when
// a request's URL names host: a host that is not ASCII in its IDNA ASCII
// form, which maps full-width letters, digits and dots and the
// ideographic full stop to ASCII ones (１２７．０．０．１ is 127.0.0.1).
func targetName(host string) string {
	if isASCII(host) {
		return host
	}
	if a, err := idna.Lookup.ToASCII(host); err == nil {
		return a
	}
	return host
}

// endsInNumber reports whether host's last label is a number (decimal, or
// hexadecimal after 0x), as the URL standard tells an IPv4 host from a
// domain: no top-level domain is one.
func endsInNumber(host string) bool {
	last := host[strings.LastIndex(host, ".")+1:]
	if l := strings.TrimPrefix(last, "0x"); l != last {
		return strings.Trim(l, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// proxyDialAddr is the host:port net/http dials for a proxy URL, but for
// the host's case (see viaProxy): a host name that is not ASCII in its
// IDNA ASCII form (targetName), as net/http spells it.
func proxyDialAddr(u *url.URL) string {
	host := targetName(u.Hostname())
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "socks5", "socks5h":
			port = "1080"
		default:
			port = "80"
		}
	}
	return net.JoinHostPort(host, port)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
