package settings

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/airgap"
	"github.com/tfmirror/tfmirror/v2/internal/hostport"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/releases"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// Config holds the values of the settings of Table, one field each: the
// flags of `tfmirror serve`. Validate checks the values, not what the
// files they name hold: reading those is the command's.
type Config struct {
	Listen              string
	DataDir             string
	TLSCert             string
	TLSKey              string
	InsecureHTTP        bool
	HTTP2               bool
	AllowedOrigins      []string
	AllowPrivateOrigins bool
	Platforms           []string
	VersionsTTL         time.Duration
	DiscoveryTTL        time.Duration
	// NotFoundTTL and NotFoundMaxEntries: the origins' 404 answers
	// remembered (mirror.Config.NotFoundTTL, NotFoundMaxEntries).
	NotFoundTTL        time.Duration
	NotFoundMaxEntries int
	MaxArchiveBytes    int64
	// ArchiveMaxUnpacked and ArchiveMaxEntries bound the check of a
	// provider archive (see verify.Limits).
	ArchiveMaxUnpacked int64
	ArchiveMaxEntries  int
	// MaxArchiveDownloads bounds the origin archive downloads at once
	// (mirror.Config.MaxArchiveDownloads).
	MaxArchiveDownloads int
	MetricsListen       string
	// MaxConnections bounds the client connections open at once on
	// Listen.
	MaxConnections int
	PublicURL      string
	// OCIProviderPrefix and OCIModulePrefix are the repository prefixes
	// of the OCI distribution front door (see oci.NewNames).
	OCIProviderPrefix   string
	OCIModulePrefix     string
	LogFormat           string
	LogLevel            string
	ShutdownTimeout     time.Duration
	ShutdownDelay       time.Duration
	CacheMaxBytes       int64
	DiskReserve         int64 // 0: free space not checked
	CacheVerifyInterval time.Duration
	AuthTokensFile      string
	URLSigningKeyFile   string
	SignedURLTTL        time.Duration
	Offline             bool
	SharedStore         string
	SharedKeyFile       string
	SharedPrevKeyFile   string
	SharedStoreID       string // "": sharedstore.DefaultStoreID of the URL
	SharedLeaseTTL      time.Duration
	SharedTimeout       time.Duration
	SharedMinSpeed      int64 // 0: no low-speed limit
	SharedBreakerThresh int
	SharedBreakerCool   time.Duration
	UpstreamProxy       string
	// The CLI releases side (package releases): origins, products and
	// the files holding the publishers' keys ("": the shipped keys).
	ReleasesHashiCorpURL      string
	ReleasesHashiCorpProducts []string
	ReleasesHashiCorpKeys     string
	ReleasesOpenTofuURL       string
	ReleasesOpenTofuAPIURL    string
	ReleasesOpenTofuKeys      string
	CredentialsFile           string
	OriginTimeout             time.Duration
	OriginMinSpeed            int64
	OriginMinSpeedWindow      time.Duration
	OriginRetries             int
	BreakerThreshold          int
	BreakerCooldown           time.Duration
	ModuleConfig
	RetentionConfig
	// ExportKeyFile is the armored private key that signs exports' manifests;
	// "": DATA-DIR/export-key.asc, made on first use.
	ExportKeyFile string
	// TrustedExportKeys are files of armored public keys of exporting
	// mirrors whose signed manifests an import trusts.
	TrustedExportKeys []string
	// TrustedPublisherKeys are HOST/NAMESPACE=FILE entries: keys pinned
	// for the SHA256SUMS of one namespace's providers on import.
	TrustedPublisherKeys []string
	// AllowUnsignedHosts are allowed origins under which versions without
	// signature may be imported and are served (mirror.Config.UnsignedHosts).
	AllowUnsignedHosts []string
	// TLSSAN are more names (hosts, IP addresses) of the generated
	// certificate, besides the public URL's host.
	TLSSAN []string
	// OriginCAFile are PEM files of CAs trusted for origins, source hosts
	// and the shared store, besides the system roots.
	OriginCAFile []string
	// TrustedProxies are the CIDRs (or IP addresses) of the proxies in
	// front of the mirror whose X-Forwarded-For names the client
	// (ParseTrustedProxies).
	TrustedProxies []string
}

// ModuleConfig holds the settings that bound registry module packages.
type ModuleConfig struct {
	ModuleMaxBytes     int64
	ModuleMaxTreeBytes int64
	ModuleMaxFiles     int
	ModuleTimeout      time.Duration
	// ModuleSourceCredentials is the --module-source-credentials file
	// (read by the command), "" for none: sources are fetched anonymously.
	ModuleSourceCredentials string
}

func (c ModuleConfig) validate() error {
	if c.ModuleMaxBytes <= 0 || c.ModuleMaxTreeBytes <= 0 || c.ModuleMaxFiles <= 0 || c.ModuleTimeout <= 0 {
		return errors.New("--module-max-bytes, --module-max-tree-bytes, --module-max-files and --module-timeout must be positive")
	}
	return nil
}

// RetentionConfig holds the retention settings: serve's, and those of
// cache prune when it opens the data directory itself.
type RetentionConfig struct {
	KeepVersions      int
	KeepPerMajor      bool
	EvictUnusedAfter  time.Duration
	PinsDir           string
	RetentionInterval time.Duration
}

// Validate checks the retention settings.
func (c RetentionConfig) Validate() error {
	if c.KeepVersions < 0 || c.EvictUnusedAfter < 0 {
		return errors.New("--keep-versions and --evict-unused-after must not be negative (0 disables)")
	}
	if c.KeepPerMajor && c.KeepVersions == 0 {
		return errors.New("--keep-versions-per-major needs --keep-versions")
	}
	if c.RetentionInterval < 0 {
		return errors.New("--retention-interval must not be negative (0: only tfmirror cache prune applies the rules)")
	}
	return nil
}

// MaxSharedTimeout is the longest --shared-store-timeout: a writer of the
// bucket without the key may put back a record under its own name within
// 15 minutes and one call of its writing (sharedstore), so the call's
// bound is that window's too.
const MaxSharedTimeout = 2 * time.Minute

// Validate checks the settings of serve; the error names every problem
// (errors.Join), each naming its flags. It refuses every value serve's
// parts would refuse when they are made (an allowed origin or a platform
// that does not parse, a listen address without a port, a releases URL
// or product the releases side refuses), with the functions they check
// it with: serve at start, a reload and config check all check with it,
// so a value config check calls valid is not refused by serve, and a
// reload does not keep for a restart a value the restart refuses.
func (c Config) Validate() error {
	var errs []error
	for _, l := range []struct{ flag, addr string }{{"listen", c.Listen}, {"metrics-listen", c.MetricsListen}} {
		if l.addr == "" {
			continue
		}
		_, port, err := net.SplitHostPort(l.addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %q is not an address to listen on (HOST:PORT, or :PORT for every interface): %w", l.flag, l.addr, err))
			continue
		}
		// As a start's listen reads the port: a number from 0 to 65535,
		// or a service name this system knows (http).
		if _, err := net.LookupPort("tcp", port); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %q is not an address to listen on: its port %q is no port number (0 to 65535) or service name: %w", l.flag, l.addr, port, err))
		}
	}
	for _, u := range []struct{ flag, url string }{
		{"releases-hashicorp-url", c.ReleasesHashiCorpURL},
		{"releases-opentofu-url", c.ReleasesOpenTofuURL},
		{"releases-opentofu-api-url", c.ReleasesOpenTofuAPIURL},
	} {
		if u.url == "" {
			continue
		}
		if err := releases.CheckOrigin(u.url); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", u.flag, err))
		}
	}
	for _, p := range c.Platforms {
		if _, err := addrs.ParsePlatform(strings.TrimSpace(p)); err != nil {
			errs = append(errs, fmt.Errorf("--platforms: %w", err))
		}
	}
	for _, p := range c.ReleasesHashiCorpProducts {
		if err := releases.CheckProductName(p); err != nil {
			errs = append(errs, fmt.Errorf("--releases-hashicorp-products: %w", err))
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key must be given together"))
	}
	if c.InsecureHTTP && c.TLSCert != "" {
		errs = append(errs, errors.New("--insecure-http and --tls-cert are mutually exclusive"))
	}
	if c.InsecureHTTP && c.HTTP2 {
		errs = append(errs, errors.New("--http2 is offered over TLS only, not with --insecure-http"))
	}
	if c.VersionsTTL <= 0 || c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("--versions-ttl and --shutdown-timeout must be positive"))
	}
	if c.MaxConnections <= 0 {
		errs = append(errs, fmt.Errorf("--max-connections must be positive, not %d", c.MaxConnections))
	}
	if c.ShutdownDelay < 0 {
		errs = append(errs, errors.New("--shutdown-delay must not be negative (0: none)"))
	}
	if c.NotFoundTTL < 0 || c.NotFoundMaxEntries <= 0 {
		errs = append(errs, errors.New("--not-found-ttl must not be negative (0: never remembered), and --not-found-max-entries must be positive"))
	}
	if c.SignedURLTTL <= 0 {
		errs = append(errs, errors.New("--signed-url-ttl must be positive"))
	}
	if c.URLSigningKeyFile != "" && c.AuthTokensFile == "" {
		errs = append(errs, errors.New("--url-signing-key-file needs --auth-tokens-file"))
	}
	for _, entry := range c.TrustedPublisherKeys {
		if _, _, err := ParsePublisherEntry(entry); err != nil {
			errs = append(errs, fmt.Errorf("--trusted-publisher-keys: %w", err))
		}
	}
	if err := c.checkUnsignedHosts(); err != nil {
		errs = append(errs, err)
	}
	for _, n := range c.TLSSAN {
		if err := checkSAN(n); err != nil {
			errs = append(errs, fmt.Errorf("--tls-san %q: %w", n, err))
		}
	}
	if _, err := ParseTrustedProxies(c.TrustedProxies); err != nil {
		errs = append(errs, err)
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		var authority error // the host and port net/http would dial
		if err == nil {
			authority = hostport.Check(u)
		}
		switch {
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
			errs = append(errs, fmt.Errorf("--public-url %q: want an absolute http(s) URL", redact.Location(c.PublicURL)))
		case authority != nil:
			errs = append(errs, fmt.Errorf("--public-url %q: %w", redact.Location(c.PublicURL), authority))
		case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
			// Shown to anyone who reaches the mirror (the status page,
			// the releases door's index.json, the OCI door's realm).
			errs = append(errs, fmt.Errorf("--public-url %q: want the base URL clients use, without user info, query or fragment: it is shown to anyone who reaches the mirror", redact.Location(c.PublicURL)))
		}
	}
	if _, err := oci.NewNames(c.OCIProviderPrefix, c.OCIModulePrefix); err != nil {
		errs = append(errs, fmt.Errorf("--oci-provider-prefix, --oci-module-prefix: %w", err))
	}
	if c.CacheVerifyInterval < 0 {
		errs = append(errs, errors.New("--cache-verify-interval must not be negative (0: only tfmirror cache verify checks the cache)"))
	}
	if err := c.RetentionConfig.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.ValidateEngine(); err != nil {
		errs = append(errs, err)
	}
	return JoinProblems(errs...)
}

// checkUnsignedHosts checks that every --allow-unsigned-hosts host is an
// allowed origin: others take imports without signature unnamed (they
// are local-only), and naming one is likely a typo.
func (c Config) checkUnsignedHosts() error {
	var origins []svchost.Hostname
	for _, h := range c.AllowedOrigins {
		if host, err := addrs.ParseHost(h); err == nil {
			origins = append(origins, host)
		}
	}
	for _, h := range c.AllowUnsignedHosts {
		host, err := addrs.ParseHost(h)
		if err != nil {
			return fmt.Errorf("--allow-unsigned-hosts: %q: %v", h, err)
		}
		if !slices.Contains(origins, host) {
			return fmt.Errorf("--allow-unsigned-hosts: %s is not among --allowed-origins (hosts that are not origins take imports without signature without being named)", h)
		}
	}
	return nil
}

// ValidateEngine checks the settings of every command that opens the
// engine on a data directory (serve, sync: those Sync takes); the error
// names every problem (errors.Join).
func (c Config) ValidateEngine() error {
	var errs []error
	if len(c.AllowedOrigins) == 0 {
		errs = append(errs, errors.New("--allowed-origins must name at least one host"))
	}
	// As the origin client and the engine read them (discovery.New,
	// mirror.New).
	for _, h := range c.AllowedOrigins {
		if _, err := addrs.ParseHost(strings.TrimSpace(h)); err != nil {
			errs = append(errs, fmt.Errorf("--allowed-origins: %q: %w", h, err))
		}
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("--data-dir must not be empty"))
	}
	if c.DiscoveryTTL <= 0 {
		errs = append(errs, errors.New("--discovery-ttl must be positive"))
	}
	if c.OriginTimeout <= 0 || c.BreakerCooldown <= 0 {
		errs = append(errs, errors.New("--origin-timeout and --origin-breaker-cooldown must be positive"))
	}
	if c.OriginMinSpeedWindow < 0 {
		errs = append(errs, errors.New("--origin-min-speed-window must not be negative (0 disables)"))
	}
	if c.OriginRetries < 0 || c.BreakerThreshold < 0 {
		errs = append(errs, errors.New("--origin-retries and --origin-breaker-threshold must not be negative (0 disables)"))
	}
	if c.MaxArchiveBytes <= 0 {
		errs = append(errs, errors.New("--max-archive-bytes must be positive"))
	}
	if c.ArchiveMaxUnpacked <= 0 || c.ArchiveMaxEntries <= 0 {
		errs = append(errs, errors.New("--archive-max-unpacked-bytes and --archive-max-entries must be positive"))
	}
	if c.MaxArchiveDownloads <= 0 {
		errs = append(errs, fmt.Errorf("--max-archive-downloads must be positive, not %d", c.MaxArchiveDownloads))
	}
	if err := c.ModuleConfig.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.SharedStore != "" {
		if c.SharedLeaseTTL < 3*time.Second {
			errs = append(errs, errors.New("--shared-store-lease-ttl must be at least 3s"))
		}
		if c.SharedTimeout <= 0 || c.SharedBreakerCool <= 0 || c.SharedBreakerThresh < 1 {
			errs = append(errs, errors.New("--shared-store-timeout and --shared-store-breaker-cooldown must be positive, --shared-store-breaker-threshold at least 1"))
		}
		// A record the store wrote later than 15 minutes and one call
		// after its time of storing is taken as put back (replayed) and
		// refused: the call's bound bounds that window too.
		if c.SharedTimeout > MaxSharedTimeout {
			errs = append(errs, fmt.Errorf("--shared-store-timeout must be at most %s: a record put back in the bucket is told from one just written by the 15 minutes and one call after its writing", MaxSharedTimeout))
		}
		if loc, err := sharedstore.ParseURL(c.SharedStore); err != nil {
			errs = append(errs, fmt.Errorf("--shared-store: %w", err))
		} else if c.SharedStoreID == "" {
			// The store's ID is then its bucket and prefix, which a
			// start judges as it would a --shared-store-id.
			if err := sharedstore.CheckStoreID(sharedstore.DefaultStoreID(loc)); err != nil {
				errs = append(errs, fmt.Errorf("--shared-store: without --shared-store-id the store's ID is s3://BUCKET/PREFIX, and %w: name the store with --shared-store-id", err))
			}
		}
		if c.SharedStoreID != "" {
			if err := sharedstore.CheckStoreID(c.SharedStoreID); err != nil {
				errs = append(errs, fmt.Errorf("--shared-store-id: %w", err))
			}
		}
		if c.SharedKeyFile == "" {
			errs = append(errs, errors.New("--shared-store needs --shared-store-key-file: the key (at least 32 bytes, the same file on every replica, e.g. head -c 32 /dev/urandom > FILE) that authenticates what the replicas write to the bucket"))
		}
		if c.MaxArchiveBytes > sharedstore.MaxArchiveBytes {
			errs = append(errs, fmt.Errorf("--shared-store stores an archive in one PUT, of at most %d bytes: --max-archive-bytes must not be larger", int64(sharedstore.MaxArchiveBytes)))
		}
	}
	if c.SharedStore == "" && (c.SharedKeyFile != "" || c.SharedPrevKeyFile != "" || c.SharedStoreID != "") {
		errs = append(errs, errors.New("--shared-store-key-file, --shared-store-previous-key-file and --shared-store-id need --shared-store"))
	}
	if c.SharedPrevKeyFile != "" && c.SharedKeyFile == "" {
		errs = append(errs, errors.New("--shared-store-previous-key-file needs --shared-store-key-file"))
	}
	if c.UpstreamProxy != "" {
		// A secret setting (its URL may hold a password): named as it is
		// shown, in an error that reaches the log, config check's output
		// and tfmirror reload's answer.
		u, err := url.Parse(c.UpstreamProxy)
		var authority error
		if err == nil {
			authority = hostport.Check(u)
		}
		switch shown := redactValue(c.UpstreamProxy); {
		case err != nil || u.Host == "":
			errs = append(errs, fmt.Errorf("--upstream-proxy %q: want a URL such as http://proxy.example.com:3128", shown))
		case authority != nil:
			errs = append(errs, fmt.Errorf("--upstream-proxy %q: %w: want a URL such as http://proxy.example.com:3128", shown, authority))
		case !ProxyScheme(u.Scheme):
			errs = append(errs, fmt.Errorf("--upstream-proxy %q: scheme must be http, https, socks5 or socks5h", shown))
		case BeyondAuthority(u):
			errs = append(errs, fmt.Errorf(`--upstream-proxy %q: want SCHEME://[USER:PASSWORD@]HOST:PORT, without path, query or fragment; percent-encode a "/", "?" or "#" of the user or password (%%2F, %%3F, %%23)`, shown))
		}
	}
	switch strings.ToLower(c.LogFormat) { // either case, as --log-level
	case "json", "text":
	default:
		errs = append(errs, fmt.Errorf("--log-format %q: want json or text", c.LogFormat))
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	return JoinProblems(errs...)
}

// checkSAN checks a --tls-san entry: an IP address, or a DNS name
// (a leading "*." for a wildcard).
func checkSAN(n string) error {
	if net.ParseIP(n) != nil {
		return nil
	}
	name := strings.TrimPrefix(n, "*.")
	if name == "" || len(name) > 253 || strings.HasSuffix(name, ".") {
		return errors.New("want a host name or an IP address")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("want a host name or an IP address")
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return errors.New("want a host name (ASCII letters, digits, '-' and '.') or an IP address")
			}
		}
	}
	return nil
}

// ProxyScheme says scheme is one of a proxy URL's that the origin
// client speaks: http, https, socks5 or socks5h.
func ProxyScheme(scheme string) bool {
	switch scheme {
	case "http", "https", "socks5", "socks5h":
		return true
	}
	return false
}

// BeyondAuthority says u, a proxy URL, has a path other than "/", a
// query or a fragment: never meant, but a "/", "?" or "#" of its
// password not percent-encoded, which ends the host there.
func BeyondAuthority(u *url.URL) bool {
	return u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.ForceQuery || u.Fragment != ""
}

// ParseTrustedProxies parses --trusted-proxies: each entry a CIDR
// ("10.0.0.0/8", "2001:db8::/32"; host bits are dropped) or an IP
// address (a range of one). An IPv4 range written in IPv6 (::ffff:0:0/96
// and within it) is the IPv4 range, as the addresses it is matched
// against are.
func ParseTrustedProxies(entries []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, e := range entries {
		e = strings.TrimSpace(e)
		p, err := netip.ParsePrefix(e)
		if err != nil {
			a, aerr := netip.ParseAddr(e)
			if aerr != nil || a.Zone() != "" {
				return nil, fmt.Errorf("--trusted-proxies: %q is neither a CIDR (such as 10.0.0.0/8 or 2001:db8::/32) nor an IP address", e)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ExportKeyName is the export key in the data directory, made on first use.
const ExportKeyName = "export-key.asc"

// ParsePublisherEntry parses HOST/NAMESPACE=FILE, an entry of
// --trusted-publisher-keys.
func ParsePublisherEntry(entry string) (airgap.Namespace, string, error) {
	scope, file, ok := strings.Cut(entry, "=")
	if !ok || file == "" {
		return airgap.Namespace{}, "", fmt.Errorf("%q: want HOST/NAMESPACE=FILE", entry)
	}
	ns, err := airgap.ParseNamespace(scope)
	if err != nil {
		return airgap.Namespace{}, "", err
	}
	return ns, file, nil
}

// ParseLevel parses a --log-level.
func ParseLevel(s string) (slog.Level, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return lvl, nil
}

// Problems are the errors a check of the settings found, each naming its
// flags (Config.Validate, Loaded.Locate). Printed, several are listed one
// a line, indented under a line that counts them, as config check lists
// a file's errors; one alone is printed as it is. errors.Is and As see
// each (Unwrap).
type Problems []error

// JoinProblems is Problems of the errors errs and those they join
// (errors.Join, Problems), without the nil ones; nil when none is left.
func JoinProblems(errs ...error) error {
	var out Problems
	for _, e := range errs {
		out = append(out, unjoin(e)...)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (p Problems) Error() string {
	if len(p) == 1 {
		return p[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d errors in the settings:", len(p))
	for _, e := range p {
		b.WriteString("\n  ")
		b.WriteString(strings.ReplaceAll(e.Error(), "\n", "\n  "))
	}
	return b.String()
}

// Unwrap is the errors, for errors.Is and errors.As.
func (p Problems) Unwrap() []error { return p }
