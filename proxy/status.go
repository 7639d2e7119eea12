package proxy

import (
	"bytes"
	_ "embed"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

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
	Generated      time.Time        `json:"generated"`
	// CredentialsHost is set when clients need a token: the host name
	// (with its port unless 443) of their CLI configuration's credentials block.
	CredentialsHost string `json:"credentials_host,omitempty"`
	// ProvidersHidden is set when client authentication is on and the
	// request carried no valid token: the provider list is then left out.
	ProvidersHidden bool `json:"providers_hidden,omitempty"`
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
	st.Archives, st.Bytes = s.engine.Stats()
	if s.cfg.Auth != nil && !s.cfg.Auth.checkBearer(r.Header.Get("Authorization")) {
		// Which providers a company uses is not for anyone who can
		// reach the mirror; a client with a token may see the list.
		st.ProvidersHidden = true
		return st, nil
	}

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
		return nil, err
	}
	for _, addr := range slices.Sorted(maps.Keys(byProvider)) {
		st.Providers = append(st.Providers, *byProvider[addr])
	}
	return st, nil
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
