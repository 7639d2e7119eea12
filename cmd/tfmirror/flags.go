package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/cache"
	"github.com/tfmirror/tfmirror/discovery"
	"github.com/tfmirror/tfmirror/sharedstore"
	"github.com/tfmirror/tfmirror/verify"
)

var errHelp = errors.New("help requested")

// serveConfig holds the flags of `tfmirror serve`.
type serveConfig struct {
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
	MaxArchiveBytes     int64
	// ArchiveMaxUnpacked and ArchiveMaxEntries bound the check of a
	// provider archive (see verify.Limits).
	ArchiveMaxUnpacked   int64
	ArchiveMaxEntries    int
	MetricsListen        string
	PublicURL            string
	LogFormat            string
	LogLevel             string
	ShutdownTimeout      time.Duration
	CacheMaxBytes        int64
	DiskReserve          int64 // 0: free space not checked
	CacheVerifyInterval  time.Duration
	AuthTokensFile       string
	URLSigningKeyFile    string
	SignedURLTTL         time.Duration
	Offline              bool
	SharedStore          string
	SharedLeaseTTL       time.Duration
	SharedTimeout        time.Duration
	SharedBreakerThresh  int
	SharedBreakerCool    time.Duration
	UpstreamProxy        string
	CredentialsFile      string
	OriginTimeout        time.Duration
	OriginMinSpeed       int64
	OriginMinSpeedWindow time.Duration
	OriginRetries        int
	BreakerThreshold     int
	BreakerCooldown      time.Duration
	moduleConfig         // modflags.go
	retentionConfig      // retentionflags.go
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
}

// envName is the environment variable that sets flag name.
func envName(name string) string {
	return "TFMIRROR_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// parseServeFlags parses args, then fills every flag not given on the
// command line from its TFMIRROR_* environment variable.
func parseServeFlags(args []string, lookupEnv func(string) (string, bool), out io.Writer) (serveConfig, error) {
	var c serveConfig
	fs := flag.NewFlagSet("tfmirror serve", flag.ContinueOnError)
	fs.SetOutput(out)
	finish := addEngineFlags(fs, &c)
	fs.StringVar(&c.Listen, "listen", ":8443", "address to serve the mirror on")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "PEM certificate chain to serve; with --tls-key. When both are absent a local CA and server certificate are generated in DATA-DIR/tls")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM private key for --tls-cert")
	fs.BoolVar(&c.InsecureHTTP, "insecure-http", false, "serve plain HTTP, for use behind a TLS-terminating proxy only (clients require https)")
	fs.BoolVar(&c.HTTP2, "http2", false, "also offer HTTP/2 to TLS clients; by default they get HTTP/1.1, which moves archives faster (see the README)")
	var platforms listFlag
	fs.Var(&platforms, "platforms", "comma-separated os_arch platforms listed in VERSION.json (default all)")
	fs.DurationVar(&c.VersionsTTL, "versions-ttl", 10*time.Minute, "how long a provider's version list is served before it is refreshed")
	fs.StringVar(&c.PublicURL, "public-url", "", "the mirror's base URL as clients reach it (e.g. https://mirror.example.com/), shown on the status page; default: taken from each request")
	fs.StringVar(&c.MetricsListen, "metrics-listen", "", "optional plain-HTTP address that serves only /metrics (e.g. :9090); /metrics is always on the main listener too")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long to let requests and downloads in flight finish on SIGTERM")
	fs.StringVar(&c.AuthTokensFile, "auth-tokens-file", "", "file of client bearer tokens, one per line ('#' comments); enables client authentication and signed archive URLs")
	fs.StringVar(&c.URLSigningKeyFile, "url-signing-key-file", "", "file holding the key (at least 32 bytes) that signs archive URLs; share it between replicas. Default: DATA-DIR/url-signing.key, created on first use")
	fs.DurationVar(&c.SignedURLTTL, "signed-url-ttl", time.Hour, "how long a signed archive URL in VERSION.json stays valid")
	fs.BoolVar(&c.Offline, "offline", false, "sealed mode: never contact any origin; serve only cached data, anything else is 503")
	var trustedExport, trustedPublisher, unsignedHosts listFlag
	addExportKeyFlag(fs, &c.ExportKeyFile)
	addImportTrustFlags(fs, &trustedExport, &trustedPublisher)
	addUnsignedHostsFlag(fs, &unsignedHosts)
	addRetentionFlags(fs, &c.retentionConfig, true)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: tfmirror serve [flags]\n\nEvery flag may also be set by an environment variable, e.g. --data-dir by %s.\n\nFlags:\n", envName("data-dir"))
		fs.PrintDefaults()
	}

	if err := parseWithEnv(fs, args, lookupEnv); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	finish()
	c.Platforms = platforms
	c.TrustedExportKeys, c.TrustedPublisherKeys = trustedExport, trustedPublisher
	c.AllowUnsignedHosts = unsignedHosts
	return c, c.validate()
}

// addExportKeyFlag registers the flag of the key that signs exports:
// serve's, export's and export-key's.
func addExportKeyFlag(fs *flag.FlagSet, exportKey *string) {
	fs.StringVar(exportKey, "export-key", "", "file holding the ASCII-armored OpenPGP private key that signs the manifest of every export (e.g. a mounted Secret, so that replicas and restarts keep one key); default DATA-DIR/"+exportKeyName+", made on first use")
}

// addImportTrustFlags registers the flags of the keys imports trust:
// serve's and import's.
func addImportTrustFlags(fs *flag.FlagSet, trustedExport, trustedPublisher *listFlag) {
	fs.Var(trustedExport, "trusted-export-keys", "comma-separated files of ASCII-armored OpenPGP public keys (several per file allowed) of exporting mirrors (tfmirror export-key prints one): an import takes the versions whose files the manifest signed by one of them lists")
	fs.Var(trustedPublisher, "trusted-publisher-keys", "comma-separated HOST/NAMESPACE=FILE: ASCII-armored OpenPGP public keys pinned for one namespace; an import takes a version of that namespace whose SHA256SUMS one of them signed")
}

// addUnsignedHostsFlag registers the flag of the allowed origins that
// take versions without signature: serve's and import's.
func addUnsignedHostsFlag(fs *flag.FlagSet, hosts *listFlag) {
	fs.Var(hosts, "allow-unsigned-hosts", "comma-separated allowed origin hosts under which versions without signature (in-house builds) may be imported and are served; under any other allowed origin an import with --allow-unsigned refuses them and versions imported so earlier are withheld, since they would shadow the origin's providers. Hosts that are not origins need no entry")
}

// addEngineFlags registers on fs the flags of every command that opens
// the engine on a data directory (serve, sync): the data directory, the
// cache limits, the origin flags and logging. The returned function
// stores the values of the flags that need converting into c; call it
// once fs is parsed.
func addEngineFlags(fs *flag.FlagSet, c *serveConfig) (finish func()) {
	fs.StringVar(&c.DataDir, "data-dir", "./tfmirror-data", "directory for the cache and generated TLS material")
	origins := listFlag(discovery.DefaultAllowedOrigins())
	fs.Var(&origins, "allowed-origins", "comma-separated origin registry hosts the mirror may serve and contact")
	fs.BoolVar(&c.AllowPrivateOrigins, "allow-private-origins", false, "allow origin and download hosts that resolve to loopback, private or link-local addresses")
	fs.DurationVar(&c.DiscoveryTTL, "discovery-ttl", time.Hour, "how long an origin's service discovery result is used before it is refreshed")
	maxArchive := byteSizeFlag(2 << 30)
	fs.Var(&maxArchive, "max-archive-bytes", "largest provider archive the mirror fetches (e.g. 2GiB)")
	maxUnpacked := byteSizeFlag(verify.DefaultMaxUnpackedBytes)
	fs.Var(&maxUnpacked, "archive-max-unpacked-bytes", "most bytes a provider archive may unpack to, all its files together (e.g. 2GiB): a larger one (a zip bomb) is refused, counted from what its zip declares and from the bytes actually inflated")
	fs.IntVar(&c.ArchiveMaxEntries, "archive-max-entries", verify.DefaultMaxEntries, "most files and directories a provider archive may hold")
	fs.StringVar(&c.LogFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	cacheMax := byteSizeFlag(0)
	fs.Var(&cacheMax, "cache-max-bytes", "evict least recently used archives to keep the cache's archives under this size (e.g. 50GiB); 0 means unlimited")
	diskReserve := byteSizeFlag(cache.DefaultDiskReserve)
	fs.Var(&diskReserve, "disk-reserve", "free space to keep on the data directory's file system: below it (plus Badger's LSM tree) nothing is written to the cache, archives are served but not cached and /readyz fails; 0 disables the check")
	fs.DurationVar(&c.CacheVerifyInterval, "cache-verify-interval", 0, "check every cached package against its stored evidence or sha256 this often, in the background, as tfmirror cache verify does (e.g. 168h); 0: only when tfmirror cache verify asks")
	addSharedStoreFlags(fs, c)
	fs.StringVar(&c.UpstreamProxy, "upstream-proxy", "", "proxy URL for all origin traffic (http://host:port, https:// or socks5://); default: HTTPS_PROXY and NO_PROXY from the environment")
	fs.StringVar(&c.CredentialsFile, "credentials-file", "", "Terraform CLI-config file whose credentials \"HOST\" { token = \"...\" } blocks give bearer tokens for origin hosts (TF_TOKEN_<host> variables are read too)")
	fs.DurationVar(&c.OriginTimeout, "origin-timeout", 30*time.Second, "time limit for each registry JSON, SHA256SUMS or signature request to an origin, body included (archives are limited by idle time instead)")
	minSpeed := byteSizeFlag(1 << 10)
	fs.Var(&minSpeed, "origin-min-speed", "low-speed limit of archive downloads, in bytes per second (e.g. 1KiB): a download averaging less over --origin-min-speed-window is aborted as an origin timeout; 0 disables")
	fs.DurationVar(&c.OriginMinSpeedWindow, "origin-min-speed-window", 30*time.Second, "the window over which --origin-min-speed is measured; 0 disables the low-speed limit")
	fs.IntVar(&c.OriginRetries, "origin-retries", 2, "how many times a failed origin request is retried (connection failures, timeouts, 429, 5xx); 0 disables retries")
	fs.IntVar(&c.BreakerThreshold, "origin-breaker-threshold", 5, "consecutive failed origin requests that open an origin's circuit breaker; 0 disables the breaker")
	fs.DurationVar(&c.BreakerCooldown, "origin-breaker-cooldown", 30*time.Second, "how long an open circuit breaker fails requests to its origin at once before letting a probe through")
	finishModules := addModuleFlags(fs, &c.moduleConfig)
	return func() {
		finishModules()
		c.AllowedOrigins = origins
		c.MaxArchiveBytes = int64(maxArchive)
		c.ArchiveMaxUnpacked = int64(maxUnpacked)
		c.CacheMaxBytes = int64(cacheMax)
		c.OriginMinSpeed = int64(minSpeed)
		c.DiskReserve = int64(diskReserve)
	}
}

// parseWithEnv parses args with fs, then fills every flag not given on
// the command line from its TFMIRROR_* environment variable. -h gives
// errHelp.
func parseWithEnv(fs *flag.FlagSet, args []string, lookupEnv func(string) (string, bool)) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || envErr != nil {
			return
		}
		if v, ok := lookupEnv(envName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", envName(f.Name), v, err)
			}
		}
	})
	return envErr
}

func (c serveConfig) validate() error {
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key must be given together")
	}
	if c.InsecureHTTP && c.TLSCert != "" {
		return errors.New("--insecure-http and --tls-cert are mutually exclusive")
	}
	if c.InsecureHTTP && c.HTTP2 {
		return errors.New("--http2 is offered over TLS only, not with --insecure-http")
	}
	if c.VersionsTTL <= 0 || c.ShutdownTimeout <= 0 {
		return errors.New("durations must be positive")
	}
	if c.SignedURLTTL <= 0 {
		return errors.New("--signed-url-ttl must be positive")
	}
	if c.URLSigningKeyFile != "" && c.AuthTokensFile == "" {
		return errors.New("--url-signing-key-file needs --auth-tokens-file")
	}
	for _, entry := range c.TrustedPublisherKeys {
		if _, _, err := parsePublisherEntry(entry); err != nil {
			return fmt.Errorf("--trusted-publisher-keys: %w", err)
		}
	}
	if err := c.checkUnsignedHosts(); err != nil {
		return err
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("--public-url %q: want an absolute http(s) URL", c.PublicURL)
		}
	}
	if c.CacheVerifyInterval < 0 {
		return errors.New("--cache-verify-interval must not be negative (0: only tfmirror cache verify checks the cache)")
	}
	if err := c.retentionConfig.validate(); err != nil {
		return err
	}
	return c.validateEngine()
}

// checkUnsignedHosts checks that every --allow-unsigned-hosts host is an
// allowed origin: others take imports without signature unnamed (they
// are local-only), and naming one is likely a typo.
func (c serveConfig) checkUnsignedHosts() error {
	var origins []svchost.Hostname
	for _, h := range c.AllowedOrigins {
		if host, err := svchost.ForComparison(h); err == nil {
			origins = append(origins, host)
		}
	}
	for _, h := range c.AllowUnsignedHosts {
		host, err := svchost.ForComparison(h)
		if err != nil {
			return fmt.Errorf("--allow-unsigned-hosts: %q: %v", h, err)
		}
		if !slices.Contains(origins, host) {
			return fmt.Errorf("--allow-unsigned-hosts: %s is not among --allowed-origins (hosts that are not origins take imports without signature without being named)", h)
		}
	}
	return nil
}

// addSharedStoreFlags registers the shared store's flags: serve's and
// sync's (through addEngineFlags), and those of export and import.
func addSharedStoreFlags(fs *flag.FlagSet, c *serveConfig) {
	fs.StringVar(&c.SharedStore, "shared-store", "", "S3-compatible bucket shared by replicas behind their local caches: s3://BUCKET/PREFIX?endpoint=URL&region=REGION&path_style=true (endpoint, region, path_style optional); credentials from the standard AWS sources")
	fs.DurationVar(&c.SharedLeaseTTL, "shared-store-lease-ttl", 30*time.Second, "how long a replica's lease on an origin download in the --shared-store lasts unless renewed (every third of it): after a replica dies, others wait this long before they take its download over")
	fs.DurationVar(&c.SharedTimeout, "shared-store-timeout", 10*time.Second, "limit on each call to the --shared-store but an archive body's transfer")
	fs.IntVar(&c.SharedBreakerThresh, "shared-store-breaker-threshold", 5, "failed --shared-store calls in a row after which the replica stops calling it for --shared-store-breaker-cooldown")
	fs.DurationVar(&c.SharedBreakerCool, "shared-store-breaker-cooldown", 30*time.Second, "how long the replica leaves a failing --shared-store alone (serving from its own cache and the origins) before trying it again")
}

// validateEngine checks the flags addEngineFlags registers.
func (c serveConfig) validateEngine() error {
	if len(c.AllowedOrigins) == 0 {
		return errors.New("--allowed-origins must name at least one host")
	}
	if c.DataDir == "" {
		return errors.New("--data-dir must not be empty")
	}
	if c.DiscoveryTTL <= 0 {
		return errors.New("durations must be positive")
	}
	if c.OriginTimeout <= 0 || c.BreakerCooldown <= 0 {
		return errors.New("--origin-timeout and --origin-breaker-cooldown must be positive")
	}
	if c.OriginMinSpeedWindow < 0 {
		return errors.New("--origin-min-speed-window must not be negative (0 disables)")
	}
	if c.OriginRetries < 0 || c.BreakerThreshold < 0 {
		return errors.New("--origin-retries and --origin-breaker-threshold must not be negative (0 disables)")
	}
	if c.MaxArchiveBytes <= 0 {
		return errors.New("--max-archive-bytes must be positive")
	}
	if c.ArchiveMaxUnpacked <= 0 || c.ArchiveMaxEntries <= 0 {
		return errors.New("--archive-max-unpacked-bytes and --archive-max-entries must be positive")
	}
	if err := c.moduleConfig.validate(); err != nil {
		return err
	}
	if c.SharedStore != "" {
		if c.SharedLeaseTTL < 3*time.Second {
			return errors.New("--shared-store-lease-ttl must be at least 3s")
		}
		if c.SharedTimeout <= 0 || c.SharedBreakerCool <= 0 || c.SharedBreakerThresh < 1 {
			return errors.New("--shared-store-timeout and --shared-store-breaker-cooldown must be positive, --shared-store-breaker-threshold at least 1")
		}
		if _, err := sharedstore.ParseURL(c.SharedStore); err != nil {
			return fmt.Errorf("--shared-store: %w", err)
		}
		if c.MaxArchiveBytes > sharedstore.MaxArchiveBytes {
			return fmt.Errorf("--shared-store stores an archive in one PUT, of at most %d bytes: --max-archive-bytes must not be larger", int64(sharedstore.MaxArchiveBytes))
		}
	}
	if c.UpstreamProxy != "" {
		u, err := url.Parse(c.UpstreamProxy)
		if err != nil || u.Host == "" {
			return fmt.Errorf("--upstream-proxy %q: want a URL such as http://proxy.example.com:3128", c.UpstreamProxy)
		}
		switch u.Scheme {
		case "http", "https", "socks5", "socks5h":
		default:
			return fmt.Errorf("--upstream-proxy %q: scheme must be http, https, socks5 or socks5h", c.UpstreamProxy)
		}
	}
	switch c.LogFormat {
	case "json", "text":
	default:
		return fmt.Errorf("--log-format %q: want json or text", c.LogFormat)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	return nil
}

// listFlag is a comma-separated list; setting it replaces the default.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = nil
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l = append(*l, part)
		}
	}
	return nil
}

// byteSizeFlag is a size such as 2GiB, 500MB or 1048576.
type byteSizeFlag int64

func (b *byteSizeFlag) String() string { return humanize.IBytes(uint64(*b)) }

func (b *byteSizeFlag) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		// humanize's own message names no part of the input.
		return fmt.Errorf("not a size: want bytes, or a number and a unit such as 512MiB or 2GB")
	}
	if n > 1<<62 {
		return fmt.Errorf("%s is too large", s)
	}
	*b = byteSizeFlag(n)
	return nil
}
