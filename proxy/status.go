package proxy

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dustin/go-humanize"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/internal/logbound"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/cachecheck"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
	"github.com/tfmirror/tfmirror/v2/retention"
)

//go:embed status.html
var statusHTML string

var statusTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"size":       func(n int64) string { return humanize.IBytes(uint64(max(n, 0))) },
	"split":      func(addr string) []string { return strings.Split(addr, "/") }, // to allow line breaks after slashes
	"ago":        agoText,
	"count":      countOf,
	"stateText":  originStateText,
	"stateClass": originStateClass,
	"hcl":        func(s string) string { q := hclString(s); return q[1 : len(q)-1] }, // inside the page's quotes
}).Parse(statusHTML))

// hclString is s as an HCL quoted string: a quote, a backslash and a
// control character escaped, "${" and "%{" doubled so that they are read
// as themselves, not as a template. The page's snippets quote the
// mirror's URL with it, which the clients then read back as it is.
func hclString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case (r == '$' || r == '%') && strings.HasPrefix(s[i+n:], "{"):
			b.WriteRune(r)
			b.WriteRune(r)
		case r == utf8.RuneError && n == 1, r < 0x20, r == 0x7f, !unicode.IsPrint(r) && r > 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
		i += n
	}
	b.WriteByte('"')
	return b.String()
}

// countOf is *n, 0 when n is nil (a count the page does not know).
func countOf(n *int) int {
	if n == nil {
		return 0
	}
	return *n
}

// Status is what the status page shows, and its JSON form.
type Status struct {
	MirrorURL string `json:"mirror_url"`
	// MirrorURLFromRequest says MirrorURL is the URL this request was
	// made to (its Host; RequestURL): no public URL is set.
	MirrorURLFromRequest bool `json:"mirror_url_from_request,omitempty"`
	// OCIBlock is the oci_mirror block of the OCI front door, ready to
	// paste (Config.OCIBlock); "" without one.
	OCIBlock string `json:"oci_block,omitempty"`
	// OCIModuleSource is an example oci:// module source of the OCI front
	// door (Config.OCIModuleSource); "" without one.
	OCIModuleSource string `json:"oci_module_source,omitempty"`
	// OCIRootOnly is the path of the mirror's URL when it has one
	// (a public URL behind a path prefix): OCI clients ask the host's
	// root (/v2/), which must then reach the mirror too, as the page
	// says; "" for a mirror at its host's root.
	OCIRootOnly string `json:"oci_root_only,omitempty"`
	// CLIReleases is each CLI installer's settings for the releases door
	// (Config.CLIReleases), ready to paste; "" without one.
	CLIReleases string `json:"cli_releases,omitempty"`
	// CLIReleasesOff says why the releases door serves no publisher
	// (Config.CLIReleasesOff), CLIReleases then empty.
	CLIReleasesOff string           `json:"cli_releases_off,omitempty"`
	Version        string           `json:"version"`
	AllowedOrigins []string         `json:"allowed_origins"`
	Platforms      []string         `json:"platforms,omitempty"`
	Archives       int              `json:"cached_archives"`
	Bytes          int64            `json:"cached_bytes"`
	Providers      []StatusProvider `json:"providers"`
	// Withheld are the versions the engine keeps but does not serve
	// (mirror.Engine.Withheld): imported without signature under an
	// allowed origin host that its configuration does not name, and
	// those the package policy holds back, which name their rule, reason
	// and, for the age gate, when they become available. HeldBack sums
	// up the latter. Both left out with ProvidersHidden.
	Withheld []unsigned.Version `json:"withheld,omitempty"`
	HeldBack *HeldSummary       `json:"held_back,omitempty"`
	// UnsignedWithheld and PolicyHeld are Withheld parted, for the HTML
	// page.
	UnsignedWithheld []unsigned.Version `json:"-"`
	PolicyHeld       []unsigned.Version `json:"-"`
	// Modules are the registry modules with records (see modules.go).
	Modules   []StatusModule `json:"modules,omitempty"`
	Generated time.Time      `json:"generated"`
	// Health is the mirror's own state, shown to everyone.
	Health Health `json:"health"`
	// Origins are the allowed origins' rows (Config.Origins): circuit
	// breaker, last error and success, the last hour's counts; shown to
	// everyone, without the errors' text when ProvidersHidden.
	Origins []OriginHealth `json:"origins"`
	// OriginTrouble is the health block's line on failing origins, for
	// the HTML page; "" when none is.
	OriginTrouble string `json:"-"`
	// Policy is the package policy in force (Config.Policy); left out
	// with ProvidersHidden.
	Policy *StatusPolicy `json:"policy,omitempty"`
	// CredentialsHost is set when clients need a token: the host name
	// (with its port unless 443) of their CLI configuration's credentials block.
	CredentialsHost string `json:"credentials_host,omitempty"`
	// ClientAuth is, with client authentication on, the limit of failed
	// authentication attempts: the attempts refused since start, how many
	// client addresses are over the limit now, how many trusted proxy
	// ranges are configured. Counts only; left out with ProvidersHidden.
	ClientAuth *AuthLimitStatus `json:"client_auth,omitempty"`
	// ProvidersHidden is set when client authentication is on and the
	// request carried no valid token: the provider list is then left out.
	ProvidersHidden bool `json:"providers_hidden,omitempty"`
	// HostBlocks is, for each allowed origin host, the CLI configuration
	// host block that points the host's providers.v1 and modules.v1
	// services at this mirror's registry protocol (see RegistryPath and
	// ModulesPath).
	HostBlocks map[string]string `json:"host_blocks"`
	// HostBlockNote is set with client authentication on: which token
	// the clients send through a host block, and to whom.
	HostBlockNote string `json:"host_block_note,omitempty"`
	// HostBlockList is HostBlocks in host order, for the HTML page.
	HostBlockList []HostBlock `json:"-"`
	// Retention is what retention keeps (Config.Retention); its pinned
	// versions are left out with ProvidersHidden.
	Retention *retention.Status `json:"retention,omitempty"`
	// CacheCheck is the last check of the whole cache by this process
	// (tfmirror cache verify), absent before the first; it names no
	// provider.
	CacheCheck *cachecheck.Summary `json:"cache_check,omitempty"`
	// Page says which part of the cache's lists Providers and Modules
	// hold, and where the next part starts.
	Page StatusPage `json:"page"`
	// SharedStore is where the shared store is and its ID
	// (Config.SharedStore); absent without one, and left out with
	// ProvidersHidden, as Configuration is.
	SharedStore *StatusSharedStore `json:"shared_store,omitempty"`
	// Configuration is the configuration in effect (Config.Settings);
	// left out with ProvidersHidden: file paths and bucket names are not
	// for anyone who can reach the mirror either.
	Configuration *Configuration `json:"configuration,omitempty"`
}

// StatusSharedStore is the shared store (--shared-store) as the status
// page shows it: where it is and the ID every replica sharing it must
// use. It holds no credential: those come from the standard AWS sources,
// and the endpoint is shown without its userinfo and query.
type StatusSharedStore struct {
	// Location is s3://BUCKET/PREFIX/; Endpoint the S3 endpoint, "" for
	// AWS's.
	Location string `json:"location"`
	Endpoint string `json:"endpoint,omitempty"`
	// StoreID is the ID in the MAC of every object (--shared-store-id,
	// by default Location): a replica with another ID ignores the
	// objects the others write.
	StoreID string `json:"store_id"`
}

// StatusPolicy is the package policy in force.
type StatusPolicy struct {
	// Rules are its rules in the order of evaluation, as tfmirror config
	// check lists them (each with its line in the configuration file);
	// empty when there is no policy (everything is allowed).
	Rules []string `json:"rules"`
}

// Configuration is the mirror's configuration in effect, for the status
// page: its file, and every setting's value and where it came from.
type Configuration struct {
	// File is the configuration file, "" without one.
	File     string    `json:"file,omitempty"`
	Settings []Setting `json:"settings"`
	// LastReload is what the last reload (tfmirror reload, SIGHUP) did;
	// absent before the first.
	LastReload *Reload `json:"last_reload,omitempty"`
}

// RestartPending are the settings that wait for a restart
// (Setting.RestartPending), in the table's order.
func (c *Configuration) RestartPending() []Setting {
	var out []Setting
	for _, s := range c.Settings {
		if s.RestartPending {
			out = append(out, s)
		}
	}
	return out
}

// Reload is the outcome of a reload of the files a serve reads again
// (the configuration file, the client tokens file).
type Reload struct {
	At time.Time `json:"at"`
	// Applied says every file read was put in force. Else Error says
	// which was refused and why (with its file:line; never a secret):
	// what a refused file configures stays as it was, so the file on
	// disk is not what is in force.
	Applied bool   `json:"applied"`
	Error   string `json:"error,omitempty"`
}

// Setting is one setting in effect.
type Setting struct {
	// Name is its flag without dashes; Attribute its name in the
	// configuration file.
	Name      string `json:"name"`
	Attribute string `json:"attribute"`
	// Value is in the flag's syntax; a secret's is redacted.
	Value string `json:"value"`
	// Source is where the value came from: flag, env, file or default.
	Source string `json:"source"`
	// RestartPending says the configuration file gave this setting, at
	// the last reload, a value it cannot take while serving: Value stays
	// in force, and Pending (shown as Value is; absent when empty) is
	// put in force by a restart.
	RestartPending bool   `json:"restart_pending,omitempty"`
	Pending        string `json:"pending,omitempty"`
}

// StatusPage is the part of the cache's lists a view of the status page
// shows: at most Limit provider versions (and Limit module versions),
// those whose address starts with Prefix, from the one after After (or
// ModuleAfter) on. A view with After lists providers only, one with
// ModuleAfter modules only.
type StatusPage struct {
	Prefix      string `json:"prefix,omitempty"`
	After       string `json:"after,omitempty"`
	ModuleAfter string `json:"module_after,omitempty"`
	Limit       int    `json:"limit"`
	// NextAfter is the After of the next page of providers, when there
	// are more; Next is that page's query string (with "?").
	NextAfter string `json:"next_after,omitempty"`
	Next      string `json:"next,omitempty"`
	// NextModuleAfter and NextModules are the same for modules.
	NextModuleAfter string `json:"next_module_after,omitempty"`
	NextModules     string `json:"next_modules,omitempty"`
}

// Status page list sizes: statusDefaultLimit versions a page unless
// ?limit= says otherwise, up to statusMaxLimit.
const (
	statusDefaultLimit = 100
	statusMaxLimit     = 1000
)

// statusQuery is what a view asks of the lists (see StatusPage).
type statusQuery struct {
	Prefix, After, ModuleAfter string
	Limit                      int
}

// parseStatusQuery reads ?prefix=, ?after=, ?module_after= and ?limit=.
func parseStatusQuery(r *http.Request) (statusQuery, error) {
	v := r.URL.Query()
	q := statusQuery{Prefix: v.Get("prefix"), After: v.Get("after"), ModuleAfter: v.Get("module_after"), Limit: statusDefaultLimit}
	for _, p := range []string{q.Prefix, q.After, q.ModuleAfter} {
		if len(p) > 512 {
			return q, httperr.BadRequest("status page: prefix and cursors are at most 512 bytes")
		}
		// No address holds one; the page would show it back.
		if !utf8.ValidString(p) || logbound.Escaped(p) != p {
			return q, httperr.BadRequest("status page: prefix and cursors are UTF-8 without control or format characters")
		}
	}
	q.Prefix = strings.ToLower(q.Prefix)
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > statusMaxLimit {
			return q, httperr.BadRequest("status page: limit must be a number from 1 to %d", statusMaxLimit)
		}
		q.Limit = n
	}
	return q, nil
}

// HostBlock is the host block of one origin host.
type HostBlock struct {
	Host  string
	Block string
}

// StatusProvider is one provider the mirror has metadata for.
type StatusProvider struct {
	Address  string          `json:"address"`
	Versions []StatusVersion `json:"versions"`
}

// StatusVersion is one version with verified package metadata.
type StatusVersion struct {
	Version   string           `json:"version"`
	Platforms []StatusPlatform `json:"platforms"`
	// Provenance is "" for a version fetched from its origin, else how it
	// was imported ("imported", "imported without signature").
	Provenance string `json:"provenance,omitempty"`
}

// StatusPlatform is one platform of a version and whether its archive is cached.
type StatusPlatform struct {
	Platform string `json:"platform"`
	Cached   bool   `json:"cached"`
	Size     int64  `json:"size,omitempty"`
}

// statusPage is the page at /: what the mirror is, how to point the
// clients at it, its health, and (to clients with a token, when client
// authentication is on) what it holds. It needs no credentials.
type statusPage struct {
	*responder
	cfg       Config
	engine    StatusEngine
	modules   StatusModules  // the engine's module side
	checks    LastCacheCheck // the engine's check of the whole cache
	providers providersMemo  // the last page of the lists of what the cache holds
	publicURL atomic.Pointer[string]
}

// StatusEngine is what the status page reads of the engine.
type StatusEngine interface {
	Config() mirror.Config
	Stats() (archives int, bytes int64)
	// ListCachedAfter lists the cached provider versions whose address
	// starts with prefix, from the one after the cursor after on.
	ListCachedAfter(prefix, after string, fn func(mirror.CachedVersion) error) error
	WithheldEngine
}

// StatusModules is what the status page reads of the engine's module
// side (*modules.Modules).
type StatusModules interface {
	// ListCachedModulesAfter lists the cached module versions whose
	// address starts with prefix, from the one after the cursor after on.
	ListCachedModulesAfter(prefix, after string, fn func(modules.Cached) error) error
}

// LastCacheCheck is what the status page reads of the engine's check of
// the whole cache (*cachecheck.Checker).
type LastCacheCheck interface {
	// LastCacheCheck returns the last check of the whole cache; false
	// when none has run.
	LastCacheCheck() (cachecheck.Summary, bool)
}

// mirrorURL is the mirror's base URL for r, ending in "/": the public URL
// in force, or else the one r was made to.
func (s *statusPage) mirrorURL(r *http.Request) string {
	u, _ := s.mirrorURLFrom(r)
	return u
}

// mirrorURLFrom is mirrorURL, and whether it is the one r was made to (no
// public URL in force), from one reading of the public URL.
func (s *statusPage) mirrorURLFrom(r *http.Request) (u string, fromRequest bool) {
	if u := *s.publicURL.Load(); u != "" {
		return u, false
	}
	return RequestURL(r, s.cfg.PlainHTTP), true
}

// pinsErrorHidden is what the page says of pins that could not be read
// to a viewer without a token.
const pinsErrorHidden = "the pins could not be read; the pins read before stay in force (a client token shows why, and the log says it)"

// pinsSkippedHidden is what the page says of pins left unread to a
// viewer without a token.
const pinsSkippedHidden = "some pins files were not read (a client token shows which, and the log says it)"

// status collects the status page's data. The mirror URL is the
// configured public URL, or else the one this request was made to.
func (s *statusPage) status(r *http.Request) (*Status, error) {
	ecfg := s.engine.Config()
	st := &Status{
		Version:        s.cfg.Version,
		AllowedOrigins: ecfg.AllowedOrigins,
		Platforms:      ecfg.Platforms,
		Providers:      []StatusProvider{},
		Generated:      s.cfg.Now().UTC(),
	}
	st.MirrorURL, st.MirrorURLFromRequest = s.mirrorURLFrom(r)
	q, err := parseStatusQuery(r)
	if err != nil {
		return nil, err
	}
	st.Page = StatusPage{Prefix: q.Prefix, After: q.After, ModuleAfter: q.ModuleAfter, Limit: q.Limit}
	st.CredentialsHost = s.credentialsHost(st.MirrorURL)
	if s.cfg.OCIBlock != nil {
		host := r.Host
		if u, err := url.Parse(st.MirrorURL); err == nil && u.Host != "" {
			host = u.Host
			if p := strings.TrimSuffix(u.Path, "/"); p != "" {
				st.OCIRootOnly = p + "/"
			}
		}
		st.OCIBlock = s.cfg.OCIBlock(host)
		if s.cfg.OCIModuleSource != nil {
			st.OCIModuleSource = s.cfg.OCIModuleSource(host)
		}
	}
	if st.CLIReleasesOff = s.cfg.CLIReleasesOff; st.CLIReleasesOff == "" && s.cfg.CLIReleases != nil {
		st.CLIReleases = s.cfg.CLIReleases(st.MirrorURL)
	}
	s.hostBlocks(st, ecfg.AllowedOrigins)
	st.Archives, st.Bytes = s.engine.Stats()
	st.Health = s.cfg.Health.check(s.cfg.Now())
	st.Health.Offline = ecfg.Offline
	if s.cfg.Health != nil {
		n := s.cfg.Health.Store.DamagedArchives()
		st.Health.DamagedArchives = &n
		if s.cfg.Health.Certificate != nil {
			expires, refused := s.cfg.Health.Certificate()
			st.Health.CertificateExpires, st.Health.CertificateRefused = &expires, refused
			st.Health.CertificateExpiresSoon = expires.Sub(s.cfg.Now()) < CertificateWarnBefore
		}
		if s.cfg.Health.OriginCAsRefused != nil {
			st.Health.OriginCAsRefused = s.cfg.Health.OriginCAsRefused()
		}
	}
	st.Origins = s.originRows(ecfg.AllowedOrigins)
	st.OriginTrouble = originTrouble(st.Origins)
	st.Retention = s.retentionStatus()
	if c, ok := s.checks.LastCacheCheck(); ok {
		st.CacheCheck = &c
	}
	if s.cfg.Auth != nil && !s.cfg.Auth.checkBearer(r) {
		// Which providers a company uses is not for anyone who can
		// reach the mirror; a client with a token may see the list.
		st.ProvidersHidden = true
		if st.Retention != nil {
			st.Retention.Pinned = nil
			if st.Retention.PinsError != "" {
				// It names the pins file, its line and what it pins.
				st.Retention.PinsError = pinsErrorHidden
			}
			if st.Retention.PinsSkipped != "" {
				// It names the pins directory's paths.
				st.Retention.PinsSkipped = pinsSkippedHidden
			}
		}
		for i := range st.Origins {
			if e := st.Origins[i].LastError; e != nil {
				st.Origins[i].LastError = &OriginFailure{At: e.At, Cause: e.Cause}
			}
		}
		return st, nil
	}
	if s.cfg.Auth != nil {
		st.ClientAuth = s.cfg.Auth.limitStatus(s.cfg.TrustedProxyRanges)
	}

	if s.cfg.Settings != nil {
		st.Configuration = s.cfg.Settings()
	}
	if s.cfg.SharedStore != nil {
		shared := *s.cfg.SharedStore
		st.SharedStore = &shared
	}
	if s.cfg.Policy != nil {
		st.Policy = &StatusPolicy{Rules: s.cfg.Policy()}
		if st.Policy.Rules == nil {
			st.Policy.Rules = []string{}
		}
	}
	lists, err := s.providers.get(s.cfg.Now(), q, s.scanLists)
	if err != nil {
		return nil, err
	}
	st.Providers = lists.providers
	st.Modules = lists.modules
	st.Withheld = s.engine.Withheld()
	if s.cfg.CLIHeld != nil {
		st.Withheld = append(st.Withheld, s.cfg.CLIHeld()...)
	}
	st.UnsignedWithheld, st.PolicyHeld, st.HeldBack = splitWithheld(st.Withheld, s.cfg.Now())
	if st.HeldBack != nil {
		st.PolicyHeld, st.HeldBack.Omitted = boundHeld(st.PolicyHeld, q)
		st.Withheld = append(slices.Clip(st.UnsignedWithheld), st.PolicyHeld...)
	}
	if lists.nextAfter != "" {
		st.Page.NextAfter = lists.nextAfter
		st.Page.Next = pageQuery(q.Prefix, "after", lists.nextAfter, q.Limit)
	}
	if lists.nextModuleAfter != "" {
		st.Page.NextModuleAfter = lists.nextModuleAfter
		st.Page.NextModules = pageQuery(q.Prefix, "module_after", lists.nextModuleAfter, q.Limit)
	}
	return st, nil
}

// originRows are the origin rows of Config.Origins, or else a row of
// unknown state per allowed origin.
func (s *statusPage) originRows(allowed []string) []OriginHealth {
	if s.cfg.Origins != nil {
		return s.cfg.Origins.Rows()
	}
	out := make([]OriginHealth, 0, len(allowed))
	for _, o := range allowed {
		out = append(out, OriginHealth{Host: o, State: "unknown"})
	}
	return out
}

// WithheldEngine is what the status page needs of the versions the
// engine keeps but withholds (see mirror.Engine.Withheld).
type WithheldEngine interface {
	Withheld() []unsigned.Version
}

// pageQuery is the query string of a next page.
func pageQuery(prefix, cursor, after string, limit int) string {
	v := url.Values{cursor: {after}}
	if prefix != "" {
		v.Set("prefix", prefix)
	}
	if limit != statusDefaultLimit {
		v.Set("limit", strconv.Itoa(limit))
	}
	return "?" + v.Encode()
}

// statusLists are the status page's lists of what the cache holds: one
// page of each.
type statusLists struct {
	providers                  []StatusProvider
	modules                    []StatusModule
	nextAfter, nextModuleAfter string
}

// errPageFull stops a listing once a page is full.
var errPageFull = errors.New("page full")

// scanLists reads the page of the cached providers and module versions
// that q selects: at most q.Limit+1 records of each are read, whatever
// the cache holds.
func (s *statusPage) scanLists(q statusQuery) (statusLists, error) {
	var out statusLists
	if q.ModuleAfter == "" {
		providers, next, err := s.statusProviders(q)
		if err != nil {
			return statusLists{}, err
		}
		out.providers, out.nextAfter = providers, next
	}
	if q.After == "" {
		modules, next, err := s.statusModules(q)
		if err != nil {
			return statusLists{}, err
		}
		out.modules, out.nextModuleAfter = modules, next
	}
	if out.providers == nil {
		out.providers = []StatusProvider{}
	}
	return out, nil
}

// statusProviders lists the cached provider versions q selects, grouped
// by provider in address order, and the cursor of the next page ("" when
// this is the last).
func (s *statusPage) statusProviders(q statusQuery) ([]StatusProvider, string, error) {
	var providers []StatusProvider
	rows, next := 0, ""
	err := s.engine.ListCachedAfter(q.Prefix, q.After, func(cv mirror.CachedVersion) error {
		if rows == q.Limit {
			return errPageFull
		}
		rows++
		next = cv.Cursor()
		if len(providers) == 0 || providers[len(providers)-1].Address != cv.Provider {
			providers = append(providers, StatusProvider{Address: cv.Provider})
		}
		p := &providers[len(providers)-1]
		v := StatusVersion{Version: cv.Version, Platforms: make([]StatusPlatform, 0, len(cv.Platforms)), Provenance: string(cv.Provenance)}
		for _, cp := range cv.Platforms {
			v.Platforms = append(v.Platforms, StatusPlatform{Platform: cp.Platform, Cached: cp.Cached, Size: cp.Size})
		}
		p.Versions = append(p.Versions, v)
		return nil
	})
	switch {
	case errors.Is(err, errPageFull):
	case err != nil:
		return nil, "", err
	default:
		next = "" // the listing ended within the page
	}
	if providers == nil {
		providers = []StatusProvider{}
	}
	return providers, next, nil
}

// hostBlocks fills st's host blocks for the origin hosts.
func (s *statusPage) hostBlocks(st *Status, origins []string) {
	st.HostBlocks = make(map[string]string, len(origins))
	base := st.MirrorURL
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	for _, o := range origins {
		// The block is labelled with the host's name as users write it
		// (Unicode: terraform refuses a label in punycode, and skips the
		// block), its URLs with the name in comparison form.
		host, label := o, o
		if h, err := svchost.ForComparison(svchost.ForDisplay(o)); err == nil { // either form
			host, label = h.String(), h.ForDisplay()
		}
		if _, dup := st.HostBlocks[host]; dup {
			continue
		}
		modules := base + ModulesPath(host) // this mirror's, see modules.go
		var b strings.Builder
		fmt.Fprintf(&b, "host %s {\n  services = {\n    \"providers.v1\" = %s\n", hclString(label), hclString(base+RegistryPath(host)))
		fmt.Fprintf(&b, "    \"modules.v1\"   = %s\n", hclString(modules))
		b.WriteString("  }\n}\n")
		st.HostBlocks[host] = b.String()
		st.HostBlockList = append(st.HostBlockList, HostBlock{Host: host, Block: b.String()})
	}
	if s.cfg.Auth != nil {
		st.HostBlockNote = "Through a host block the clients send the token configured for the origin's host name " +
			"(credentials \"ORIGIN-HOST\" { token = ... }), and send it to every service of the block: " +
			"providers.v1 and modules.v1 both point at this mirror; a service pointed at another registry would hand it this mirror's token."
	}
	slices.SortFunc(st.HostBlockList, func(a, b HostBlock) int { return strings.Compare(a.Host, b.Host) })
}

// handle serves the page. With client authentication on, a token holder
// is shown what a viewer without one is not (the provider list, the
// configuration, the policy): every view is then private and not to be
// stored, and varies by Authorization (Private), as the doors' answers to
// a token holder are, so that a cache in front that keeps answers
// whatever the request's Authorization never hands a token holder's view
// to another.
func (s *statusPage) handle(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Auth != nil {
		w = Private(w)
	}
	st, err := s.status(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if st.MirrorURLFromRequest {
		VaryByRequestURL(w)
	}
	if r.URL.Query().Get("format") == "json" {
		writeJSON(w, http.StatusOK, st)
		return
	}
	var buf bytes.Buffer
	if err := statusTemplate.Execute(&buf, st); err != nil {
		s.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	// frame-ancestors is not one of the directives default-src stands
	// for: without it any site may frame the page.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	w.Write(buf.Bytes())
}

// statusScanTTL is how long the status page shows a page of the lists
// of cached providers and modules before it reads the cache again.
const statusScanTTL = time.Second

// providersMemo keeps the last page of the status page's lists for
// statusScanTTL: the page may be loaded by anyone who reaches the mirror,
// as often as they like. The mutex is held during a scan, so that
// concurrent views wait for one scan and share it. It keeps one page,
// the last one asked for (most views ask for the first); a view of
// another page reads that page, which costs what the page holds. The
// lists are shared and never modified.
type providersMemo struct {
	mu    sync.Mutex
	at    time.Time
	query statusQuery
	lists statusLists
	err   error
}

// get returns the page q asks for as of now: the last scan while it is of
// q and younger than statusScanTTL (a failed one too), else a new one.
func (m *providersMemo) get(now time.Time, q statusQuery, scan func(statusQuery) (statusLists, error)) (statusLists, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if age := now.Sub(m.at); m.at.IsZero() || q != m.query || age < 0 || age >= statusScanTTL {
		m.lists, m.err = scan(q)
		m.at, m.query = now, q
	}
	return m.lists, m.err
}

// credentialsHost is the label of the CLI configuration's credentials
// block for a mirror at mirrorURL, or "" without client authentication.
func (s *statusPage) credentialsHost(mirrorURL string) string {
	if s.cfg.Auth == nil {
		return ""
	}
	u, err := url.Parse(mirrorURL)
	if err != nil || u.Host == "" {
		return ""
	}
	h, err := svchost.ForComparison(u.Host)
	if err != nil {
		return u.Host
	}
	return h.String()
}

// StatusModule is one registry module the mirror has records of, for the
// status page.
type StatusModule struct {
	Address  string                `json:"address"` // HOST/NAMESPACE/NAME/SYSTEM
	Versions []StatusModuleVersion `json:"versions"`
}

// StatusModuleVersion is one version of a module: where its package comes
// from and whether it is cached.
type StatusModuleVersion struct {
	Version string `json:"version"`
	// Source is the package's location without its subdirectory and
	// its secrets (see package redact: a pre-signed URL's query is not
	// shown); Subdir the subdirectory the clients use.
	Source string `json:"source"`
	Subdir string `json:"subdir,omitempty"`
	Commit string `json:"commit,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Cached bool   `json:"cached"`
	Size   int64  `json:"size,omitempty"`
}

// statusModules lists the module versions the engine has records of
// that q selects, by module, newest version first within the page, and
// the cursor of the next page ("" when this is the last).
func (s *statusPage) statusModules(q statusQuery) ([]StatusModule, string, error) {
	me := s.modules
	byModule := map[string]*StatusModule{}
	var order []string
	rows, next := 0, ""
	err := me.ListCachedModulesAfter(q.Prefix, q.ModuleAfter, func(cm modules.Cached) error {
		if rows == q.Limit {
			return errPageFull
		}
		rows++
		next = cm.Cursor()
		m, ok := byModule[cm.Module]
		if !ok {
			m = &StatusModule{Address: cm.Module}
			byModule[cm.Module] = m
			order = append(order, cm.Module)
		}
		v := StatusModuleVersion{Version: cm.Version, Source: cm.Record.Shown(), Subdir: cm.Record.Subdir,
			Commit: cm.Record.Commit, SHA256: cm.Record.SHA256, Cached: cm.Cached}
		if cm.Cached {
			v.Size = cm.Record.Size
		}
		m.Versions = append(m.Versions, v)
		return nil
	})
	switch {
	case errors.Is(err, errPageFull):
	case err != nil:
		return nil, "", err
	default:
		next = "" // the listing ended within the page
	}
	out := make([]StatusModule, 0, len(order))
	for _, addr := range order { // key order: sorted
		m := byModule[addr]
		vs := make([]string, len(m.Versions))
		for i, v := range m.Versions {
			vs[i] = v.Version
		}
		records.SortModuleVersions(vs)
		sorted := make([]StatusModuleVersion, 0, len(vs))
		for _, v := range vs {
			for _, mv := range m.Versions {
				if mv.Version == v {
					sorted = append(sorted, mv)
					break
				}
			}
		}
		m.Versions = sorted
		out = append(out, *m)
	}
	return out, next, nil
}
