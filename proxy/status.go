package proxy

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/mirror"
)

//go:embed status.html
var statusHTML string

var statusTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"size":  func(n int64) string { return humanize.IBytes(uint64(max(n, 0))) },
	"split": func(addr string) []string { return strings.Split(addr, "/") }, // to allow line breaks after slashes
}).Parse(statusHTML))

// Status is what the status page shows, and its JSON form.
type Status struct {
	MirrorURL      string           `json:"mirror_url"`
	Version        string           `json:"version"`
	AllowedOrigins []string         `json:"allowed_origins"`
	Platforms      []string         `json:"platforms,omitempty"`
	Archives       int              `json:"cached_archives"`
	Bytes          int64            `json:"cached_bytes"`
	Providers      []StatusProvider `json:"providers"`
	// Withheld are the versions the engine keeps but does not serve:
	// imported without signature under an allowed origin host that its
	// configuration does not name (mirror.Engine.Withheld). Left out with
	// ProvidersHidden.
	Withheld []mirror.WithheldVersion `json:"withheld,omitempty"`
	// Modules are the registry modules with records (see modules.go).
	Modules   []StatusModule `json:"modules,omitempty"`
	Generated time.Time      `json:"generated"`
	// Health is the mirror's own state, shown to everyone.
	Health Health `json:"health"`
	// CredentialsHost is set when clients need a token: the host name
	// (with its port unless 443) of their CLI configuration's credentials block.
	CredentialsHost string `json:"credentials_host,omitempty"`
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
	// Retention is what retention keeps (retention.go); its pinned
	// versions are left out with ProvidersHidden.
	Retention *mirror.RetentionStatus `json:"retention,omitempty"`
}

// HostBlock is the host block of one origin host.
type HostBlock struct {
	Host  string
	Block string
	// ModulesKnown says the block names a modules.v1 URL, this mirror's
	// (else it has a commented-out placeholder).
	ModulesKnown bool
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

// status collects the status page's data. The mirror URL is the
// configured public URL, or else the one this request was made to.
func (s *Server) status(r *http.Request) (*Status, error) {
	ecfg := s.engine.Config()
	st := &Status{
		MirrorURL:      s.cfg.PublicURL,
		Version:        s.cfg.Version,
		AllowedOrigins: ecfg.AllowedOrigins,
		Platforms:      ecfg.Platforms,
		Providers:      []StatusProvider{},
		Generated:      s.cfg.Now().UTC(),
	}
	if st.MirrorURL == "" {
		scheme := "https"
		if r.TLS == nil && r.Header.Get("X-Forwarded-Proto") != "https" && s.cfg.PlainHTTP {
			scheme = "http"
		}
		st.MirrorURL = scheme + "://" + r.Host + "/"
	}
	st.CredentialsHost = s.credentialsHost(st.MirrorURL)
	s.hostBlocks(st, ecfg.AllowedOrigins)
	st.Archives, st.Bytes = s.engine.Stats()
	st.Health, _ = s.cfg.Health.check(s.cfg.Now())
	st.Health.Offline = ecfg.Offline
	st.Retention = s.retentionStatus()
	if s.cfg.Auth != nil && !s.cfg.Auth.checkBearer(r.Header.Get("Authorization")) {
		// Which providers a company uses is not for anyone who can
		// reach the mirror; a client with a token may see the list.
		st.ProvidersHidden = true
		if st.Retention != nil {
			st.Retention.Pinned = nil
		}
		return st, nil
	}

	lists, err := s.providers.get(s.cfg.Now(), s.scanProviders)
	if err != nil {
		return nil, err
	}
	st.Providers = lists.providers
	st.Modules = lists.modules
	if we, ok := s.engine.(WithheldEngine); ok {
		st.Withheld = we.Withheld()
	}
	return st, nil
}

// WithheldEngine is an engine that withholds versions it keeps (see
// mirror.Engine.Withheld), for the status page. *mirror.Engine
// implements it.
type WithheldEngine interface {
	Withheld() []mirror.WithheldVersion
}

// statusLists are the status page's lists of what the cache holds.
type statusLists struct {
	providers []StatusProvider
	modules   []StatusModule
}

// scanProviders lists the cached providers and module versions for the
// status page.
func (s *Server) scanProviders() (statusLists, error) {
	byProvider := map[string]*StatusProvider{}
	err := s.engine.ListCached(func(cv mirror.CachedVersion) error {
		p, ok := byProvider[cv.Provider]
		if !ok {
			p = &StatusProvider{Address: cv.Provider}
			byProvider[cv.Provider] = p
		}
		v := StatusVersion{Version: cv.Version, Platforms: make([]StatusPlatform, 0, len(cv.Platforms)), Provenance: string(cv.Provenance)}
		for _, cp := range cv.Platforms {
			v.Platforms = append(v.Platforms, StatusPlatform{Platform: cp.Platform, Cached: cp.Cached, Size: cp.Size})
		}
		p.Versions = append(p.Versions, v)
		return nil
	})
	if err != nil {
		return statusLists{}, err
	}
	providers := make([]StatusProvider, 0, len(byProvider))
	for _, addr := range slices.Sorted(maps.Keys(byProvider)) {
		providers = append(providers, *byProvider[addr])
	}
	modules, err := s.statusModules()
	if err != nil {
		return statusLists{}, err
	}
	return statusLists{providers: providers, modules: modules}, nil
}

// hostBlocks fills st's host blocks for the origin hosts.
func (s *Server) hostBlocks(st *Status, origins []string) {
	st.HostBlocks = make(map[string]string, len(origins))
	base := st.MirrorURL
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	for _, o := range origins {
		host := o
		if h, err := svchost.ForComparison(o); err == nil {
			host = h.String()
		}
		if _, dup := st.HostBlocks[host]; dup {
			continue
		}
		modules := ""
		if _, ok := s.engine.(ModuleEngine); ok {
			modules = base + ModulesPath(host) // this mirror's, see modules.go
		} else if s.cfg.ModulesURL != nil {
			modules = s.cfg.ModulesURL(host)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "host %q {\n  services = {\n    \"providers.v1\" = %q\n", host, base+RegistryPath(host))
		if modules != "" {
			fmt.Fprintf(&b, "    \"modules.v1\"   = %q\n", modules)
		} else {
			fmt.Fprintf(&b, "    # \"modules.v1\" = \"...\" (the modules.v1 URL in https://%s/.well-known/terraform.json)\n", host)
		}
		b.WriteString("  }\n}\n")
		st.HostBlocks[host] = b.String()
		st.HostBlockList = append(st.HostBlockList, HostBlock{Host: host, Block: b.String(), ModulesKnown: modules != ""})
	}
	if s.cfg.Auth != nil {
		st.HostBlockNote = "Through a host block the clients send the token configured for the origin's host name " +
			"(credentials \"ORIGIN-HOST\" { token = ... }), and send it to every service of the block: " +
			"providers.v1 and modules.v1 both point at this mirror; a service pointed at another registry would hand it this mirror's token."
	}
	slices.SortFunc(st.HostBlockList, func(a, b HostBlock) int { return strings.Compare(a.Host, b.Host) })
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	st, err := s.status(r)
	if err != nil {
		s.fail(w, r, err)
		return
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
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	h.Set("X-Content-Type-Options", "nosniff")
	w.Write(buf.Bytes())
}

// statusScanTTL is how long the status page shows a list of cached
// providers before it reads the cache again.
const statusScanTTL = time.Second

// providersMemo keeps the status page's list of cached providers for
// statusScanTTL: the list is a scan of the whole cache, and the page may
// be loaded by anyone who reaches the mirror, as often as they like. The
// mutex is held during a scan, so that concurrent views wait for one
// scan and share it. The list is shared and never modified.
type providersMemo struct {
	mu    sync.Mutex
	at    time.Time
	lists statusLists
	err   error
}

// get returns the list as of now: the last scan while it is younger than
// statusScanTTL (a failed one too), else a new one.
func (m *providersMemo) get(now time.Time, scan func() (statusLists, error)) (statusLists, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if age := now.Sub(m.at); m.at.IsZero() || age < 0 || age >= statusScanTTL {
		m.lists, m.err = scan()
		m.at = now
	}
	return m.lists, m.err
}
