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

	"github.com/tfmirror/tfmirror/sharedstore"
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
// command line from its TFMIRROR_* environment variable. Every flag is a
// setting of the table settings.
func parseServeFlags(args []string, lookupEnv func(string) (string, bool), out io.Writer) (serveConfig, error) {
	var c serveConfig
	fs := flag.NewFlagSet("tfmirror serve", flag.ContinueOnError)
	fs.SetOutput(out)
	for _, s := range settings {
		s.register(fs, &c)
	}
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
	return c, c.validate()
}

// addEngineFlags registers on fs, bound to c, the settings of every
// command that opens the engine on a data directory (serve, sync): the
// data directory, the cache limits, the origin settings and logging.
func addEngineFlags(fs *flag.FlagSet, c *serveConfig) {
	addSettingsOf(fs, c, cmdSync)
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
