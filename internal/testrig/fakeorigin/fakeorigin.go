// Package fakeorigin runs a fake origin provider registry for tests and
// benchmarks: an HTTPS server on 127.0.0.1 (random port) that answers
// service discovery, the provider registry protocol, signed SHA256SUMS
// documents and provider zip archives, with knobs to inject failures,
// tampering, wrong signatures, latency, throttling and gating.
//
// It owns only the fake server: a throwaway CA, two OpenPGP keys, generated
// archives, hit counters and the injection switches. It implements no part
// of the mirror and takes no *testing.T, so unit tests, end-to-end tests with
// the real terraform binary and benchmark programs can all use it.
//
// Routes (on Addr):
//
//	GET /.well-known/terraform.json                           {"providers.v1":"/v1/providers/","modules.v1":"/v1/modules/"}
//	GET /v1/providers/NS/TYPE/versions                        versions JSON (404: unknown provider)
//	GET /v1/providers/NS/TYPE/VERSION/download/OS/ARCH        package JSON (404: unknown version or platform)
//
// and, on DownloadAddr (the same server unless Options.SeparateDownloadHost):
//
//	GET /releases/NS/TYPE/VERSION/terraform-provider-TYPE_VERSION_SHA256SUMS      every platform's line (and the manifest's)
//	GET /releases/NS/TYPE/VERSION/terraform-provider-TYPE_VERSION_SHA256SUMS.sig  binary detached signature
//	GET /releases/NS/TYPE/VERSION/terraform-provider-TYPE_VERSION_OS_ARCH.zip     the archive
//
// Registry modules, Git repositories and tarballs are served on Addr too
// (see modules.go).
package fakeorigin

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
)

// Options configures Start. The zero value is one HTTPS server with small
// archives and no authentication.
type Options struct {
	// Hostnames are extra names (DNS names or IP addresses) in the server
	// certificate, for tests that route e.g. "registry.terraform.io" to
	// this server with a custom dialer. 127.0.0.1, ::1 and localhost are
	// always included. Default: none.
	Hostnames []string
	// SeparateDownloadHost serves SHA256SUMS, signatures and archives from
	// a second TLS server (DownloadAddr, same CA), modelling a release CDN
	// on another host. Default false: everything is on Addr.
	SeparateDownloadHost bool
	// RelativeDownloadURLs makes the package JSON's download_url,
	// shasums_url and shasums_signature_url path-absolute references
	// ("/releases/...") that clients resolve against the package JSON's
	// URL. Ignored with SeparateDownloadHost. Default false: absolute
	// https URLs.
	RelativeDownloadURLs bool
	// PackageHashes adds OpenTofu's "packages" to the package JSON, as
	// registry.opentofu.org serves it: the zh: and h1: hashes and the size
	// of the archive of every platform of the version. Default false: the
	// package JSON has no "packages", as registry.terraform.io's.
	PackageHashes bool
	// ReleaseManifest lists the release's manifest.json in every
	// SHA256SUMS, terraform-provider-TYPE_VERSION_manifest.json, as real
	// registries' SHA256SUMS do (Terraform then records a zh: hash for it
	// too). Default false: one line per platform.
	ReleaseManifest bool
	// ArchiveSize is the exact size in bytes of every generated zip: the
	// provider executable plus a stored entry of seeded pseudo-random
	// (incompressible) padding. Sizes below the smallest possible archive
	// (about 300 bytes) give the archive without padding. Archives are
	// generated on first use and kept in memory. Default 0: the smallest
	// archive, just the executable (its bytes are stable: golden files
	// depend on them). Negative is an error.
	ArchiveSize int64
	// RequireToken, when set, makes the versions and package endpoints
	// answer 401 unless the request carries "Authorization: Bearer
	// RequireToken". Discovery and release files (SHA256SUMS, signature,
	// archive) stay public, as clients fetch those without credentials.
	// Default "": no authentication.
	RequireToken string
	// ModulesAnyCase answers a module's namespace, name and system in
	// any case, as registry.terraform.io does (Terraform-AWS-Modules/VPC/AWS
	// is terraform-aws-modules/vpc/aws). Default false: matched with their
	// case, as a registry serving static files does.
	ModulesAnyCase bool
	// SigningKeyExpiry makes the registry's signing key (the one
	// SigningKey and ArmoredPublicKey give) expire this long after it was
	// made, on 1 January 2000, as a publisher's key made with an expiry
	// that it let pass: a SHA256SUMS signed before then (SetSignedAt)
	// was signed while the key was valid. Default 0: it never expires.
	SigningKeyExpiry time.Duration
}

// Kind names one endpoint of the fake registry, for hit counters and
// per-endpoint failure injection.
type Kind string

// Endpoint kinds.
const (
	Discovery Kind = "discovery" // /.well-known/terraform.json
	Versions  Kind = "versions"  // provider versions list
	Download  Kind = "download"  // package metadata (download JSON)
	Shasums   Kind = "shasums"   // SHA256SUMS document
	Signature Kind = "signature" // SHA256SUMS.sig
	Archive   Kind = "archive"   // provider zip
	// ArchiveSize is a GET of a provider zip's first byte only (Range:
	// bytes=0-0), answered 206 with the total in Content-Range; it is not
	// an archive download and does not count as one.
	ArchiveSize Kind = "archive_size"
)

// Kinds returns every Kind.
func Kinds() []Kind {
	return []Kind{Discovery, Versions, Download, Shasums, Signature, Archive, ArchiveSize}
}

type pkey struct{ ns, typ string }

type akey struct{ ns, typ, version, platform string }

type provider struct {
	versions []string            // in the order added
	plats    map[string][]string // version -> platforms
}

// built is one generated archive; data and sha are set once by once.
type built struct {
	once sync.Once
	data []byte
	sha  string
}

type gate struct {
	release     chan struct{}
	releaseOnce sync.Once
	started     chan struct{} // closed when a response has sent its first half
	startedOnce sync.Once
}

type canned struct {
	body        []byte
	contentType string
}

type failN struct{ n, status int }

// Origin is a running fake registry. Its methods are safe for concurrent
// use, and every injection can be changed while requests are in flight.
type Origin struct {
	// URL is the registry server's base URL, "https://127.0.0.1:port".
	URL string
	// Addr is the registry server's "127.0.0.1:port".
	Addr string
	// Host equals Addr: the host name to use in provider addresses and
	// svchost lookups when no custom dialer maps another name here.
	Host string
	// DownloadAddr is the "127.0.0.1:port" serving SHA256SUMS, signatures
	// and archives: Addr unless Options.SeparateDownloadHost.
	DownloadAddr string
	// CACertPEM is the PEM of the throwaway CA that signed the server
	// certificate(s). Do not modify it.
	CACertPEM []byte

	opts      Options
	pool      *x509.CertPool
	keyA      *openpgp.Entity // advertised in signing_keys
	keyB      *openpgp.Entity // signs when SetWrongSigningKey(true)
	armorA    string
	armorB    string
	servers   []*http.Server
	closed    chan struct{}
	closeOnce sync.Once
	// delayed counts the requests SetLatency holds now.
	delayed atomic.Int64

	mu           sync.Mutex
	providers    map[pkey]*provider
	archives     map[akey]*built
	hits         map[Kind]int
	archiveHits  map[akey]int
	lastAuth     map[Kind][]string
	down         int
	kindStatus   map[Kind]int
	kindBody     map[Kind]canned
	failNext     map[Kind]failN
	retryAfter   string
	tamper       map[akey]bool
	replaced     map[akey]*built // SetArchiveBytes
	omit         map[akey]bool
	shaOverride  map[akey]string
	answerOf     map[akey]akey // download answers given as another package's
	hashOverride map[akey][]string
	sizeOverride map[akey]int64     // SetStatedSize
	lengthHidden bool               // SetArchiveLengthHidden
	urlGen       int                // ExpireDownloadURLs: the signature an archive URL must carry
	signedAt     map[akey]time.Time // SetSignedAt, by version (platform "")
	extraSums    map[akey][]string  // SetExtraSumsLines, by version (platform "")
	wrongKey     bool
	signingKeys  []string      // SetSigningKeys
	gate         *gate         // nil when archives are not gated
	started      chan struct{} // the latest gate's started
	gated        int           // archive responses blocked at a gate right now
	gatedChanged chan struct{} // closed and replaced whenever gated changes
	rate         int64
	latency      time.Duration
	mods         *moduleState // modules.go; nil until used
}

// Start generates a CA, a server certificate and two signing keys and
// starts the server(s) on 127.0.0.1. Call Close when done.
func Start(opts Options) (*Origin, error) {
	if opts.ArchiveSize < 0 {
		return nil, errors.New("fakeorigin: ArchiveSize must not be negative")
	}
	o := &Origin{
		opts:         opts,
		closed:       make(chan struct{}),
		providers:    map[pkey]*provider{},
		archives:     map[akey]*built{},
		hits:         map[Kind]int{},
		archiveHits:  map[akey]int{},
		lastAuth:     map[Kind][]string{},
		kindStatus:   map[Kind]int{},
		kindBody:     map[Kind]canned{},
		failNext:     map[Kind]failN{},
		tamper:       map[akey]bool{},
		replaced:     map[akey]*built{},
		omit:         map[akey]bool{},
		shaOverride:  map[akey]string{},
		answerOf:     map[akey]akey{},
		hashOverride: map[akey][]string{},
		sizeOverride: map[akey]int64{},
		signedAt:     map[akey]time.Time{},
		extraSums:    map[akey][]string{},
		started:      make(chan struct{}),
		gatedChanged: make(chan struct{}),
	}
	cert, caPEM, pool, err := newTLS(opts.Hostnames)
	if err != nil {
		return nil, fmt.Errorf("fakeorigin: certificates: %w", err)
	}
	o.CACertPEM, o.pool = caPEM, pool
	if o.keyA, o.armorA, err = newSigningKeyExpiring("fakeorigin key A", "a@fakeorigin.invalid", opts.SigningKeyExpiry); err != nil {
		return nil, err
	}
	if o.keyB, o.armorB, err = newSigningKey("fakeorigin key B", "b@fakeorigin.invalid"); err != nil {
		return nil, err
	}

	mainLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakeorigin: %w", err)
	}
	o.Addr = mainLn.Addr().String()
	o.Host = o.Addr
	o.URL = "https://" + o.Addr
	o.DownloadAddr = o.Addr
	lns := []net.Listener{mainLn}
	handlers := []http.Handler{o.mux(true, !opts.SeparateDownloadHost)}
	if opts.SeparateDownloadHost {
		dl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			mainLn.Close()
			return nil, fmt.Errorf("fakeorigin: %w", err)
		}
		o.DownloadAddr = dl.Addr().String()
		lns = append(lns, dl)
		handlers = append(handlers, o.mux(false, true))
	}
	for i, ln := range lns {
		srv := &http.Server{
			Handler:           handlers[i],
			TLSConfig:         tlsConfig(cert),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          log.New(io.Discard, "", 0), // handshake noise from clients that do not trust the CA
		}
		o.servers = append(o.servers, srv)
		go srv.ServeTLS(ln, "", "") //nolint:errcheck // returns ErrServerClosed after Close
	}
	return o, nil
}

// keyCreated is when the signing keys say they were made.
var keyCreated = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func newSigningKey(name, email string) (*openpgp.Entity, string, error) {
	return newSigningKeyExpiring(name, email, 0)
}

// newSigningKeyExpiring is newSigningKey for a key that expires expiry
// after it was made (0: never).
func newSigningKeyExpiring(name, email string, expiry time.Duration) (*openpgp.Entity, string, error) {
	if expiry < 0 || expiry > 100*365*24*time.Hour {
		return nil, "", fmt.Errorf("fakeorigin: signing key expiry %s out of range", expiry)
	}
	// Made long ago, so that it may sign at any time a test chooses
	// (SetSignedAt): a key does not sign before it exists.
	e, err := openpgp.NewEntity(name, "test only", email,
		&packet.Config{Algorithm: packet.PubKeyAlgoEdDSA, Time: func() time.Time { return keyCreated },
			KeyLifetimeSecs: uint32(expiry / time.Second)})
	if err != nil {
		return nil, "", fmt.Errorf("fakeorigin: signing key: %w", err)
	}
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	if err != nil {
		return nil, "", err
	}
	if err := e.Serialize(w); err != nil {
		return nil, "", err
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	return e, b.String(), nil
}

// Close stops the servers, aborting in-flight responses (including gated
// and throttled archives). It is idempotent.
func (o *Origin) Close() {
	o.closeOnce.Do(func() {
		close(o.closed)
		for _, s := range o.servers {
			s.Close()
		}
	})
}

// CertPool returns a new pool trusting the server certificate(s).
func (o *Origin) CertPool() *x509.CertPool { return o.pool.Clone() }

// CAFile writes CACertPEM to a new file in dir (for SSL_CERT_FILE) and
// returns its path.
func (o *Origin) CAFile(dir string) (string, error) {
	f, err := os.CreateTemp(dir, "fakeorigin-ca-*.pem")
	if err != nil {
		return "", err
	}
	_, werr := f.Write(o.CACertPEM)
	if err := errors.Join(werr, f.Close()); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// ArmoredPublicKey returns the ASCII-armored public key the registry
// advertises in signing_keys (and signs with, unless SetWrongSigningKey).
func (o *Origin) ArmoredPublicKey() string { return o.armorA }

// ArmoredPublicKeyB returns key B's public key, ASCII-armored: with
// SetWrongSigningKey(true) and SetSigningKeys(o.ArmoredPublicKeyB()), the
// origin has rotated its signing key, re-signing what it signed with A.
func (o *Origin) ArmoredPublicKeyB() string { return o.armorB }

// KeyID returns the advertised key's ID as the package JSON's key_id
// (16 uppercase hex digits).
func (o *Origin) KeyID() string { return o.keyA.PrimaryKey.KeyIdString() }

// SigningKey is the entry of signing_keys.gpg_public_keys in every package
// response: key A with its id, and a source and source URL naming the fake
// origin (no trust signature), so that tests can see all five fields
// passed on.
func (o *Origin) SigningKey() registryjson.GPGPublicKey {
	return registryjson.GPGPublicKey{
		KeyID:      o.KeyID(),
		ASCIIArmor: o.armorA,
		Source:     "fakeorigin",
		SourceURL:  "https://fakeorigin.invalid/security",
	}
}

// AddProvider registers versions of NAMESPACE/TYPE, each available for the
// given platforms ("os_arch", e.g. "linux_amd64"). Calling it again for the
// same provider adds versions, or replaces a known version's platforms.
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

// Archive returns a copy of the true zip bytes of a registered package, or
// nil when it is not registered.
func (o *Origin) Archive(ns, typ, version, platform string) []byte {
	if b := o.archive(akey{ns, typ, version, platform}); b != nil {
		return bytes.Clone(b.data)
	}
	return nil
}

// SHA256 returns the lowercase hex sha256 of the true archive bytes ("" when
// the package is not registered).
func (o *Origin) SHA256(ns, typ, version, platform string) string {
	if b := o.archive(akey{ns, typ, version, platform}); b != nil {
		return b.sha
	}
	return ""
}

// Filename returns the package's file name,
// "terraform-provider-TYPE_VERSION_OS_ARCH.zip".
func (o *Origin) Filename(ns, typ, version, platform string) string {
	return zipName(typ, version, platform)
}

// ArchivePath returns the URL path of the package's archive on DownloadAddr.
func (o *Origin) ArchivePath(ns, typ, version, platform string) string {
	return releasePath(ns, typ, version) + zipName(typ, version, platform)
}

// ArchiveURL returns the absolute URL of the package's archive.
func (o *Origin) ArchiveURL(ns, typ, version, platform string) string {
	return "https://" + o.DownloadAddr + o.ArchivePath(ns, typ, version, platform)
}

// Hits returns how many requests of kind k arrived since Start or
// ResetHits, failed and injected ones included.
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

// LastAuthHeaders returns the Authorization header values of the most
// recent request of kind k: empty when it had none, nil when no request of
// that kind arrived since Start or ResetHits.
func (o *Origin) LastAuthHeaders(k Kind) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	v, ok := o.lastAuth[k]
	if !ok {
		return nil
	}
	return append([]string{}, v...)
}

// ResetHits zeroes every hit counter and forgets the recorded
// Authorization headers.
func (o *Origin) ResetHits() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.hits)
	clear(o.archiveHits)
	clear(o.lastAuth)
}

// knownLocked reports whether the package is registered. Caller holds o.mu.
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

// archive returns the package's generated archive, building it on first
// use (outside o.mu, so large archives do not stall other requests); nil
// when the package is not registered.
func (o *Origin) archive(k akey) *built {
	o.mu.Lock()
	if !o.knownLocked(k) {
		o.mu.Unlock()
		return nil
	}
	if b := o.replaced[k]; b != nil {
		o.mu.Unlock()
		return b
	}
	b := o.archives[k]
	if b == nil {
		b = &built{}
		o.archives[k] = b
	}
	o.mu.Unlock()
	b.once.Do(func() {
		b.data = buildArchive(k, o.opts.ArchiveSize)
		b.sha = sha(b.data)
	})
	return b
}

// sleep waits d unless ctx ends or the Origin closes; it reports whether the
// full duration elapsed.
// Delayed is how many requests SetLatency holds now: those under way
// whose client has not gone.
func (o *Origin) Delayed() int { return int(o.delayed.Load()) }

func (o *Origin) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	o.delayed.Add(1)
	defer o.delayed.Add(-1)
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

// BenchVersions returns the 40 versions, 1.0.0 to 4.9.0, of the provider
// whose index.json and VERSION.json figure 2 of BENCHMARKS.md measures;
// BenchPlatforms are its 6 platforms. The bench harness and the in-process
// benchmarks of proxy and cmd/tfmirror serve the same provider.
func BenchVersions() []string {
	vs := make([]string, 0, 40)
	for i := range 40 {
		vs = append(vs, fmt.Sprintf("%d.%d.0", 1+i/10, i%10))
	}
	return vs
}

// BenchPlatforms are the platforms of the figure-2 provider (BenchVersions).
var BenchPlatforms = []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64", "windows_amd64", "freebsd_amd64"}
