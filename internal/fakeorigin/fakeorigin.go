// Package fakeorigin runs a fake origin provider registry for tests and
// benchmarks: an HTTPS server on 127.0.0.1 (random port) that answers
// service discovery, the provider registry protocol, signed SHA256SUMS and
// provider zip archives, with knobs to inject failures, tampering, latency,
// throttling and gating.
//
// It owns only the fake server: a throwaway CA, two OpenPGP keys, generated
// archives and hit counters. It does not implement any part of the mirror and
// takes no *testing.T, so benchmarks and end-to-end tests can use it too.
package fakeorigin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// Options configures Start. The zero value is a single small HTTPS server.
type Options struct {
	// Hostnames are extra DNS names in the server certificate, for tests that
	// route e.g. "registry.terraform.io" to this server with a custom dialer.
	// Default: only 127.0.0.1, ::1 and localhost.
	Hostnames []string
	// SeparateDownloadHost serves SHA256SUMS, signatures and zips from a
	// second TLS server (DownloadAddr), modelling a release CDN. Default false.
	SeparateDownloadHost bool
	// ArchiveSize pads every zip with a stored, incompressible entry up to
	// about this many bytes. Default 0: archives of roughly 1-2 KiB.
	ArchiveSize int64
}

// Kind names one endpoint of the fake registry, for hit counters and
// per-endpoint failure injection.
type Kind string

// Endpoint kinds.
const (
	Discovery Kind = "discovery"
	Versions  Kind = "versions"
	Download  Kind = "download"
	Shasums   Kind = "shasums"
	Signature Kind = "signature"
	Archive   Kind = "archive"
)

type pkey struct{ ns, typ string }

type akey struct{ ns, typ, version, platform string }

type provider struct {
	versions []string            // in the order added
	plats    map[string][]string // version -> platforms
}

type gate struct {
	ch   chan struct{}
	once sync.Once
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

// Origin is a running fake registry. Its methods are safe for concurrent use.
type Origin struct {
	// URL is the base URL of the registry server, "https://127.0.0.1:port".
	URL string
	// Addr is the registry server's "127.0.0.1:port".
	Addr string
	// DownloadAddr is the address serving SHA256SUMS, signatures and zips:
	// equal to Addr unless Options.SeparateDownloadHost.
	DownloadAddr string

	opts    Options
	caPEM   []byte
	pool    *x509.CertPool
	keyA    *openpgp.Entity // advertised in signing_keys
	keyB    *openpgp.Entity // signs when SetWrongSigningKey(true)
	armorA  string
	servers []*http.Server
	closed  chan struct{}
	closeMu sync.Once

	started     chan struct{}
	startedOnce sync.Once

	mu          sync.Mutex
	providers   map[pkey]*provider
	archives    map[akey][]byte
	hits        map[Kind]int
	archiveHits map[akey]int
	down        int
	kindStatus  map[Kind]int
	tamper      map[akey]bool
	omit        map[akey]bool
	shaOverride map[akey]string
	wrongKey    bool
	gate        *gate
	rate        int64
	latency     time.Duration
}

// Start generates a CA, server certificate and signing keys and starts the
// server(s). Call Close when done.
func Start(opts Options) (*Origin, error) {
	if opts.ArchiveSize < 0 {
		return nil, errors.New("fakeorigin: ArchiveSize must not be negative")
	}
	o := &Origin{
		opts:        opts,
		closed:      make(chan struct{}),
		started:     make(chan struct{}),
		providers:   map[pkey]*provider{},
		archives:    map[akey][]byte{},
		hits:        map[Kind]int{},
		archiveHits: map[akey]int{},
		kindStatus:  map[Kind]int{},
		tamper:      map[akey]bool{},
		omit:        map[akey]bool{},
		shaOverride: map[akey]string{},
	}
	cert, caPEM, pool, err := newTLS(opts.Hostnames)
	if err != nil {
		return nil, err
	}
	o.caPEM, o.pool = caPEM, pool
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA}
	if o.keyA, err = openpgp.NewEntity("fakeorigin A", "test", "a@fakeorigin.invalid", cfg); err != nil {
		return nil, fmt.Errorf("fakeorigin: key A: %w", err)
	}
	if o.keyB, err = openpgp.NewEntity("fakeorigin B", "test", "b@fakeorigin.invalid", cfg); err != nil {
		return nil, fmt.Errorf("fakeorigin: key B: %w", err)
	}
	var ab bytes.Buffer
	aw, err := armor.Encode(&ab, openpgp.PublicKeyType, nil)
	if err != nil {
		return nil, err
	}
	if err := o.keyA.Serialize(aw); err != nil {
		return nil, err
	}
	if err := aw.Close(); err != nil {
		return nil, err
	}
	o.armorA = ab.String()

	mainLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	o.Addr = mainLn.Addr().String()
	o.URL = "https://" + o.Addr
	o.DownloadAddr = o.Addr
	lns := []net.Listener{mainLn}
	muxes := []*http.ServeMux{o.mux(!opts.SeparateDownloadHost, true)}
	if opts.SeparateDownloadHost {
		dl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			mainLn.Close()
			return nil, err
		}
		o.DownloadAddr = dl.Addr().String()
		lns = append(lns, dl)
		muxes = append(muxes, o.mux(true, false))
	}
	for i, ln := range lns {
		srv := &http.Server{
			Handler:           muxes[i],
			TLSConfig:         tlsConfig(cert),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          log.New(io.Discard, "", 0),
		}
		o.servers = append(o.servers, srv)
		go srv.ServeTLS(ln, "", "") //nolint:errcheck // ends with ErrServerClosed
	}
	return o, nil
}

// Close stops the servers, aborting in-flight responses (including gated or
// throttled archives).
func (o *Origin) Close() {
	o.closeMu.Do(func() {
		close(o.closed)
		for _, s := range o.servers {
			s.Close()
		}
	})
}

// CertPool returns a pool trusting the server certificate(s).
func (o *Origin) CertPool() *x509.CertPool { return o.pool.Clone() }

// CACertPEM returns the PEM of the throwaway CA that signed the server certificate.
func (o *Origin) CACertPEM() []byte { return bytes.Clone(o.caPEM) }

// AddProvider registers versions of NAMESPACE/TYPE, each available for the
// given platforms ("os_arch", e.g. "linux_amd64"). Calling it again for the
// same provider adds versions (or replaces a version's platforms).
func (o *Origin) AddProvider(namespace, typ string, versions []string, platforms []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := pkey{namespace, typ}
	p := o.providers[k]
	if p == nil {
		p = &provider{plats: map[string][]string{}}
		o.providers[k] = p
	}
	for _, v := range versions {
		if _, ok := p.plats[v]; !ok {
			p.versions = append(p.versions, v)
		}
		p.plats[v] = append([]string(nil), platforms...)
	}
}

// Archive returns the true zip bytes for a registered provider package, or
// nil when it is not registered.
func (o *Origin) Archive(ns, typ, version, platform string) []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.archiveLocked(akey{ns, typ, version, platform})
	return bytes.Clone(b)
}

// SHA256 returns the lowercase hex sha256 of the true archive bytes ("" when
// not registered).
func (o *Origin) SHA256(ns, typ, version, platform string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.archiveLocked(akey{ns, typ, version, platform})
	if b == nil {
		return ""
	}
	return sha(b)
}

// Hits returns how many requests of kind k arrived (failed ones included).
func (o *Origin) Hits(k Kind) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hits[k]
}

// TotalHits returns the number of requests of all kinds.
func (o *Origin) TotalHits() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, v := range o.hits {
		n += v
	}
	return n
}

// ArchiveHits returns how many archive requests arrived for one package.
func (o *Origin) ArchiveHits(ns, typ, version, platform string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.archiveHits[akey{ns, typ, version, platform}]
}

// SetDown makes every request answer status with a JSON error body; 0 restores
// normal service.
func (o *Origin) SetDown(status int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.down = status
}

// SetKindStatus makes requests of kind k answer status with a JSON error
// body; 0 restores normal service.
func (o *Origin) SetKindStatus(k Kind, status int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if status == 0 {
		delete(o.kindStatus, k)
		return
	}
	o.kindStatus[k] = status
}

// TamperArchive serves, while on, the archive with one byte flipped near its
// end (same length). Metadata and SHA256SUMS keep the true sha256.
func (o *Origin) TamperArchive(ns, typ, version, platform string, on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tamper[akey{ns, typ, version, platform}] = on
}

// SetWrongSigningKey makes the registry advertise key A but sign SHA256SUMS
// with key B, so signature verification fails.
func (o *Origin) SetWrongSigningKey(on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.wrongKey = on
}

// OmitFromSums drops that package's line from its version's SHA256SUMS.
func (o *Origin) OmitFromSums(ns, typ, version, platform string, on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.omit[akey{ns, typ, version, platform}] = on
}

// SetShasumOverride makes the download JSON's "shasum" report hex instead of
// the true value; "" turns the override off.
func (o *Origin) SetShasumOverride(ns, typ, version, platform, hex string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := akey{ns, typ, version, platform}
	if hex == "" {
		delete(o.shaOverride, k)
		return
	}
	o.shaOverride[k] = hex
}

// GateArchives gates archive responses starting from now: each sends its
// headers (with Content-Length) and the first half of the body, flushes, then
// blocks until release is called, the request ends or the Origin closes.
// release is idempotent and ungates later requests too.
func (o *Origin) GateArchives() (release func()) {
	g := &gate{ch: make(chan struct{})}
	o.mu.Lock()
	o.gate = g
	o.mu.Unlock()
	return func() {
		g.open()
		o.mu.Lock()
		if o.gate == g {
			o.gate = nil
		}
		o.mu.Unlock()
	}
}

// WaitArchiveStarted blocks until at least one gated archive response has
// flushed its first half (ever, on this Origin), or the Origin is closed.
func (o *Origin) WaitArchiveStarted() {
	select {
	case <-o.started:
	case <-o.closed:
	}
}

// SetArchiveRate throttles archive bodies to about bytesPerSecond; 0 means
// unlimited. It applies to responses already in flight too.
func (o *Origin) SetArchiveRate(bytesPerSecond int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rate = bytesPerSecond
}

// SetLatency adds d before every response.
func (o *Origin) SetLatency(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.latency = d
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func splitPlatform(p string) (goos, arch string) {
	goos, arch, _ = strings.Cut(p, "_")
	return goos, arch
}

func zipName(typ, version, platform string) string {
	return fmt.Sprintf("terraform-provider-%s_%s_%s.zip", typ, version, platform)
}

func sumsName(typ, version string) string {
	return fmt.Sprintf("terraform-provider-%s_%s_SHA256SUMS", typ, version)
}

// known reports whether the package is registered. Caller holds o.mu.
func (o *Origin) knownLocked(k akey) bool {
	p := o.providers[pkey{k.ns, k.typ}]
	if p == nil {
		return false
	}
	for _, pl := range p.plats[k.version] {
		if pl == k.platform {
			return true
		}
	}
	return false
}

// archiveLocked returns the cached true archive, building it on first use.
// Caller holds o.mu.
func (o *Origin) archiveLocked(k akey) []byte {
	if !o.knownLocked(k) {
		return nil
	}
	if b, ok := o.archives[k]; ok {
		return b
	}
	b := buildArchive(k, o.opts.ArchiveSize)
	o.archives[k] = b
	return b
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	w.WriteHeader(status)
	w.Write(b) //nolint:errcheck // client may be gone
}

func writeError(w http.ResponseWriter, status int) {
	writeJSON(w, status, map[string][]string{"errors": {http.StatusText(status)}})
}

// sleep waits d unless ctx ends or the Origin closes; it reports whether the
// full duration elapsed.
func (o *Origin) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-o.closed:
	}
	return false
}

// begin counts the hit and applies latency and injected failures; it reports
// whether the handler should go on.
func (o *Origin) begin(w http.ResponseWriter, r *http.Request, k Kind, ak *akey) bool {
	o.mu.Lock()
	o.hits[k]++
	if ak != nil {
		o.archiveHits[*ak]++
	}
	lat, status := o.latency, o.down
	if status == 0 {
		status = o.kindStatus[k]
	}
	o.mu.Unlock()
	if !o.sleep(r.Context(), lat) {
		return false
	}
	if status != 0 {
		writeError(w, status)
		return false
	}
	return true
}
