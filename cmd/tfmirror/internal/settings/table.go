package settings

import (
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// A Setting is one setting of tfmirror serve. The table Table is the
// one list of them: serve's flags and their TFMIRROR_ environment
// variables, the flags other commands share with serve, serve's --help
// and docs/configuration.md all come from it.
type Setting struct {
	// Name is the flag's name without dashes ("data-dir"); the
	// environment variable is EnvName(Name).
	Name string
	// Group is the section of docs/configuration.md the setting is in.
	Group Group
	// Help is the flag's --help text.
	Help string
	// Doc is the setting's meaning in docs/configuration.md, in Markdown
	// with links relative to docs/; "": Help.
	Doc string
	// DocDefault is the default as docs/configuration.md shows it, for a
	// setting whose default is its type's zero value and means more than
	// that ("none (no client authentication)"); "": the flag's default.
	DocDefault string
	// Secret says the value itself may hold a credential (a password in a
	// URL's user info): it is never printed. A setting that names a file
	// holding secrets is not secret itself: its value is a path.
	Secret bool
	// show, for a setting that is not secret, is its value as it may be
	// shown, when a part of it may hold a token the setting refuses (an
	// endpoint's query): the values shown before the refusal (config
	// check, a reload's changes) leave that part out too. nil: as given.
	show func(string) string
	// derived, for a setting whose empty default stands for a value made
	// of other settings' (shared-store-id: its store's location), is that
	// value, given their values by name (raw); "" when they make none.
	derived func(raw func(name string) string) string
	// Reload says how what the setting names is read again while serving
	// ("" when only at start). No value changes while serving: what changes
	// is the content of the file or directory it names.
	Reload string
	// Live says a new value given in the configuration file is put in
	// force by SIGHUP, from the next request on; a new value of any other
	// setting needs a restart (SIGHUP keeps the value in force and says so).
	Live bool
	// Commands are the commands besides serve that take the flag, with
	// serve's meaning (TakenBy says which; the commands' flag sets
	// are checked against it by a test).
	Commands Command
	// bind registers the flag on a flag set, bound to its field of a
	// Config, which it sets to the default.
	bind binding
}

// Env is the environment variable that sets s.
func (s *Setting) Env() string { return EnvName(s.Name) }

// Kind is the value's syntax: "string", "bool", "int", "duration",
// "size", "days" or "list".
func (s *Setting) Kind() string { return s.bind.kind }

// ZeroDefault says the default is the value type's zero value.
func (s *Setting) ZeroDefault() bool { return s.bind.zero }

// Register registers s on fs, bound to its field of c.
func (s *Setting) Register(fs *flag.FlagSet, c *Config) {
	s.bind.register(fs, c, s.Name, s.Help)
}

// A Group is a section of docs/configuration.md, in the order of Groups.
type Group string

const (
	GroupServing   Group = "Serving"
	GroupOrigins   Group = "Origins"
	GroupArchives  Group = "Provider archives"
	GroupModules   Group = "Registry modules"
	GroupCache     Group = "Data directory and cache"
	GroupRetention Group = "Retention"
	GroupAuth      Group = "Client authentication"
	GroupShared    Group = "Shared store"
	GroupAirGap    Group = "Air gap and trust"
	GroupLogging   Group = "Logging"
)

// Groups are the sections of docs/configuration.md, in order.
var Groups = []Group{GroupServing, GroupOrigins, GroupArchives, GroupModules, GroupCache,
	GroupRetention, GroupAuth, GroupShared, GroupAirGap, GroupLogging}

// A Command is a set of the commands other than serve that take a
// setting.
type Command uint8

const (
	Sync Command = 1 << iota
	Export
	Import
	ExportKey
	Prune
	Verify
	Explain

	// OnDataDir are the commands that open a data directory as serve
	// does, without an engine of their own: the shared store's flags are
	// theirs too. Not export-key, which reads a key file and opens no
	// cache.
	OnDataDir = Export | Import | Prune | Verify | Explain
)

// CommandNamed is the command of name (one of CommandNames'), 0 for
// none.
func CommandNamed(name string) Command {
	for _, c := range CommandNames {
		if c.Name == name {
			return c.Cmd
		}
	}
	return 0
}

// CommandNames names the commands, in the order docs/configuration.md
// lists them.
var CommandNames = []struct {
	Cmd  Command
	Name string
}{
	{Sync, "sync"}, {Export, "export"}, {Import, "import"}, {ExportKey, "export-key"},
	{Prune, "cache prune"}, {Verify, "cache verify"}, {Explain, "policy explain"},
}

// A binding ties a setting to its field of Config and gives its
// kind and default.
type binding struct {
	// kind is the value's syntax: "string", "bool", "int", "duration",
	// "size", "days" or "list".
	kind string
	// zero says the default is the type's zero value.
	zero     bool
	register func(fs *flag.FlagSet, c *Config, name, usage string)
	// take sets the field of dst to src's.
	take func(dst, src *Config)
}

// taker sets field of dst to src's.
func taker[T any](field func(*Config) *T) func(dst, src *Config) {
	return func(dst, src *Config) { *field(dst) = *field(src) }
}

func stringOf(def string, field func(*Config) *string) binding {
	return binding{kind: "string", zero: def == "", take: taker(field), register: func(fs *flag.FlagSet, c *Config, name, usage string) {
		fs.StringVar(field(c), name, def, usage)
	}}
}

// boolOf is a switch, off by default.
func boolOf(field func(*Config) *bool) binding {
	return binding{kind: "bool", zero: true, take: taker(field), register: func(fs *flag.FlagSet, c *Config, name, usage string) {
		BoolVar(fs, field(c), name, usage)
	}}
}

func intOf(def int, field func(*Config) *int) binding {
	return binding{kind: "int", zero: def == 0, take: taker(field), register: func(fs *flag.FlagSet, c *Config, name, usage string) {
		IntVar(fs, field(c), name, def, usage)
	}}
}

// durationOf is a duration (Duration: Go's syntax, or whole days).
func durationOf(def time.Duration, field func(*Config) *time.Duration) binding {
	return binding{kind: "duration", zero: def == 0, take: taker(field), register: func(fs *flag.FlagSet, c *Config, name, usage string) {
		*field(c) = def
		fs.Var((*Duration)(field(c)), name, usage)
	}}
}

// daysOf is a duration shown in whole days ("30d"), 0 by default.
func daysOf(field func(*Config) *time.Duration) binding {
	return binding{kind: "days", zero: true, take: taker(field), register: func(fs *flag.FlagSet, c *Config, name, usage string) {
		fs.Var((*Days)(field(c)), name, usage)
	}}
}

// sizeOf is a size in bytes, such as 2GiB (ByteSize).
func sizeOf(def int64, field func(*Config) *int64) binding {
	return binding{kind: "size", zero: def == 0, take: taker(field), register: func(fs *flag.FlagSet, c *Config, name, usage string) {
		*field(c) = def
		fs.Var((*ByteSize)(field(c)), name, usage)
	}}
}

// listOf is a comma-separated list (List).
func listOf(def []string, field func(*Config) *[]string) binding {
	return binding{kind: "list", zero: len(def) == 0, take: taker(field), register: func(fs *flag.FlagSet, c *Config, name, usage string) {
		*field(c) = slices.Clone(def)
		fs.Var((*List)(field(c)), name, usage)
	}}
}

// Table is the table of serve's settings, in the order
// docs/configuration.md lists them within each group.
// trustedFileDoc ends the Doc of a setting naming a file of secrets or
// trust, which is refused when others may write it or own it
// (internal/inputfile.OpenTrusted).
const trustedFileDoc = ". A file its group or all users may write, or that a user other than root and the mirror's owns, is refused, unless on a read-only mount (a Secret's); see [The files you hand the mirror](operations.md#the-files-you-hand-the-mirror)"

var Table = []*Setting{
	// Serving.
	{Name: "listen", Group: GroupServing,
		Help: "address to serve the mirror on",
		Doc:  "address to serve on",
		bind: stringOf(":8443", func(c *Config) *string { return &c.Listen })},
	{Name: "tls-cert", Group: GroupServing,
		Help:       "PEM certificate chain to serve; with --tls-key. When both are absent a local CA and server certificate are generated in DATA-DIR/tls",
		Doc:        "PEM certificate chain to serve, with `--tls-key`. When both are absent, a local CA and server certificate are generated in `DATA-DIR/tls` and reused on restart",
		DocDefault: "none",
		bind:       stringOf("", func(c *Config) *string { return &c.TLSCert })},
	{Name: "tls-key", Group: GroupServing,
		Help:       "PEM private key for --tls-cert",
		Doc:        "PEM private key for `--tls-cert`" + trustedFileDoc,
		DocDefault: "none",
		bind:       stringOf("", func(c *Config) *string { return &c.TLSKey })},
	{Name: "tls-san", Group: GroupServing,
		Help:       "comma-separated extra host names and IP addresses the generated certificate names (e.g. the Service's tfmirror.tfmirror.svc); public-url's host is always named",
		Doc:        "comma-separated extra host names and IP addresses that the generated certificate (no `--tls-cert`) names, besides `localhost`, the loopback addresses, the machine's host name and `--public-url`'s host: the names in-cluster clients use, such as `tfmirror.tfmirror.svc` and `tfmirror.tfmirror.svc.cluster.local`. A certificate that lacks one is issued again at start. See [Certificates clients can check](operations.md#certificates-clients-can-check)",
		DocDefault: "none",
		bind:       listOf(nil, func(c *Config) *[]string { return &c.TLSSAN })},
	{Name: "insecure-http", Group: GroupServing,
		Help: "serve plain HTTP, for use behind a TLS-terminating proxy only (clients require https)",
		Doc:  "serve plain HTTP, only behind a TLS-terminating proxy (clients require `https:`); refused with `--tls-cert`",
		bind: boolOf(func(c *Config) *bool { return &c.InsecureHTTP })},
	{Name: "trusted-proxies", Group: GroupServing,
		Help:       "comma-separated CIDRs (or IP addresses) of the reverse proxies and load balancers in front of the mirror: from a peer in one, the client address (for the limit of failed authentication attempts and the access log) is X-Forwarded-For's rightmost address outside them",
		Doc:        "comma-separated CIDRs (or single IP addresses) of the reverse proxies, ingresses and load balancers in front of the mirror, such as `10.0.0.0/8` or the ingress controller's pod range. From a request whose connection's peer is in one of them, the client address is taken from `X-Forwarded-For`: its rightmost address that is not itself in one of these ranges (each proxy appends the address it received the request from; what lies left of that the client wrote, and is never read); a header that is missing, holds something other than an IP address where it is read, or names only trusted addresses within its last 32 entries leaves the peer as the client. The client address is what the [limit of failed authentication attempts](operations.md#behind-a-reverse-proxy-or-load-balancer) counts against and what the access log's `client` names. Without it no forwarding header is read, and behind a proxy every client has the proxy's address. From a trusted proxy `X-Forwarded-Proto: https` also makes the URLs the mirror names itself by `https` when `--public-url` is unset and `--insecure-http` is on; from any other peer it is not read. `Forwarded` (RFC 7239) and `X-Forwarded-Host` are never read: the mirror's own URL comes from `--public-url`, set it behind a proxy. Name only proxies that set the header themselves: anyone whose connections come from a trusted range can name any client. Read at start, as `--listen` and the TLS settings are: a new value takes effect after a restart",
		DocDefault: "none (the client address is the connection's peer)",
		bind:       listOf(nil, func(c *Config) *[]string { return &c.TrustedProxies })},
	{Name: "http2", Group: GroupServing,
		Help: "also offer HTTP/2 to TLS clients; by default they get HTTP/1.1, which moves archives faster (see the README)",
		Doc:  "also offer HTTP/2 to TLS clients. Off by default: Terraform and OpenTofu make one request at a time, so HTTP/2 brings them nothing, and Go's HTTP/2 server sends a large archive more slowly than HTTP/1.1 (a warm `terraform init` took 1.35x as long; see [BENCHMARKS.md](../BENCHMARKS.md), figure 6c). Needs TLS",
		bind: boolOf(func(c *Config) *bool { return &c.HTTP2 })},
	{Name: "max-connections", Group: GroupServing,
		Help: "most client connections open at once on the mirror's port; one beyond them waits, unaccepted, for one to close",
		Doc:  "most client connections open at once on the mirror's port (the metrics listener and the admin socket apart), kept-alive ones waiting for their next request included. A connection beyond them is not refused: it waits in the system's listen queue, unaccepted, until one closes (an idle one does within two minutes). It keeps a flood of connections from taking every file descriptor, which the cache's files and the origins' connections need too; keep it below half the process's open-file limit (`ulimit -n`, `LimitNOFILE=` of a systemd unit). `tfmirror_http_connections` and `tfmirror_http_connections_limit` show how close the mirror runs to it (see [Operations](operations.md#connections)). Read at start: a new value takes effect after a restart",
		bind: intOf(4096, func(c *Config) *int { return &c.MaxConnections })},
	{Name: "public-url", Group: GroupServing,
		Help:       "the mirror's base URL as clients reach it (e.g. https://mirror.example.com/), in every answer that names the mirror by an absolute URL; set it behind a proxy, load balancer, cache or CDN; default: taken from each request's Host",
		Doc:        "the mirror's base URL as clients reach it (e.g. `https://mirror.example.com/`), in every answer that names the mirror by an absolute URL: the status page's configuration snippets, the CLI releases door's `index.json` documents (each build's `url`) and the OCI door's token realm (its host); must be an absolute `http(s)` URL without user info, query or fragment (it is shown to anyone who reaches the mirror). The protocol answers (`index.json`, `VERSION.json`, the registry protocols' download answers and `X-Terraform-Get`) use relative URLs and never depend on it, but for a module's `X-Terraform-Get` whose `//SUBDIR` the clients would not read back from a relative location (a space, a letter outside ASCII), which names the mirror by it. A trailing slash is added when it lacks one. **Set it whenever the mirror listens beyond loopback, and always behind a proxy, a load balancer, a cache or a CDN**: that is all a TLS-terminating proxy in front needs, no `X-Forwarded-Host` or `Forwarded` is read. Without it those answers are made from each request's `Host` (and, from a proxy named in `--trusted-proxies` only, `X-Forwarded-Proto`), say so in `Vary: Host, X-Forwarded-Proto`, and a request whose `Host` is not a `HOST[:PORT]` (user info, a path, characters outside a DNS name or IP address, a bad port, longer than 259 bytes) is answered 400; `tfmirror serve` warns at start when it listens beyond loopback without one. See [Behind a reverse proxy or load balancer](operations.md#behind-a-reverse-proxy-or-load-balancer)",
		DocDefault: "from each request",
		Live:       true,
		bind:       stringOf("", func(c *Config) *string { return &c.PublicURL })},
	{Name: "oci-provider-prefix", Group: GroupServing, Commands: Export,
		Help: "repository prefix of providers on the OCI distribution front door (/v2/): PREFIX/HOST/NAMESPACE/TYPE",
		Doc:  "the repository prefix of providers on the OCI distribution front door under `/v2/`: a provider is the repository `PREFIX/HOST/NAMESPACE/TYPE`, for OpenTofu's `oci_mirror` (see [OpenTofu's OCI registries](opentofu-oci.md)); lowercase path components",
		bind: stringOf("providers", func(c *Config) *string { return &c.OCIProviderPrefix })},
	{Name: "oci-module-prefix", Group: GroupServing, Commands: Export,
		Help: "repository prefix of modules on the OCI distribution front door (/v2/): PREFIX/HOST/NAMESPACE/NAME/SYSTEM",
		Doc:  "the repository prefix of modules on the OCI distribution front door: a module is the repository `PREFIX/HOST/NAMESPACE/NAME/SYSTEM`, for OpenTofu's `oci://` module sources; neither prefix may lie under the other",
		bind: stringOf("modules", func(c *Config) *string { return &c.OCIModulePrefix })},
	{Name: "metrics-listen", Group: GroupServing,
		Help:       "optional plain-HTTP address that serves only /metrics and /healthz (e.g. :9090), outside --max-connections; both are always on the main listener too",
		Doc:        "an extra plain-HTTP address (e.g. `:9090`) that serves only `/metrics` and `/healthz`, outside `--max-connections`: a liveness probe there passes while the mirror's port is busy with that many connections (the chart and the manifests probe it so). It keeps at most 64 connections open at once, one beyond them waiting unaccepted until one closes, so that a flood of connections there cannot take the process's file descriptors either; both are always on the main listener too",
		DocDefault: "none",
		bind:       stringOf("", func(c *Config) *string { return &c.MetricsListen })},
	{Name: "shutdown-delay", Group: GroupServing,
		Help: "on SIGTERM, how long to go on serving with /readyz answering 503 before the port stops taking connections, so that a load balancer takes the mirror out first; 0: none",
		Doc:  "on SIGTERM/SIGINT, how long the mirror goes on serving, `/readyz` answering `503` (`{\"status\":\"shutting_down\"}`), before its port stops taking connections and `--shutdown-timeout` begins: a load balancer or a Kubernetes Service that probes `/readyz` takes it out before it refuses connections (a second signal ends the wait at once). The Kubernetes manifests and the chart set `5s`; keep it and `shutdown_timeout` below the pods' `terminationGracePeriodSeconds`. See [Shutdown](operations.md#shutdown)",
		bind: durationOf(0, func(c *Config) *time.Duration { return &c.ShutdownDelay })},
	{Name: "shutdown-timeout", Group: GroupServing,
		Help: "how long to let requests and downloads in flight finish on SIGTERM",
		Doc:  "on SIGTERM/SIGINT, how long requests and downloads in flight may finish (see [Shutdown](operations.md#shutdown))",
		bind: durationOf(30*time.Second, func(c *Config) *time.Duration { return &c.ShutdownTimeout })},

	// Origins.
	{Name: "allowed-origins", Group: GroupOrigins, Commands: Sync | Export,
		Help: "comma-separated origin registry hosts the mirror may serve and contact",
		Doc:  "origin registry hosts the mirror serves; any other host gets 404 and causes no outbound connection (the origin client itself refuses them too, before any DNS lookup)",
		bind: listOf(discovery.DefaultAllowedOrigins(), func(c *Config) *[]string { return &c.AllowedOrigins })},
	{Name: "allow-private-origins", Group: GroupOrigins, Commands: Sync,
		Help: "allow origin and download hosts that resolve to loopback, private or link-local addresses",
		Doc:  "allow origin and download hosts that resolve to loopback, private, link-local or other non-public addresses (checked at connect time, so DNS rebinding cannot get around it; through a proxy, which resolves the target itself, only before the proxy is asked: the proxy's own policy must refuse internal destinations, see [Outbound proxy and address policy](operations.md#outbound-proxy-and-address-policy))",
		bind: boolOf(func(c *Config) *bool { return &c.AllowPrivateOrigins })},
	{Name: "versions-ttl", Group: GroupOrigins,
		Help: "how long a provider's version list is served before it is refreshed",
		bind: durationOf(10*time.Minute, func(c *Config) *time.Duration { return &c.VersionsTTL })},
	{Name: "not-found-ttl", Group: GroupOrigins,
		Help: "how long an origin's 404 for a provider, module or version (and a module package the mirror refused) is remembered and given again without asking it; 0: never remembered",
		Doc:  "how long an origin's definite `404` (a provider's or module's version list, a version's package for a platform, a module version's download answer, a provider archive whose size the OCI door asks for) is remembered and answered again without asking the origin, so that clients asking again and again for what it lacks (a typo in `required_providers`, made-up names) cost it one request per period; failures (5xx, 429, timeouts, a host that is no registry) are never remembered, and what the cache holds is served as before. A module package the mirror refused for what its source gave (over `--module-max-bytes` or another module limit, not a package it can read, unsafe, changed since first mirrored, refused by the source host) and a package its zip cannot hold are remembered as long, so that a client retrying one costs a download (or an unpacking) per period. `0` turns it off (see [Operations](operations.md#what-the-origin-lacks)). A new value given on a reload applies to what is remembered already: a shorter period forgets the answers given longer ago, `0` forgets every answer at once",
		Live: true,
		bind: durationOf(time.Minute, func(c *Config) *time.Duration { return &c.NotFoundTTL })},
	{Name: "not-found-max-entries", Group: GroupOrigins,
		Help: "how many 404 answers are remembered per allowed origin (--not-found-ttl), the least recently used dropped first",
		Doc:  "how many `404` answers are remembered per allowed origin (`--not-found-ttl`), the least recently used dropped first; each takes a few hundred bytes of memory. A lower bound given on a reload forgets the least recently used answers beyond it at once",
		Live: true,
		bind: intOf(10000, func(c *Config) *int { return &c.NotFoundMaxEntries })},
	{Name: "discovery-ttl", Group: GroupOrigins, Commands: Sync,
		Help: "how long an origin's service discovery result is used before it is refreshed",
		Doc:  "how long an origin's service discovery result is used; a `404` for `/.well-known/terraform.json` is asked again after a minute, and while a host's registry was discovered before, such a `404` keeps that result (served as after any failed refresh)",
		bind: durationOf(time.Hour, func(c *Config) *time.Duration { return &c.DiscoveryTTL })},
	{Name: "offline", Group: GroupOrigins,
		Help: "sealed mode: never contact any origin; serve only cached data, anything else is 503",
		Doc:  "sealed mode: never contact any origin; serve only what is cached (version lists however old); anything else is 503 with a JSON error saying the mirror is offline (see [Offline (sealed) mode](operations.md#offline-sealed-mode))",
		bind: boolOf(func(c *Config) *bool { return &c.Offline })},
	{Name: "upstream-proxy", Group: GroupOrigins, Commands: Sync, Secret: true,
		Help:       "proxy URL for all origin traffic (http://host:port, https:// or socks5://); default: HTTPS_PROXY and NO_PROXY from the environment",
		Doc:        "proxy URL for all origin and download traffic (`http://`, `https://`, `socks5://`); without it the standard `HTTPS_PROXY`/`NO_PROXY` variables are honoured. The URL may carry a user and password (their special characters percent-encoded: a URL with a path, query or fragment is refused): only its scheme and host are logged. The proxy resolves and connects to the targets itself, out of the mirror's sight: let it refuse internal destinations ([Outbound proxy and address policy](operations.md#outbound-proxy-and-address-policy))",
		DocDefault: "none (`HTTPS_PROXY`/`NO_PROXY`)",
		bind:       stringOf("", func(c *Config) *string { return &c.UpstreamProxy })},
	{Name: "origin-ca-file", Group: GroupOrigins, Commands: Sync | OnDataDir,
		Help:       "comma-separated PEM files of CA certificates (one or several per file) trusted for origins, download hosts, module source hosts and the shared store, in addition to the system roots: the CA of a TLS-inspecting egress proxy",
		Doc:        "comma-separated PEM files of CA certificates (each may hold several, a bundle) trusted for TLS to origins, download hosts, module source hosts (Git and archives), an `https://` upstream proxy and the `--shared-store` endpoint, *in addition to* the system roots; for the CA of a TLS-inspecting egress proxy. A file without a certificate, or with a PEM block cut short (a file half written), stops start-up. A certificate that no trusted CA signs, that names another host or that expired is answered `502` naming this setting, is not retried and does not open the origin's circuit breaker. When `AWS_CA_BUNDLE` is set, the shared store trusts its bundle as well. See [Behind an egress proxy](operations.md#behind-an-egress-proxy)" + trustedFileDoc,
		DocDefault: "none (the system roots)",
		Reload:     "`tfmirror serve` reads the files again once a minute and at `tfmirror reload` (or `SIGHUP`): CAs added to them are trusted, and CAs taken out of them trusted no more, from the next connection on, the shared store's endpoint's and its credentials' (STS for a web identity) included (unless the AWS configuration gives a CA bundle, `AWS_CA_BUNDLE` or a profile's `ca_bundle`: then they keep the CAs read at start until a restart, and the start warns of it); files that would stop a start are refused, logged and counted once (`tfmirror_origin_ca_reloads_total`), and the CAs in force stay. A new list of files given in the configuration file is put in force by the reload too (all of its files read, or the reload refused and the files in force kept)",
		Live:       true,
		bind:       listOf(nil, func(c *Config) *[]string { return &c.OriginCAFile })},
	{Name: "credentials-file", Group: GroupOrigins, Commands: Sync,
		Help:       "Terraform CLI-config file whose credentials \"HOST\" { token = \"...\" } blocks give bearer tokens for origin hosts (TF_TOKEN_<host> variables are read too)",
		Doc:        "a Terraform CLI configuration file (or `credentials.tfrc.json`) whose `credentials \"HOST\" { token = \"...\" }` blocks give bearer tokens for origin hosts; `TF_TOKEN_<host>` variables are read too and win (see [Origin credentials](operations.md#origin-credentials)). What is no regular file (a FIFO, a device, a directory; a link to a file is followed) stops start-up" + trustedFileDoc,
		DocDefault: "none",
		bind:       stringOf("", func(c *Config) *string { return &c.CredentialsFile })},
	{Name: "origin-timeout", Group: GroupOrigins, Commands: Sync,
		Help: "time limit for each registry JSON, SHA256SUMS or signature request to an origin, body included (archives are limited by idle time instead)",
		Doc:  "time limit for each service discovery, registry JSON, `SHA256SUMS` or signature request to an origin, body included; archive downloads are limited by idle time and `--origin-min-speed` instead. See [origin limits](operations.md#origin-limits)",
		bind: durationOf(30*time.Second, func(c *Config) *time.Duration { return &c.OriginTimeout })},
	{Name: "origin-min-speed", Group: GroupOrigins, Commands: Sync,
		Help: "low-speed limit of archive downloads, in bytes per second (e.g. 1KiB): a download averaging less over --origin-min-speed-window is aborted as an origin timeout; 0 disables",
		Doc:  "low-speed limit of archive downloads, in bytes per second (size syntax as `--max-archive-bytes`): a download that averages less over `--origin-min-speed-window` spent waiting for the origin (not for the local disk) is aborted as an origin timeout; `0` disables",
		bind: sizeOf(1<<10, func(c *Config) *int64 { return &c.OriginMinSpeed })},
	{Name: "origin-min-speed-window", Group: GroupOrigins, Commands: Sync,
		Help: "the window over which --origin-min-speed is measured; 0 disables the low-speed limit",
		Doc:  "the window over which `--origin-min-speed` is measured; `0` disables the low-speed limit",
		bind: durationOf(30*time.Second, func(c *Config) *time.Duration { return &c.OriginMinSpeedWindow })},
	{Name: "releases-hashicorp-url", Group: GroupOrigins, Commands: Sync, Secret: true,
		Help: "base URL of HashiCorp's releases layout the CLI releases door (/releases/hashicorp/) pulls through; its host must be in --allowed-origins",
		Doc:  "base URL of HashiCorp's releases layout that the CLI releases door (`/releases/hashicorp/`) pulls through; the door answers only while its host is in `--allowed-origins` (see [CLI releases](cli-releases.md)). Like the other two `releases_*_url`, an absolute `https` URL without user info, query or fragment: the door joins the files' paths after it, and an origin's token goes in `--credentials-file`",
		bind: stringOf("https://releases.hashicorp.com/", func(c *Config) *string { return &c.ReleasesHashiCorpURL })},
	{Name: "releases-hashicorp-products", Group: GroupOrigins, Commands: Sync | Export | Import,
		Help: "comma-separated HashiCorp products the CLI releases door serves (terraform-provider-* never: the provider doors serve providers)",
		Doc:  "HashiCorp products the CLI releases door serves (`packer`, `vault`, ...); `terraform-provider-*` is never served there",
		bind: listOf([]string{"terraform"}, func(c *Config) *[]string { return &c.ReleasesHashiCorpProducts })},
	{Name: "releases-hashicorp-keys", Group: GroupOrigins, Commands: Sync | Export | Import,
		Help:       "file of ASCII-armored OpenPGP public keys a HashiCorp SHA256SUMS must be signed by; default: HashiCorp's key 72D7468F, shipped with tfmirror",
		Doc:        "file of ASCII-armored OpenPGP public keys that a HashiCorp `SHA256SUMS` must be signed by, replacing the shipped HashiCorp key `72D7468F` (see [CLI releases](cli-releases.md#publisher-keys))" + trustedFileDoc,
		DocDefault: "HashiCorp's key, shipped",
		bind:       stringOf("", func(c *Config) *string { return &c.ReleasesHashiCorpKeys })},
	{Name: "releases-opentofu-url", Group: GroupOrigins, Commands: Sync, Secret: true,
		Help: "base URL of OpenTofu's release files (vVERSION/FILE) the CLI releases door (/releases/opentofu/) pulls through; its host must be in --allowed-origins",
		Doc:  "base URL of OpenTofu's release files (`vVERSION/FILE`) that the CLI releases door (`/releases/opentofu/`) pulls through; its host must be in `--allowed-origins`",
		bind: stringOf("https://github.com/opentofu/opentofu/releases/download/", func(c *Config) *string { return &c.ReleasesOpenTofuURL })},
	{Name: "releases-opentofu-api-url", Group: GroupOrigins, Commands: Sync, Secret: true,
		Help: "URL of OpenTofu's version list (api.json); its host must be in --allowed-origins",
		Doc:  "URL of OpenTofu's version list (`api.json`), which OpenTofu's installers read; its host must be in `--allowed-origins`",
		bind: stringOf("https://get.opentofu.org/tofu/api.json", func(c *Config) *string { return &c.ReleasesOpenTofuAPIURL })},
	{Name: "releases-opentofu-keys", Group: GroupOrigins, Commands: Sync | Export | Import,
		Help:       "file of ASCII-armored OpenPGP public keys an OpenTofu SHA256SUMS must be signed by (.gpgsig); default: OpenTofu's key, shipped with tfmirror",
		Doc:        "file of ASCII-armored OpenPGP public keys that an OpenTofu `SHA256SUMS` must be signed by (its `.gpgsig`), replacing the shipped OpenTofu key" + trustedFileDoc,
		DocDefault: "OpenTofu's key, shipped",
		bind:       stringOf("", func(c *Config) *string { return &c.ReleasesOpenTofuKeys })},
	{Name: "origin-retries", Group: GroupOrigins, Commands: Sync,
		Help: "how many times a failed origin request is retried (connection failures, timeouts, 429, 5xx other than 501); 0 disables retries",
		Doc:  "how many times a failed origin request is retried (connection failures, timeouts, 429, 5xx other than 501); `0` disables retries. See [origin failures](operations.md#origin-failures-and-retries)",
		bind: intOf(2, func(c *Config) *int { return &c.OriginRetries })},
	{Name: "origin-breaker-threshold", Group: GroupOrigins, Commands: Sync,
		Help: "consecutive failed origin requests that open an origin's circuit breaker; 0 disables the breaker",
		Doc:  "consecutive failed origin requests that open an origin's circuit breaker; `0` disables the breaker",
		bind: intOf(5, func(c *Config) *int { return &c.BreakerThreshold })},
	{Name: "origin-breaker-cooldown", Group: GroupOrigins, Commands: Sync,
		Help: "how long an open circuit breaker fails requests to its origin at once before letting a probe through",
		Doc:  "how long an open circuit breaker fails requests to its origin at once (503 with `Retry-After`) before letting one probe request through",
		bind: durationOf(30*time.Second, func(c *Config) *time.Duration { return &c.BreakerCooldown })},

	// Provider archives.
	{Name: "platforms", Group: GroupArchives,
		Help:       "comma-separated os_arch platforms listed in VERSION.json (default all)",
		Doc:        "comma-separated `os_arch` list; `VERSION.json` lists only these and other archives are not served",
		DocDefault: "all",
		bind:       listOf(nil, func(c *Config) *[]string { return &c.Platforms })},
	{Name: "max-archive-bytes", Group: GroupArchives, Commands: Sync,
		Help: "largest provider archive the mirror fetches (e.g. 2GiB)",
		Doc:  "largest archive the mirror downloads; with `--shared-store`, at most `5GiB` (the largest object the store writes in one PUT), a larger value is refused",
		bind: sizeOf(2<<30, func(c *Config) *int64 { return &c.MaxArchiveBytes })},
	{Name: "archive-max-unpacked-bytes", Group: GroupArchives, Commands: Sync,
		Help: "most bytes a provider archive may unpack to, all its files together (e.g. 2GiB): a larger one (a zip bomb) is refused, counted from what its zip declares and from the bytes actually inflated",
		Doc:  "most bytes a provider archive may unpack to, all its files together; a larger one (a zip bomb) is refused from its zip's declared sizes, or once that many bytes were actually inflated. See [How it works](how-it-works.md)",
		bind: sizeOf(verify.DefaultMaxUnpackedBytes, func(c *Config) *int64 { return &c.ArchiveMaxUnpacked })},
	{Name: "archive-max-entries", Group: GroupArchives, Commands: Sync,
		Help: "most files and directories a provider archive may hold",
		bind: intOf(verify.DefaultMaxEntries, func(c *Config) *int { return &c.ArchiveMaxEntries })},
	{Name: "max-archive-downloads", Group: GroupArchives, Commands: Sync,
		Help: "most archive downloads from origins at once (and, apart, module package fetches); the others wait for one to end while a client waits for them, and are dropped, nothing asked of the origin, once their last client left",
		Doc:  "most archive downloads from origins (provider archives, CLI release archives) that run at once. A download beyond them waits for one to end while a client waits for it, and is dropped, nothing asked of the origin, once its last client left; imports and copies from the shared store take no slot. Module package fetches from source hosts are bounded by the same number, in a pool of their own: one beyond them waits, within `--module-timeout`. `tfmirror_origin_waiting_archive_fetches` counts those waiting",
		bind: intOf(64, func(c *Config) *int { return &c.MaxArchiveDownloads })},

	// Registry modules.
	{Name: "module-max-bytes", Group: GroupModules, Commands: Sync,
		Help: "largest registry module package the mirror downloads from its source host: an archive, or a Git repository's pack (submodules included)",
		Doc:  "largest registry module package the mirror downloads from its source host: an archive, or a Git repository's pack (submodules included). See [Modules](modules.md)",
		bind: sizeOf(256<<20, func(c *Config) *int64 { return &c.ModuleMaxBytes })},
	{Name: "module-max-tree-bytes", Group: GroupModules, Commands: Sync,
		Help: "largest total size of a registry module package's files once unpacked (catches archive and Git bombs)",
		Doc:  "largest total size of a module package's files once unpacked; catches archive and Git bombs",
		bind: sizeOf(512<<20, func(c *Config) *int64 { return &c.ModuleMaxTreeBytes })},
	{Name: "module-max-files", Group: GroupModules, Commands: Sync,
		Help: "most files, directories and links a registry module package may have",
		Doc:  "most files, directories and links a module package may have",
		bind: intOf(20000, func(c *Config) *int { return &c.ModuleMaxFiles })},
	{Name: "module-timeout", Group: GroupModules, Commands: Sync,
		Help: "time limit for fetching one registry module package from its source host (clone or download, and normalization); sync reads the package's configuration within the same limit",
		Doc:  "time limit for fetching one module package from its source host (clone or download, and normalization); `tfmirror sync` reads the package's configuration within the same limit. See [tfmirror sync](air-gap.md#tfmirror-sync)",
		bind: durationOf(10*time.Minute, func(c *Config) *time.Duration { return &c.ModuleTimeout })},
	{Name: "module-source-credentials", Group: GroupModules, Commands: Sync,
		Help:       "HCL (or .json) file of source_host \"HOST\" { origins = [...], token_env = \"VAR\" } blocks: credentials for module source hosts (Git, archives), used only for modules of the origins each names; default: sources are fetched anonymously",
		Doc:        "HCL (or `.json`) file of `source_host \"HOST\" { origins = [...], token_env = \"VAR\" }` blocks: credentials for module source hosts (Git, archives), used only for the modules of the origins each names; what is no regular file (a FIFO, a device, a directory; a link to a file is followed), the file or a `*_file` secret it names, stops start-up. See [Credentials for private source hosts](modules.md#credentials-for-private-source-hosts)" + trustedFileDoc,
		DocDefault: "none: sources are fetched anonymously",
		bind:       stringOf("", func(c *Config) *string { return &c.ModuleSourceCredentials })},

	// Data directory and cache.
	{Name: "data-dir", Group: GroupCache, Commands: Sync,
		Help: "directory for the cache and generated TLS material",
		Doc:  "the Badger cache (`cache/`) and generated TLS material (`tls/`)",
		bind: stringOf("./tfmirror-data", func(c *Config) *string { return &c.DataDir })},
	{Name: "cache-max-bytes", Group: GroupCache, Commands: Sync,
		Help:       "evict least recently used archives to keep the cache's archives under this size (e.g. 50GiB); 0 means unlimited",
		Doc:        "evict least recently used archives to keep the cached archives' total size under this (size syntax as `--max-archive-bytes`, e.g. `50GiB`); what cannot be fetched again and pinned versions are never evicted (see [Retention](operations.md#retention)); the data directory is kept within 1.25 times this plus `--disk-reserve` (see [Cache size and eviction](operations.md#cache-size-and-eviction))",
		DocDefault: "`0` (unlimited)",
		bind:       sizeOf(0, func(c *Config) *int64 { return &c.CacheMaxBytes })},
	{Name: "disk-reserve", Group: GroupCache, Commands: Sync,
		Help: "free space to keep on the data directory's file system: below it (plus Badger's LSM tree) nothing is written to the cache, archives are served but not cached and /readyz fails; 0 disables the check",
		Doc:  "free space to keep on the data directory's file system; below it (plus the size of Badger's LSM tree) nothing is written to the cache: archives are served but not cached and `/readyz` answers 503. The default is what Badger may still write on its own (see [Disk full](operations.md#disk-full)); `0` disables the check",
		bind: sizeOf(cache.DefaultDiskReserve, func(c *Config) *int64 { return &c.DiskReserve })},
	{Name: "cache-verify-interval", Group: GroupCache, Commands: Sync,
		Help:       "check every cached package against its stored evidence or sha256 this often, in the background, as tfmirror cache verify does (e.g. 168h); 0: only when tfmirror cache verify asks",
		Doc:        "check every cached package against its stored evidence or sha256 this often, in the background, as `tfmirror cache verify` does (e.g. `168h`; see [Checking the cache](operations.md#checking-the-cache)); `0`: only when `tfmirror cache verify` asks",
		DocDefault: "`0`",
		bind:       durationOf(0, func(c *Config) *time.Duration { return &c.CacheVerifyInterval })},

	// Retention.
	{Name: "keep-versions", Group: GroupRetention, Commands: Prune,
		Help:       "keep the packages of only the newest N cached versions of each provider, module and CLI product; older ones are removed (fetched again if asked for); 0 keeps all",
		Doc:        "keep the packages of only the newest N cached versions of each provider, module and CLI product; see [Retention](operations.md#retention)",
		DocDefault: "`0` (all)",
		bind:       intOf(0, func(c *Config) *int { return &c.KeepVersions })},
	{Name: "keep-versions-per-major", Group: GroupRetention, Commands: Prune,
		Help: "apply --keep-versions to each major version apart (the newest N of 4.x, of 5.x, ...)",
		Doc:  "apply `--keep-versions` to each major version apart",
		bind: boolOf(func(c *Config) *bool { return &c.KeepPerMajor })},
	{Name: "evict-unused-after", Group: GroupRetention, Commands: Prune,
		Help:       "remove the packages of versions nobody downloaded for this long (e.g. 30d, 72h); 0 disables",
		Doc:        "remove the packages of versions nobody downloaded for this long (`30d`, `72h`)",
		DocDefault: "`0` (never)",
		bind:       daysOf(func(c *Config) *time.Duration { return &c.EvictUnusedAfter })},
	{Name: "pins-dir", Group: GroupRetention, Commands: Prune,
		Help:       "directory of Terraform lock files (*.lock.hcl) and sync manifests (*.hcl: provider, module and cli blocks), read again when they change: the versions they select are never removed by any rule or the size limit, and are listed as pinned on the status page",
		Doc:        "directory of lock files (`*.lock.hcl`) and sync manifests (`*.hcl`: `provider`, `module` and `cli` blocks) whose versions no rule and no size limit removes; see [Pinning CLI versions](operations.md#pinning-cli-versions). Each file is read as the operator's files of trust are: at most 4 MiB, and one its group or all users may write, or that a user other than root and the mirror's owns, is refused unless on a read-only mount (a ConfigMap's), the pins read before kept; see [The files you hand the mirror](operations.md#the-files-you-hand-the-mirror)",
		DocDefault: "none",
		Reload:     "its files are read again when they change",
		bind:       stringOf("", func(c *Config) *string { return &c.PinsDir })},
	{Name: "retention-interval", Group: GroupRetention,
		Help: "how often the retention rules (--keep-versions, --evict-unused-after) are applied in the background; 0: only when tfmirror cache prune asks",
		Doc:  "how often the retention rules are applied in the background; `0`: only by `tfmirror cache prune`",
		bind: durationOf(10*time.Minute, func(c *Config) *time.Duration { return &c.RetentionInterval })},

	// Client authentication.
	{Name: "auth-tokens-file", Group: GroupAuth,
		Help:       "file of client bearer tokens, one per line ('#' comments), each at least 16 characters (openssl rand -hex 32); enables client authentication and signed archive URLs",
		Doc:        "file of client bearer tokens, one per line (`#` comments and blank lines ignored), each at least 16 characters (make one with `openssl rand -hex 32`); turns on [client authentication](operations.md#client-authentication), with failed attempts limited per client address. A missing, unreadable or empty file, one with a shorter token (named by file and line), or what is no regular file (a FIFO, a device, a directory; a link to a file is followed), stops start-up" + trustedFileDoc,
		DocDefault: "none (no client authentication)",
		Reload:     "`tfmirror reload` (or `SIGHUP`) reads the file again; on any error (a short token too) the tokens in force stay",
		bind:       stringOf("", func(c *Config) *string { return &c.AuthTokensFile })},
	{Name: "url-signing-key-file", Group: GroupAuth,
		Help:       "file holding the key (at least 32 bytes) that signs archive URLs; share it between replicas. Default: DATA-DIR/url-signing.key, created on first use",
		Doc:        "key (at least 32 bytes) that signs archive URLs when client authentication is on; give every replica the same file. Given without `--auth-tokens-file`, it is refused (serve does not start)" + trustedFileDoc,
		DocDefault: "`DATA-DIR/url-signing.key`, generated",
		bind:       stringOf("", func(c *Config) *string { return &c.URLSigningKeyFile })},
	{Name: "signed-url-ttl", Group: GroupAuth,
		Help: "how long a signed archive URL in VERSION.json stays valid",
		Doc:  "how long an archive URL in `VERSION.json` stays valid when client authentication is on",
		bind: durationOf(time.Hour, func(c *Config) *time.Duration { return &c.SignedURLTTL })},

	// Shared store.
	{Name: "shared-store", Group: GroupShared, Commands: Sync | OnDataDir,
		Help:       "S3-compatible bucket shared by replicas behind their local caches: s3://BUCKET/PREFIX?endpoint=URL&region=REGION&path_style=true (endpoint, region, path_style optional); credentials from the standard AWS sources",
		Doc:        "S3-compatible bucket that replicas share behind their local caches: `s3://BUCKET/PREFIX?endpoint=URL&region=REGION&path_style=true` (`PREFIX`, `endpoint`, `region` and `path_style` optional; `endpoint` and `path_style=true` for MinIO, Ceph RGW, versitygw and the like; `endpoint` an `http(s)` URL without user info, query or fragment). Credentials come from the standard AWS sources. See [Scaling out](scaling-out.md)",
		DocDefault: "none (each replica on its own)",
		show:       sharedstore.ShownURL,
		bind:       stringOf("", func(c *Config) *string { return &c.SharedStore })},
	{Name: "shared-store-key-file", Group: GroupShared, Commands: Sync | OnDataDir,
		Help:       "file holding the key (at least 32 bytes) that authenticates every object the replicas write to the --shared-store; required with it, the same file on every replica (e.g. a mounted Secret)",
		Doc:        "file holding the key (at least 32 bytes, e.g. `head -c 32 /dev/urandom`) that authenticates every object the replicas write to the shared store (HMAC-SHA256 over the store's ID, its kind, name and content): an object that does not authenticate is ignored and taken from the origin. Required with `shared_store`; give every replica the same file (a mounted Secret). See [Trust](trust.md#the-shared-bucket) and [rotating it](scaling-out.md#rotating-the-shared-store-key)" + trustedFileDoc,
		DocDefault: "none (required with `shared_store`)",
		bind:       stringOf("", func(c *Config) *string { return &c.SharedKeyFile })},
	{Name: "shared-store-previous-key-file", Group: GroupShared, Commands: Sync | OnDataDir,
		Help:       "file holding a second key that objects in the --shared-store may still be authenticated with, during a rotation of --shared-store-key-file; it verifies, never signs",
		Doc:        "file holding a second key that objects read from the shared store may still be authenticated with (it verifies, never signs), for a [rotation](scaling-out.md#rotating-the-shared-store-key) of `shared_store_key_file`" + trustedFileDoc,
		DocDefault: "none",
		bind:       stringOf("", func(c *Config) *string { return &c.SharedPrevKeyFile })},
	{Name: "shared-store-id", Group: GroupShared, Commands: Sync | OnDataDir,
		Help:       "the --shared-store's ID, which every object's MAC binds: an object written to a store of another ID is refused, although the same key signed it; the same on every replica (default s3://BUCKET/PREFIX/ of --shared-store, with the trailing slash, as the start-up log's store_id and the status page show it)",
		Doc:        "the shared store's ID, bound into the MAC of every object the replicas write (with its kind, name and content): an object copied from a store of another ID (a staging bucket read under the same key, say) is ignored and taken from the origin. The same on every replica. The default, `s3://BUCKET/PREFIX/` of `shared_store` (with the trailing slash, `s3://BUCKET/` without a prefix; its endpoint left out; the start-up log's `store_id`, the status page (Health and Configuration) and `config check` show it), differs for every bucket and prefix; set it to keep a store's objects when moving it to another bucket or prefix (give the new location the old default), or to tell apart two servers holding a bucket of the same name under one key. At most 256 bytes, no control characters. See [Trust](trust.md#the-shared-bucket)",
		DocDefault: "`s3://BUCKET/PREFIX/` of `shared_store`",
		derived: func(raw func(string) string) string {
			if loc, err := sharedstore.ParseURL(raw("shared-store")); err == nil && raw("shared-store") != "" {
				return sharedstore.DefaultStoreID(loc)
			}
			return ""
		},
		bind: stringOf("", func(c *Config) *string { return &c.SharedStoreID })},
	{Name: "shared-store-lease-ttl", Group: GroupShared, Commands: Sync | OnDataDir,
		Help: "how long a replica's lease on an origin download in the --shared-store lasts unless renewed (every third of it): after a replica dies, others wait this long before they take its download over",
		Doc:  "how long a replica's lease on an origin download in the shared store lasts unless renewed (every third of it); after a replica dies mid-download, the others wait this long before one takes the download over. At least `3s`",
		bind: durationOf(30*time.Second, func(c *Config) *time.Duration { return &c.SharedLeaseTTL })},
	{Name: "shared-store-timeout", Group: GroupShared, Commands: Sync | OnDataDir,
		Help: "limit on each call to the --shared-store but an archive body's transfer, and on a wait for the next byte of one",
		Doc:  "limit on each call to the shared store, except the transfer of an archive's body, and on a wait for the next byte of one (an archive going silent midway is taken from the origin); at most 2m (a record is refused as put back when the store wrote it more than 15 minutes and one such call after its writing)",
		bind: durationOf(10*time.Second, func(c *Config) *time.Duration { return &c.SharedTimeout })},
	{Name: "shared-store-min-speed", Group: GroupShared, Commands: Sync | OnDataDir,
		Help: "low-speed limit of an archive's body from the --shared-store, in bytes per second (e.g. 1KiB): a body averaging less over --shared-store-timeout is broken off and the rest taken from the origin; 0 disables",
		Doc:  "low-speed limit of an archive's body read from the shared store, in bytes per second (size syntax as `--max-archive-bytes`): a body that averages less over a `shared_store_timeout`, counted from its first byte asked in the time spent waiting for the store (not for the local disk), is broken off as a store gone silent is (a failed call toward the breaker) and the rest of the archive taken from the origin; `0` disables",
		bind: sizeOf(1<<10, func(c *Config) *int64 { return &c.SharedMinSpeed })},
	{Name: "shared-store-breaker-threshold", Group: GroupShared, Commands: Sync | OnDataDir,
		Help: "failed --shared-store calls in a row after which the replica stops calling it for --shared-store-breaker-cooldown",
		Doc:  "failed shared-store calls in a row that open its circuit breaker; a call answered after more than half of `shared_store_timeout` counts as failed (its answer is used all the same)",
		bind: intOf(5, func(c *Config) *int { return &c.SharedBreakerThresh })},
	{Name: "shared-store-breaker-cooldown", Group: GroupShared, Commands: Sync | OnDataDir,
		Help: "how long the replica leaves a failing --shared-store alone (serving from its own cache and the origins) before trying it again",
		Doc:  "how long the replica leaves the store alone once its breaker opened (serving from its own cache and the origins) before trying it again",
		bind: durationOf(30*time.Second, func(c *Config) *time.Duration { return &c.SharedBreakerCool })},

	// Air gap and trust.
	{Name: "export-key", Group: GroupAirGap, Commands: Export | ExportKey,
		Help:       "file holding the ASCII-armored OpenPGP private key that signs the manifest of every export (e.g. a mounted Secret, so that replicas and restarts keep one key); default DATA-DIR/" + ExportKeyName + ", made on first use",
		Doc:        "file holding the ASCII-armored OpenPGP private key (no passphrase) that signs the manifest of every [export](air-gap.md#export) done through this serve; give replicas the same file (e.g. a mounted Secret). A file that does not hold one stops start-up. See [Trust](trust.md)" + trustedFileDoc,
		DocDefault: "`DATA-DIR/" + ExportKeyName + "`, generated on first export",
		bind:       stringOf("", func(c *Config) *string { return &c.ExportKeyFile })},
	{Name: "trusted-export-keys", Group: GroupAirGap, Commands: Import,
		Help:       "comma-separated files of ASCII-armored OpenPGP public keys (several per file allowed) of exporting mirrors (tfmirror export-key prints one): an import takes the versions whose files the manifest signed by one of them lists",
		Doc:        "comma-separated files of ASCII-armored OpenPGP public keys (several per file allowed) of exporting mirrors: an [import](air-gap.md#import) through this serve takes the versions whose every file the manifest signed by one of them lists. See [Trust](trust.md)" + trustedFileDoc,
		DocDefault: "none",
		Reload:     "`tfmirror reload` (or `SIGHUP`) reads its files again, for the next import: a key removed from a file is no longer trusted; on any error the keys in force stay",
		bind:       listOf(nil, func(c *Config) *[]string { return &c.TrustedExportKeys })},
	{Name: "trusted-publisher-keys", Group: GroupAirGap, Commands: Import,
		Help:       "comma-separated HOST/NAMESPACE=FILE: ASCII-armored OpenPGP public keys pinned for one namespace; an import takes a version of that namespace whose SHA256SUMS one of them signed",
		Doc:        "comma-separated `HOST/NAMESPACE=FILE`: ASCII-armored OpenPGP public keys pinned for one namespace (a namespace may be named several times); an import through this serve takes a version of that namespace whose `SHA256SUMS` one of them signed, whatever the bundle. See [Trust](trust.md)" + trustedFileDoc,
		DocDefault: "none",
		Reload:     "`tfmirror reload` (or `SIGHUP`) reads its files again, for the next import: a key removed from a file is no longer trusted; on any error the keys in force stay",
		bind:       listOf(nil, func(c *Config) *[]string { return &c.TrustedPublisherKeys })},
	{Name: "allow-unsigned-hosts", Group: GroupAirGap, Commands: Import,
		Help:       "comma-separated allowed origin hosts under which versions without signature (in-house builds) may be imported and are served; under any other allowed origin an import with --allow-unsigned refuses them and versions imported so earlier are withheld, since they would shadow the origin's providers. Hosts that are not origins need no entry",
		Doc:        "comma-separated hosts of `--allowed-origins` under which versions without signature (in-house builds) may be imported and are served. Under any other allowed origin, `import --allow-unsigned` refuses them, and versions imported so by 1.x are withheld (kept, not served, listed on the status page): they would shadow the origin's providers. Hosts that are not origins need no entry. See [In-house providers](air-gap.md#in-house-providers)",
		DocDefault: "none",
		bind:       listOf(nil, func(c *Config) *[]string { return &c.AllowUnsignedHosts })},

	// Logging.
	{Name: "log-format", Group: GroupLogging, Commands: Sync,
		Help: "log format: json or text",
		Doc:  "`json` or `text`",
		bind: stringOf("json", func(c *Config) *string { return &c.LogFormat })},
	{Name: "log-level", Group: GroupLogging, Commands: Sync | OnDataDir,
		Help: "log level: debug, info, warn or error",
		Doc:  "`debug`, `info`, `warn` or `error`",
		Live: true,
		bind: stringOf("info", func(c *Config) *string { return &c.LogLevel })},
}

// Named is the setting of flag name; it panics when there is none, since
// every caller names a setting of the table.
func Named(name string) *Setting {
	for _, s := range Table {
		if s.Name == name {
			return s
		}
	}
	panic(fmt.Sprintf("tfmirror: no setting %q", name))
}

// TakenBy are the settings cmd takes, with serve's meaning.
func TakenBy(cmd Command) []*Setting {
	var out []*Setting
	for _, s := range Table {
		if s.Commands&cmd != 0 {
			out = append(out, s)
		}
	}
	return out
}

// Add registers the named settings on fs, bound to their fields of c.
func Add(fs *flag.FlagSet, c *Config, names ...string) {
	for _, n := range names {
		Named(n).Register(fs, c)
	}
}

// TakeGiven sets in dst each of the named settings given on fs's command
// line, from src (the Config Add bound them to on fs), and returns those
// given, as "--NAME". A command's flag given overrides what dst holds
// from the environment and the configuration file, as serve takes them.
func TakeGiven(fs *flag.FlagSet, src Config, dst *Config, names ...string) []string {
	var given []string
	for _, n := range names {
		if fs.Lookup(n) == nil {
			panic(fmt.Sprintf("tfmirror: setting %q is not registered on %s", n, fs.Name()))
		}
	}
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(names, f.Name) {
			Named(f.Name).bind.take(dst, &src)
			given = append(given, "--"+f.Name)
		}
	})
	return given
}

// AddTakenBy registers on fs the settings cmd takes, bound to their
// fields of c, and returns their names.
func AddTakenBy(fs *flag.FlagSet, c *Config, cmd Command) []string {
	var names []string
	for _, s := range TakenBy(cmd) {
		s.Register(fs, c)
		names = append(names, s.Name)
	}
	return names
}
