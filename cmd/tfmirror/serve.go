package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	svchost "github.com/hashicorp/terraform-svchost"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/airgap"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/originwatch"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/certs"
	"github.com/tfmirror/tfmirror/v2/internal/httpserve"
	"github.com/tfmirror/tfmirror/v2/internal/jsonlog"
	"github.com/tfmirror/tfmirror/v2/internal/logwriter"
	"github.com/tfmirror/tfmirror/v2/metrics"
	"github.com/tfmirror/tfmirror/v2/proxy"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// overrides replace parts of the wiring in tests: how origins are dialled
// and which CAs they are trusted with.
type overrides struct {
	dialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	rootCAs     *x509.CertPool
	// origin adjusts the origin client's config (retry delays, breaker).
	origin func(*discovery.Config)
	// environ replaces os.Environ for TF_TOKEN_ and proxy variables.
	environ []string
	// keepStdLog leaves the standard logger alone (tests running
	// subcommands in process).
	keepStdLog bool
	// stdin replaces os.Stdin, which `tfmirror sync -` reads.
	stdin io.Reader
	// evictNothing has the cache's size limit evict nothing
	// (retention.Config.EvictNothing): cache prune --dry-run, which
	// promises to remove nothing, on a cache over the limit its
	// configuration file sets. (The commands that open the cache sealed,
	// cache verify, policy explain and export, evict nothing as it is.)
	evictNothing bool
	// listEvictions has retention's prune list what the cache's size
	// limit evicted, or with --dry-run would evict
	// (retention.Config.Evictions): cache prune.
	listEvictions bool
}

// server is a wired tfmirror: cache, origin client, pull-through engine,
// protocol server.
type server struct {
	cfg          settings.Config
	log          *slog.Logger
	*engineParts // the engine, its cache and origin client
	proxy        *proxy.Server
	metrics      *metrics.Metrics
	// registry holds every collector, for tests to read metrics.
	registry *prometheus.Registry
	handler  http.Handler
	tls      *tls.Config // nil with --insecure-http
	caFile   string      // generated CA, if any
	auth     *proxy.Auth // nil without --auth-tokens-file
	// cert is the certificate served (tls's GetCertificate): the
	// generated one is issued again when a reload puts in force a public
	// URL whose host it does not name (reissueCert), and before it
	// expires (renewIfDue).
	cert atomic.Pointer[tls.Certificate]
	// opCert follows the operator's certificate files (--tls-cert) and
	// puts in force one renewed there (opcert.go); nil with the
	// generated certificate, and without TLS.
	opCert *operatorCert
	// certOutcome is the outcome of the last certificate read or issued
	// while serving (opcert.go).
	certOutcome certOutcome
	// certNames are the names the generated certificate in force was
	// issued for, and renewAt when it is issued again (certs.RenewAt, in
	// Unix nanoseconds; 0: never, an operator's certificate); certMu
	// makes its issues one at a time (renewIfDue, reissueCert).
	certNames atomic.Pointer[[]string]
	renewAt   atomic.Int64
	// notBefore is when the generated certificate in force becomes valid
	// (Unix nanoseconds): one issued while the clock was ahead is issued
	// again at a handshake before then (renewIfDue); 0 once a renewal
	// failed, which renewAt tries again.
	notBefore atomic.Int64
	certMu    sync.Mutex
	// now is the clock of the generated certificate; nil: time.Now.
	now func() time.Time
	// admin runs the admin API (tfmirror sync) on this mirror's engine.
	admin *admin.API
	// conf holds the configuration in force and reloads it; nil until
	// useConfig, and without a configuration file.
	conf atomic.Pointer[settings.Reloader]
	// reloadMu makes reloads one at a time: of two at once (SIGHUP and
	// tfmirror reload), the one that read a file first could otherwise
	// put it in force over the other's newer reading.
	reloadMu sync.Mutex
	// reloadsEnded, set under reloadMu by endReloads, refuses every
	// reload from the shutdown's start (or the shutdown of the engine
	// and the cache after serve failed) on.
	reloadsEnded bool
	// lastReload is what the last reload did, for the status page; nil
	// before the first.
	lastReload atomic.Pointer[proxy.Reload]
	// trust is what imports trust: the keys of the trust settings' files
	// as the last reload (or the start) read them.
	trust atomic.Pointer[airgap.Trust]
	// origins keeps the status page's origin rows.
	origins *originwatch.Watch
	// hurry, closed by a second SIGINT or SIGTERM, ends the shutdown's
	// wait at once; nil: only the deadline ends it.
	hurry <-chan struct{}
	// health is what /readyz reads; set stopping by drain.
	health *proxy.HealthSource
}

// originCircuits reads the circuit breakers of the origin client, which
// is made after the origin watch it reports to.
type originCircuits struct{ m *server }

func (c originCircuits) Circuit(origin string) discovery.Circuit { return c.m.origin.Circuit(origin) }

// originsRemembered reads the origins' not-found answers the engine
// holds; the engine is made after the origin watch too.
type originsRemembered struct{ m *server }

func (r originsRemembered) Entries(origin svchost.Hostname) int {
	return r.m.engine.NotFound().Entries(origin)
}

func newServer(cfg settings.Config, logger *slog.Logger, o overrides) (m *server, err error) {
	m = &server{cfg: cfg, log: logger}
	var origins []string
	for _, o := range cfg.AllowedOrigins {
		h, err := addrs.ParseHost(o)
		if err != nil {
			return nil, fmt.Errorf("--allowed-origins: %q: %w", o, err)
		}
		origins = append(origins, h.String())
	}
	// Metrics first, so that the cache can report evictions from Open on;
	// the cache gauges read the store at scrape time.
	m.registry = prometheus.NewRegistry()
	certExpiry := servedCertExpiry(cfg, &m.cert) // nil without TLS
	m.metrics, err = metrics.New(m.registry, metrics.Options{
		Version: thisBuild().Version, Revision: thisBuild().Commit, Origins: origins, MaxBytes: cfg.CacheMaxBytes,
		Cache:   func() (int, int64) { return m.store.Stats() },
		Damaged: func() int { return m.store.DamagedArchives() },
		// Writable as /readyz finds it: its check (the test write
		// included) is the gauge's too.
		Disk: func() (free, reserve int64, writable bool) {
			return m.store.FreeBytes(), m.store.Reserve(), m.health.CacheWritable()
		},
		Budget: func() (waits, refused int64) { return m.store.BudgetStats() },
		// The breakers as they are at the scrape: a cooldown passes
		// without a request to tell of it.
		Circuits:    func(origin string) bool { return m.origin.Circuit(origin).FailsFast() },
		SharedDown:  func() bool { return m.shared != nil && m.shared.Status() != nil },
		Certificate: certExpiry,
	})
	if err != nil {
		return nil, err
	}
	m.certOutcome.metrics = m.metrics
	// The status page's origin rows: told of each origin request by the
	// origin client, of each client request by the handler (below), and
	// reading the origins' circuit breakers.
	watched := origins
	if len(watched) == 0 {
		watched = discovery.DefaultAllowedOrigins()
	}
	m.origins, err = originwatch.New(watched, originCircuits{m}, originsRemembered{m}, nil)
	if err != nil {
		return nil, err
	}
	// The operator's certificate is read first: one that cannot be read
	// stops serve before anything else is opened, the data directory not
	// made.
	if !cfg.InsecureHTTP && cfg.TLSCert != "" {
		if err := m.setupTLS(); err != nil {
			return nil, err
		}
	}
	// So does a client tokens file or a URL-signing key file that cannot
	// be read or is refused, before anything of the data directory is
	// made (where newAuth keeps a generated signing key, below).
	authRead, err := readAuthFiles(cfg)
	if err != nil {
		return nil, err
	}
	if err := prepareDataDir(cfg.DataDir, "serve", logger); err != nil {
		return nil, err
	}
	m.engineParts, err = openEngine(cfg, logger, o, m.metrics, m.origins)
	if err != nil {
		return nil, err
	}
	shutdown := m.shutdown // m is nil when an error is returned
	defer func() {
		if err != nil {
			shutdown(context.Background())
		}
	}()
	// The generated certificate and keys are written once the data
	// directory is this process's (the cache's lock, taken by openEngine):
	// a second serve refused on it must not have issued the running one's
	// certificate again.
	if !cfg.InsecureHTTP && cfg.TLSCert == "" {
		if err := m.setupTLS(); err != nil {
			return nil, err
		}
	}
	m.auth, err = newAuth(cfg, authRead, logger, m.metrics)
	if err != nil {
		return nil, err
	}
	// One source of the mirror's own state, for /readyz and the status page.
	health := &proxy.HealthSource{Store: m.store, Log: logger}
	m.health = health
	if certExpiry != nil {
		health.Certificate = func() (time.Time, bool) {
			return certExpiry(), m.certOutcome.refused.Load()
		}
	}
	health.OriginCAsRefused = m.originCAs.refused
	if m.shared != nil {
		health.Shared = m.shared.Health
		health.SharedRejected = m.shared.Rejected
	}
	// The doors name the mirror by the URL in force, which the server
	// (made below, before any request) holds and a reload changes.
	mirrorURL := func(r *http.Request) string { return m.proxy.MirrorURL(r) }
	door, err := openOCIDoor(cfg, logger, m.engineParts, m.auth, mirrorURL)
	if err != nil {
		return nil, err
	}
	pkgs, err := m.packages()
	if err != nil {
		return nil, err
	}
	rdoor, err := openReleasesDoor(logger, cfg, m.releases, m.auth, mirrorURL)
	if err != nil {
		return nil, err
	}
	trusted, err := settings.ParseTrustedProxies(cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	cliOff, cliSnippets := cliReleasesStatus(cfg)
	m.proxy, err = proxy.New(proxy.Config{
		OCI:                door,
		Releases:           rdoor,
		CLIReleases:        cliSnippets,
		CLIReleasesOff:     cliOff,
		CLIHeld:            m.releases.Held,
		OCIBlock:           ociBlock(cfg),
		OCIModuleSource:    ociModuleSource(cfg),
		Settings:           m.configuration,
		Auth:               m.auth,
		TrustedProxyRanges: len(trusted),
		Logger:             logger,
		PublicURL:          cfg.PublicURL,
		PlainHTTP:          cfg.InsecureHTTP,
		Version:            thisBuild().String(),
		Health:             health,
		Retention:          m.retention,
		Origins:            m.origins,
		Policy:             func() []string { return m.engine.Inventory().Policy().Rules() },
		SharedStore:        sharedStatus(cfg, m.shared),
	}, pkgs)
	if err != nil {
		return nil, err
	}
	aopts, err := adminOptions(cfg, logger)
	if err != nil {
		return nil, err
	}
	if aopts.OCILayout, err = ociLayoutOption(cfg, m.engineParts); err != nil {
		return nil, err
	}
	// The same reload as on SIGHUP, for tfmirror reload.
	aopts.Reload = func(context.Context) (admin.Reloaded, error) { return m.reload() }
	if len(aopts.Trust.ExportKeys) > 0 || len(aopts.Trust.PublisherKeys) > 0 {
		logger.Info("imports trust these keys", trustAttrs(aopts.Trust)...)
	}
	// The keys as the last reload read them.
	m.trust.Store(&aopts.Trust)
	aopts.TrustNow = m.trustNow
	m.admin, err = admin.New(m.engine, pkgs, m.retention, logger, m.metrics, m.adminOptionsOf(aopts))
	if err != nil {
		return nil, err
	}
	router := m.proxy.Router()
	router.HandleFunc("/healthz", proxy.Healthz).Methods(http.MethodGet, http.MethodHead)
	router.Handle("/readyz", proxy.Readyz(health)).Methods(http.MethodGet, http.MethodHead)
	router.Handle("/metrics", m.metrics.Handler()).Methods(http.MethodGet, http.MethodHead)
	// The server, not its router: it answers warm documents before routing.
	m.handler = proxy.Instrument(m.origins.Count(m.proxy), logger, m.metrics)
	// In front of all: the client address, for the access log and the
	// limit of failed authentication attempts alike.
	m.handler = proxy.TrustProxies(m.handler, trusted)
	logTrustedProxies(logger, cfg, trusted)
	return m, nil
}

// The log lines of logTrustedProxies.
const (
	trustedProxiesMessage   = "client addresses are taken from X-Forwarded-For of requests from these proxies"
	noTrustedProxiesWarning = "plain HTTP behind a proxy with client authentication and no trusted proxies: all clients share the proxy's address and its limit of failed authentication attempts"
)

// logTrustedProxies says at start whose X-Forwarded-For names the
// client, and warns when client authentication is on behind what must be
// a proxy (--insecure-http: TLS ends in front of the mirror) while no
// proxy is trusted: then all clients share the proxy's address, and one
// with a wrong token gets them all refused for a while.
func logTrustedProxies(log *slog.Logger, cfg settings.Config, trusted []netip.Prefix) {
	if len(trusted) > 0 {
		ranges := make([]string, len(trusted))
		for i, p := range trusted {
			ranges[i] = p.String()
		}
		log.Info(trustedProxiesMessage, "trusted_proxies", ranges)
		return
	}
	if cfg.AuthTokensFile != "" && cfg.InsecureHTTP {
		log.Warn(noTrustedProxiesWarning, "hint", "one client's failed authentication attempts (a CI job with a wrong token) get every client refused (429) for a while; "+
			"name the proxy in trusted_proxies (--trusted-proxies)", "failures", proxy.AuthFailureBurst)
	}
}

// setupTLS loads the configured certificate or generates a local CA and
// server certificate in the data directory.
func (m *server) setupTLS() error {
	if m.cfg.TLSCert == "" {
		hosts := certHosts(m.cfg)
		if files, err := m.ensureCert(hosts, m.clock()); err != nil {
			pair, caFile, kerr := unrenewedCert(m.cfg.DataDir, hosts, m.clock(), err, m.log)
			if kerr != nil {
				return kerr
			}
			m.caFile = caFile
			m.serveGenerated(pair, hosts)
			m.notBefore.Store(0)
			m.renewAt.Store(m.clock().Add(time.Hour).UnixNano())
			m.log.Warn("renewing the server certificate from the generated local CA failed; the certificate there, still valid, is served, tried again in an hour",
				"expires", pair.Leaf.NotAfter, "error", err)
		} else {
			if files.Created {
				m.log.Info("issued a server certificate from the generated local CA", "names", hosts)
			}
			if m.caFile, err = filepath.Abs(files.CA); err != nil {
				return err
			}
			if err := m.useGenerated(files, hosts); err != nil {
				return err
			}
		}
	} else {
		oc, err := startOperatorCert(m.cfg, &m.cert, m.clock, m.log, m.certOutcome.count)
		if err != nil {
			return err
		}
		m.opCert = oc
	}
	m.tls = &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			m.renewIfDue()
			m.opCert.recheckIfDue()
			return m.cert.Load(), nil
		},
		NextProtos: nextProtos(m.cfg.HTTP2),
	}
	return nil
}

// shellWord is path as one word of a POSIX shell's command line, to be
// copied from the log and run: as it is when it holds only characters no
// shell reads apart, otherwise in single quotes (a quote in it closed,
// escaped and opened again), so that a data directory with a space or a
// quote in its path sets the whole path. On Windows, whose shells read
// no such quotes, it is path as it is.
func shellWord(path string) string {
	if runtime.GOOS == "windows" {
		return path
	}
	safe := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+,:@%=", r)
	}
	if path != "" && !strings.ContainsFunc(path, func(r rune) bool { return !safe(r) }) {
		return path
	}
	return "'" + strings.ReplaceAll(path, "'", `'\''`) + "'"
}

// warnOutOfDate warns, at start, that the operator's certificate at path
// (its leaf) has expired or is not valid yet at now: it is served all
// the same, as before, and every client refuses it.
func warnOutOfDate(log *slog.Logger, path string, leaf *x509.Certificate, now time.Time) {
	switch {
	case leaf == nil:
	case now.After(leaf.NotAfter):
		log.Warn("the certificate served (--tls-cert "+path+") expired on "+leaf.NotAfter.UTC().Format(time.RFC3339)+
			": clients refuse it; put a renewed one in its place and restart", "tls_cert", path, "not_after", leaf.NotAfter)
	case now.Before(leaf.NotBefore):
		log.Warn("the certificate served (--tls-cert "+path+") is not valid before "+leaf.NotBefore.UTC().Format(time.RFC3339)+
			": clients refuse it until then; check this machine's clock, or put another in its place and restart", "tls_cert", path, "not_before", leaf.NotBefore)
	}
}

// unrenewedCert is what setupTLS serves when err stopped it issuing the
// generated certificate of dataDir for hosts again at start: when it
// could not be written (a full disk, a file system mounted read-only:
// *certs.WriteError) and the one there is still valid at now and names
// hosts (a renewal due weeks before its end), that one, and the absolute
// path of its CA, to serve, with a warning, renewIfDue trying again an
// hour later; otherwise err, which stops the start.
func unrenewedCert(dataDir string, hosts []string, now time.Time, err error, log *slog.Logger) (*tls.Certificate, string, error) {
	var we *certs.WriteError
	if !errors.As(err, &we) {
		return nil, "", err
	}
	files := certs.In(filepath.Join(dataDir, "tls"))
	pair, lerr := loadGenerated(files, log)
	if lerr != nil || now.Before(pair.Leaf.NotBefore) || !now.Before(pair.Leaf.NotAfter) ||
		slices.ContainsFunc(hosts, func(h string) bool { return pair.Leaf.VerifyHostname(h) != nil }) {
		return nil, "", err
	}
	caFile, lerr := filepath.Abs(files.CA)
	if lerr != nil {
		return nil, "", err
	}
	return pair, caFile, nil
}

// useGenerated serves the generated certificate of files, issued for
// hosts, from the next connection on, and has renewIfDue issue it again
// at its renewal time.
func (m *server) useGenerated(files certs.Files, hosts []string) error {
	pair, err := loadGenerated(files, m.log)
	if err != nil {
		return err
	}
	m.serveGenerated(pair, hosts)
	return nil
}

// loadGenerated reads the generated certificate of files (its leaf
// parsed, as parseKeyPair's). Its key is a file tfmirror wrote in its data directory, read
// as readOwnFile reads one: group-writable and this user's (a kubelet's
// fsGroup walk at each mount, a restore), it is made its owner's only
// and logged to log, not refused at every start.
func loadGenerated(files certs.Files, log *slog.Logger) (*tls.Certificate, error) {
	pair, err := readKeyPair(files.Cert, files.Key, func(path string) ([]byte, error) {
		return readOwnFile(path, maxKeyFileBytes, log)
	})
	if err != nil {
		return nil, err
	}
	return &pair, nil
}

// serveGenerated serves pair, the generated certificate issued for hosts,
// from the next connection on.
func (m *server) serveGenerated(pair *tls.Certificate, hosts []string) {
	m.cert.Store(pair)
	m.certNames.Store(&hosts)
	m.renewAt.Store(certs.RenewAt(pair.Leaf).UnixNano())
	m.notBefore.Store(pair.Leaf.NotBefore.UnixNano())
}

// certDue says the generated certificate in force is to be issued again
// at now: its renewal time has come, or it is not valid yet (issued while
// the clock was ahead, and every client refuses it).
func (m *server) certDue(now time.Time) bool {
	at := m.renewAt.Load()
	return at != 0 && (now.UnixNano() >= at || now.UnixNano() < m.notBefore.Load())
}

// renewIfDue issues the generated certificate again, from the same CA
// and for the same names, once its renewal time has come (certs.RenewAt:
// weeks before it expires), in the handshake that finds it due; the
// handshakes meanwhile get the one in force. Checked at start only, a
// certificate reused with a month left expired under a serve that ran
// longer, and every client was refused until a restart. One not valid
// yet (issued while the clock was ahead, then set right) is issued again
// the same way (certDue). A renewal that fails is logged and tried again
// an hour later.
func (m *server) renewIfDue() {
	if !m.certDue(m.clock()) || !m.certMu.TryLock() {
		return
	}
	defer m.certMu.Unlock()
	if !m.certDue(m.clock()) {
		return // renewed since
	}
	hosts, now := *m.certNames.Load(), m.clock()
	files, err := m.ensureCert(hosts, now)
	if err == nil {
		err = m.useGenerated(files, hosts)
	}
	if err != nil {
		m.notBefore.Store(0)
		m.renewAt.Store(now.Add(time.Hour).UnixNano())
		m.log.Error("renewing the server certificate from the generated local CA failed; the certificate in force stays, tried again in an hour",
			"expires", m.cert.Load().Leaf.NotAfter, "error", err)
		m.certOutcome.count("refused")
		return
	}
	m.log.Info("renewed the server certificate from the generated local CA", "names", hosts, "expires", m.cert.Load().Leaf.NotAfter)
	m.certOutcome.count("applied")
}

// ensureCert has the generated CA of the data directory's tls/ issue a
// server certificate for hosts when the one there does not name them or
// is due for renewal at now (certs.Ensure). A CA replaced (weeks before
// it expired) is logged as a warning: clients must trust the new one.
// The CA's key, which certs refuses when others may write it, is first
// made its owner's only when it is this user's (makeOwnOnly), as the
// server's key is when it is read.
func (m *server) ensureCert(hosts []string, now time.Time) (certs.Files, error) {
	dir := filepath.Join(m.cfg.DataDir, "tls")
	makeOwnOnly(filepath.Join(dir, certs.CAKeyFile), m.log)
	files, err := certs.Ensure(dir, hosts, now)
	if err == nil && files.CAReplaced {
		caFile := files.CA
		if abs, aerr := filepath.Abs(caFile); aerr == nil {
			caFile = abs // as the start's SSL_CERT_FILE line names it
		}
		m.log.Warn(caReplacedWarning, "ca_file", caFile)
	}
	return files, err
}

// caReplacedWarning is logged when the generated local CA is replaced.
const caReplacedWarning = "the generated local CA was replaced by a new one (the one there was due to expire, not valid yet, or not a CA of the kind tfmirror makes): clients that trust the old ca.pem refuse the mirror until they trust the new one"

// clock is the time of the generated certificate (server.now).
func (m *server) clock() time.Time {
	if m.now != nil {
		return m.now()
	}
	return time.Now()
}

// reissueCert readies the generated certificate to name cfg's hosts (a
// public URL a reload puts in force), issuing it again from the same CA
// when the one on disk does not, and returns what serves the one on disk
// from the next connection on; an error says it could not be issued, and
// nothing changed in what is served. An operator's certificate
// (--tls-cert) is the operator's: it is left alone (certMisses warns when
// it does not name the public URL's host).
func (m *server) reissueCert(cfg settings.Config) (use func(), err error) {
	none := func() {}
	if m.tls == nil || m.caFile == "" {
		return none, nil
	}
	host := ""
	if u, err := url.Parse(cfg.PublicURL); err == nil {
		host = strings.ToLower(u.Hostname())
	}
	m.certMu.Lock()
	defer m.certMu.Unlock()
	hosts := certHosts(cfg)
	files, err := m.ensureCert(hosts, m.clock())
	if err != nil {
		return nil, fmt.Errorf("issuing the server certificate for %s from the generated local CA: %w", host, err)
	}
	// The one on disk, which Ensure found to name hosts, is served even
	// when Ensure did not issue it: the one served may be another (a
	// renewal between a reload's issue and its putting in force leaves
	// on disk one of the names in force then, and serves the reload's).
	pair, err := loadGenerated(files, m.log)
	if err != nil {
		return nil, fmt.Errorf("issuing the server certificate for %s from the generated local CA: %w", host, err)
	}
	return func() {
		m.certMu.Lock()
		defer m.certMu.Unlock()
		m.serveGenerated(pair, hosts)
		if files.Created {
			m.log.Info("issued a server certificate from the generated local CA", "names", hosts)
		}
	}, nil
}

// certMisses is the warning of a reload putting in force publicURL, whose
// host the operator's certificate (--tls-cert) does not name: every client
// that uses the URL refuses the certificate. "" when it names it, without
// TLS, and with the generated certificate, which reissueCert issues for
// the host.
func (m *server) certMisses(publicURL string) string {
	if m.tls == nil || m.caFile != "" {
		return ""
	}
	u, err := url.Parse(publicURL)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	host := strings.ToLower(u.Hostname())
	if c := m.cert.Load(); c == nil || c.Leaf == nil || c.Leaf.VerifyHostname(host) == nil {
		return ""
	}
	return fmt.Sprintf("public_url: its host %s is not named by the certificate served (--tls-cert %s): clients that use the public URL refuse it; put one that names it in its place and restart",
		host, m.cfg.TLSCert)
}

// loadKeyPair reads the operator's certificate chain and private key
// (readOperatorPair).
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	return readKeyPair(certFile, keyFile, readOperatorKey)
}

// readKeyPair reads a certificate chain and its key (readPair), the key
// read by readKey, and parses them.
func readKeyPair(certFile, keyFile string, readKey func(path string) ([]byte, error)) (tls.Certificate, error) {
	cert, key, err := readPair(certFile, keyFile, readKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	return parseKeyPair(certFile, keyFile, cert, key)
}

// parseKeyPair is the certificate chain and key read from certFile and
// keyFile, its leaf parsed.
func parseKeyPair(certFile, keyFile string, cert, key []byte) (tls.Certificate, error) {
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("loading TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return tls.Certificate{}, fmt.Errorf("loading TLS certificate %s: %w", certFile, err)
		}
	}
	return pair, nil
}

// certHosts are the names the generated certificate is issued for:
// localhost, the loopback addresses, the machine's host name, the host of
// --public-url and those of --tls-san.
func certHosts(cfg settings.Config) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		hosts = append(hosts, strings.ToLower(h))
	}
	if u, err := url.Parse(cfg.PublicURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, strings.ToLower(u.Hostname()))
	}
	for _, n := range cfg.TLSSAN {
		hosts = append(hosts, strings.ToLower(strings.TrimSpace(n)))
	}
	var out []string
	for _, h := range hosts {
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// metricsMaxConnections bounds the connections open at once on the
// metrics listener (--metrics-listen), as --max-connections bounds the
// mirror's port: a scraper or two and the probes need a few, and a flood
// of connections there would otherwise take every file descriptor, which
// the cache's files and the origins' connections need. One beyond them
// waits, unaccepted, for one to close.
const metricsMaxConnections = 64

// nextProtos is what the mirror offers in TLS's protocol negotiation.
// HTTP/1.1 only, unless http2: Terraform and OpenTofu ask for a provider's
// documents and archive one request at a time, so HTTP/2's multiplexing
// brings them nothing, and net/http's HTTP/2 server moves a response in 16
// KiB frames that each pass between two goroutines; a warm 8 MiB archive
// took 1.7 times as long as over HTTP/1.1 (BENCHMARKS.md, figure 6c).
func nextProtos(http2 bool) []string {
	if http2 {
		return []string{"h2", "http/1.1"}
	}
	return []string{"http/1.1"}
}

// serve runs the mirror on ln until ctx is done, then shuts down
// gracefully: no new connections, requests and downloads in flight get
// ShutdownTimeout to finish; then the engine is shut down (downloads still
// running are cancelled and waited for) and the cache is closed cleanly.
func (m *server) serve(ctx context.Context, ln net.Listener) error {
	// The requests under way, for the shutdown's log line.
	var requests atomic.Int64
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		defer requests.Add(-1)
		m.handler.ServeHTTP(w, r)
	})
	// Its own errors at debug (a client can cause as many as it likes),
	// its failed TLS handshakes counted besides, by reason.
	srv := httpserve.New(counted, httpserve.ErrorLog(slog.NewLogLogger(m.log.Handler(), slog.LevelDebug).Writer(), m.metrics.TLSHandshakeFailed))
	// The requests' contexts end only when the shutdown cuts them off
	// (cutOff, with httperr.ErrCutOff), just before their connections are
	// closed: the access log then tells them from clients that went away.
	base, cutOff := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cutOff(nil)
	srv.BaseContext = func(net.Listener) context.Context { return base }
	// At most MaxConnections open: Accept waits for one to close, and the
	// connections beyond them wait in the system's listen queue.
	ln = netutil.LimitListener(ln, m.cfg.MaxConnections)
	m.metrics.ConnectionsLimit(m.cfg.MaxConnections)
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			m.metrics.ConnectionOpened()
		case http.StateClosed, http.StateHijacked:
			m.metrics.ConnectionClosed()
		}
	}
	scheme := "http"
	if m.tls != nil {
		scheme = "https"
		srv.TLSConfig = m.tls
		ln = tls.NewListener(ln, m.tls)
	}

	// One send at most from each of the three servers: none blocks,
	// whichever way serve ends.
	errc := make(chan error, 3)
	go func() { errc <- srv.Serve(ln) }()
	// The metrics listener's and the admin socket's servers, which every
	// way out of serve closes and waits for (stopServers), so that
	// neither the port nor the socket outlives serve.
	var servers sync.WaitGroup
	var metricsSrv *http.Server
	var adminSrv *admin.Server
	stopServers := func() {
		if metricsSrv != nil {
			metricsSrv.Close()
		}
		if adminSrv != nil {
			adminSrv.Close()
		}
		servers.Wait()
	}
	// Background work, stopped (cancelled and waited for) before the
	// engine, the shared store and the cache are closed. (The cache runs
	// its value-log GC itself.)
	bgCtx, cancelBG := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	if m.shared != nil {
		bg.Go(func() { m.checkShared(bgCtx) })
	}
	bg.Go(func() { m.originCAs.follow(bgCtx) })
	stopBackground := func() { cancelBG(); bg.Wait() }
	defer stopBackground()
	if m.cfg.MetricsListen != "" {
		mln, err := net.Listen("tcp", m.cfg.MetricsListen)
		if err != nil {
			srv.Close()
			stopBackground()
			m.shutdownAfterServing()
			return fmt.Errorf("--metrics-listen: %w", err)
		}
		mln = netutil.LimitListener(mln, metricsMaxConnections)
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", m.metrics.Handler())
		// Liveness too, off the port --max-connections bounds: a mirror
		// busy with that many connections is alive.
		mux.HandleFunc("GET /healthz", proxy.Healthz)
		metricsSrv = httpserve.New(mux, slog.NewLogLogger(m.log.Handler(), slog.LevelDebug))
		servers.Go(func() {
			if err := metricsSrv.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		})
		m.log.Info("serving metrics", "url", "http://"+displayAddr(mln.Addr())+"/metrics")
	}
	adminSrv = m.serveAdmin(ctx, errc, &servers)
	// Said once everything a client or a command may reach is up: the
	// mirror's port, the metrics listener and the admin socket (a `tfmirror
	// sync` started on this line finds the serve through the socket).
	m.log.Info("tfmirror is serving", "version", thisBuild().String(), "address", ln.Addr().String(),
		"url", scheme+"://"+displayAddr(ln.Addr())+"/", "allowed_origins", m.cfg.AllowedOrigins)
	warnNoPublicURL(m.log, m.cfg, ln.Addr())
	if m.caFile != "" {
		m.log.Info("TLS uses a generated local CA; clients must trust it: export SSL_CERT_FILE="+shellWord(m.caFile),
			"ca_file", m.caFile)
	}
	select {
	case err := <-errc:
		srv.Close()
		stopServers()
		stopBackground()
		// The downloads under way get --shutdown-timeout, as at a
		// shutdown, not as long as their origins hold them.
		m.shutdownAfterServing()
		return err
	case <-ctx.Done():
	}
	// From the shutdown's start, as a SIGHUP is ignored (reloadOn), a
	// tfmirror reload is refused, the delay of drain included.
	m.endReloads()
	m.drain()
	m.log.Info("shutting down", "timeout", m.cfg.ShutdownTimeout.String(),
		"requests", requests.Load(), "downloads", m.metrics.ArchiveFetches())
	defer stopServers() // the metrics listener last: scraped while the mirror shuts down
	sctx, cancel := m.shutdownContext()
	defer cancel()
	// The admin socket takes no new command from now on either, as the
	// port takes no new connection: a sync, import or prune begun while
	// the requests drain would start work the shutdown cuts off. It stays
	// open, saying the serve is shutting down, until serve returns
	// (stopServers; closing the listener removes the socket file): a
	// command is not told that no serve runs while this one holds the
	// cache. Its commands under way drain beside the requests, to the
	// same deadline.
	adminDone := make(chan error, 1)
	if adminSrv != nil {
		go func() { adminDone <- adminSrv.Drain(sctx) }()
	} else {
		adminDone <- nil
	}
	err := srv.Shutdown(sctx)
	if err != nil {
		msg := "requests still running at the shutdown deadline were cut off"
		if errors.Is(err, context.Canceled) {
			msg = "requests still running were cut off, as the second signal asked"
		}
		m.log.Warn(msg, "error", err, "requests", requests.Load())
		cutOff(httperr.ErrCutOff)
		srv.Close()
	}
	if aerr := <-adminDone; aerr != nil {
		m.log.Warn("admin requests still running at the shutdown deadline were cut off", "error", aerr)
		adminSrv.Close()
	}
	stopBackground()
	// The engine after the server, so that no request starts work it
	// would not wait for; the cache after the engine, so that nothing
	// writes to it once closed.
	if cerr := m.shutdownParts(sctx); cerr != nil {
		return cerr
	}
	m.log.Info("stopped")
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// errSecondSignal ends the shutdown's wait when a second SIGINT or
// SIGTERM arrives.
var errSecondSignal = errors.New("a second signal ended the wait")

// drain is the shutdown's first step, --shutdown-delay: /readyz answers
// 503 while the mirror goes on serving, so that a load balancer (a
// Kubernetes Service) takes it out before its port stops taking
// connections. A second signal ends it at once.
func (m *server) drain() {
	if m.cfg.ShutdownDelay <= 0 {
		return
	}
	m.health.Stopping.Store(true)
	m.log.Info("shutting down: /readyz answers 503, serving on while load balancers take the mirror out",
		"delay", m.cfg.ShutdownDelay.String())
	t := time.NewTimer(m.cfg.ShutdownDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-m.hurry: // nil without signals: the delay alone
	}
}

// shutdownAfterServing shuts the engine and the cache down when serve
// fails once its port has taken connections: the downloads a request
// started get --shutdown-timeout, as at a shutdown, not as long as their
// origins hold them, and are then cut off.
func (m *server) shutdownAfterServing() {
	sctx, cancel := m.shutdownContext()
	defer cancel()
	m.shutdownParts(sctx)
}

// shutdownParts shuts the engine and the cache down (m.shutdown) once
// no reload runs, and refuses every reload from then on (endReloads):
// when serve fails on its own its signal context is not done, and a
// SIGHUP would otherwise reload against the closed parts.
func (m *server) shutdownParts(ctx context.Context) error {
	m.endReloads()
	return m.shutdown(ctx)
}

// endReloads waits for a reload under way, and refuses those after it
// (reload): the mirror is shutting down.
func (m *server) endReloads() {
	m.reloadMu.Lock()
	defer m.reloadMu.Unlock()
	m.reloadsEnded = true
}

// shutdownContext is the shutdown's wait: done at --shutdown-timeout, or
// at once when m.hurry is closed (a second signal), which is logged.
func (m *server) shutdownContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.ShutdownTimeout)
	ctx, hurry := context.WithCancelCause(ctx)
	if m.hurry != nil {
		go func() {
			select {
			case <-m.hurry:
				m.log.Warn("second signal: cutting off the requests and downloads still running now, not at the shutdown deadline",
					"downloads", m.metrics.ArchiveFetches())
				hurry(errSecondSignal)
			case <-ctx.Done():
			}
		}()
	}
	return ctx, func() { hurry(nil); cancel() }
}

// checkShared asks the shared store once, at start-up, whether its bucket
// answers, and whether it honours the conditional writes that leases rely
// on, and says so in the log, so that a wrong bucket, endpoint or
// credentials, or a store that would let two replicas download one
// archive, show when the mirror starts rather than at the first download.
// It holds up nothing: the mirror serves either way, from its own cache
// and the origins while the store does not answer; a store that ignores
// conditional writes is used without leases (each replica downloads for
// itself) and /readyz reports it as degraded.
func (m *server) checkShared(ctx context.Context) {
	if err := m.shared.Check(ctx); err != nil {
		if ctx.Err() == nil {
			m.log.Warn("shared store check failed at start-up; serving from the local cache and the origins until it answers",
				"error", err)
		}
		return
	}
	m.log.Info("shared store reachable")
	// The store logs it when it ignores conditional writes.
	switch err := m.shared.ProbeConditional(ctx); {
	case err == nil:
		m.log.Info("shared store honours conditional writes")
	case !errors.Is(err, sharedstore.ErrConditionalIgnored) && ctx.Err() == nil:
		m.log.Warn("shared store's conditional writes could not be checked at start-up; checked again at the first lease",
			"error", err)
	}
}

// serveAdmin serves the admin API on the data directory's unix socket,
// for `tfmirror sync`, `export` and `import` to work through this process
// while it holds the cache. Without the socket (a data directory path too
// long for one, a file system without sockets) the mirror serves on, and
// says so. It returns nil then; errors of the running server go to errc.
// Its goroutine is counted in servers.
func (m *server) serveAdmin(ctx context.Context, errc chan<- error, servers *sync.WaitGroup) *admin.Server {
	ln, err := admin.Listen(m.cfg.DataDir)
	if err != nil {
		m.log.Warn("admin socket unavailable: tfmirror sync, export and import cannot use this data directory while the mirror runs", "error", err)
		return nil
	}
	srv := m.admin.NewServer(ctx)
	servers.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("admin socket: %w", err)
		}
	})
	m.log.Info("admin API listening", "socket", ln.Addr().String())
	return srv
}

// serve is `tfmirror serve` with the configuration e, until ctx is done;
// reload reads it again (on SIGHUP); hurry, closed, ends the shutdown's
// wait at once.
func serve(ctx context.Context, hurry <-chan struct{}, e *settings.Effective, reload func() (*settings.Effective, error), stderr io.Writer) error {
	cfg := e.Config
	// Log lines are written by one goroutine, in batches under load, so
	// that requests do not queue on the log's lock behind the kernel. The
	// deferred Close writes what is left before serve returns.
	logOut := logwriter.New(stderr, 0)
	defer logOut.Close()
	lvl, err := settings.ParseLevel(cfg.LogLevel)
	if err != nil {
		return err
	}
	level := new(slog.LevelVar)
	level.Set(lvl)
	logger := leveledLogger(cfg.LogFormat, level, logOut)
	// Libraries that log through the standard logger (service discovery)
	// go to the structured log at debug level.
	log.SetFlags(0)
	log.SetOutput(lineLogger{logger})
	keepHeapWithinCgroup(logger, memlimit.FromCgroup)
	// SIGHUP is caught before the mirror is made: one while it starts is
	// reloaded once it serves, not the end of it.
	hup, stopHangups := catchHangups()
	defer stopHangups()

	m, err := newServer(cfg, logger, overrides{})
	if err != nil {
		return err
	}
	if err := m.useConfig(e, reload, level); err != nil {
		m.shutdown(context.Background())
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		m.shutdown(context.Background())
		return err
	}
	m.hurry = hurry
	defer m.reloadOn(ctx, hup)()
	return m.serve(ctx, ln)
}

func newLogger(format, level string, w io.Writer) (*slog.Logger, error) {
	lvl, err := settings.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	return leveledLogger(format, lvl, w), nil
}

// leveledLogger is a logger in format (json or text, in either case) at
// the level lvl says, which may change while it logs (a *slog.LevelVar).
func leveledLogger(format string, lvl slog.Leveler, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: lvl}
	if strings.EqualFold(format, "text") {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	// slog's JSON handler, with a faster way through for access-log lines.
	return slog.New(jsonlog.New(w, opts))
}

// lineLogger writes standard-library log lines to slog at debug level.
type lineLogger struct{ l *slog.Logger }

func (w lineLogger) Write(p []byte) (int, error) {
	w.l.Debug(string(bytes.TrimSpace(p)), "source", "library")
	return len(p), nil
}

// noPublicURLWarning is the line warnNoPublicURL logs.
const noPublicURLWarning = "no public URL: the mirror names itself by each request's Host header in the answers that carry an absolute URL (the status page's snippets, the CLI releases door's index.json, the OCI door's token realm)"

// warnNoPublicURL warns once at start when the mirror serves more than
// loopback without --public-url: then the URLs it hands out are made
// from each request's Host, which whoever reaches it chooses, and a
// cache or CDN in front must keep them per Host.
func warnNoPublicURL(log *slog.Logger, cfg settings.Config, addr net.Addr) {
	if cfg.PublicURL != "" {
		return
	}
	if a, ok := addr.(*net.TCPAddr); ok && a.IP.IsLoopback() {
		return
	}
	log.Warn(noPublicURLWarning, "address", addr.String(),
		"hint", "set public_url (--public-url, TFMIRROR_PUBLIC_URL) to the URL clients use, above all behind a proxy, a load balancer, a cache or a CDN; "+
			"until then a request whose Host is not a host[:port] is refused (400) and X-Forwarded-Proto is read only from trusted proxies")
}

// displayAddr turns a listener address into one a client can use.
func displayAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// disabledIfZero maps a flag's 0 ("none") to discovery.Config's -1; 0
// there means "the default".
func disabledIfZero[T int | int64 | time.Duration](n T) T {
	if n == 0 {
		return -1
	}
	return n
}
