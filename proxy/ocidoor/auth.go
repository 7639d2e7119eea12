package ocidoor

// Client authentication under /v2/, as OCI clients do it: a 401 with a
// Bearer challenge naming the token endpoint (GET /v2/token), which takes
// the client token as a Basic password and answers a bearer token; Basic
// with the client token as password, and Bearer with the client token
// itself, are accepted on every request too.

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tfmirror/tfmirror/v2/proxy"
)

// service names the mirror in challenges and token answers.
const service = "tfmirror"

// authorized checks a request's credentials when client authentication
// is on; it answers 401 with the challenges and returns false when they
// are missing or wrong.
func (d *Door) authorized(w http.ResponseWriter, r *http.Request) bool {
	a := d.cfg.Auth
	if a == nil {
		return true
	}
	h := r.Header.Get("Authorization")
	if scheme, cred, ok := strings.Cut(h, " "); ok {
		cred = strings.TrimSpace(cred)
		switch {
		case strings.EqualFold(scheme, "Bearer") && a.CheckBearer(r, cred):
			return d.private(w)
		case strings.EqualFold(scheme, "Basic"):
			if _, pass, ok := r.BasicAuth(); ok && a.CheckToken(r, pass) {
				return d.private(w)
			}
		}
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="`+d.realm(r)+`",service="`+service+`"`)
	d.fail(w, r, codeUnauthorized, http.StatusUnauthorized, errors.New("authentication required: a token of this mirror (as the password of Basic credentials, or through the Bearer token endpoint)"))
	return false
}

// private marks an authorized answer as private to its client.
func (d *Door) private(w http.ResponseWriter) bool {
	w.Header().Set("Vary", "Authorization")
	return true
}

// privateWriter keeps every answer under client authentication private
// to its client and unstored, whatever Cache-Control the handler chose.
type privateWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *privateWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.Header().Set("Cache-Control", "private, no-store")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *privateWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *privateWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// realm is the token endpoint's URL: always https, as OpenTofu requires
// (plain HTTP is served only behind a TLS-terminating proxy).
func (d *Door) realm(r *http.Request) string {
	host := r.Host
	if d.cfg.MirrorURL != nil {
		if u, err := url.Parse(d.cfg.MirrorURL(r)); err == nil {
			host = u.Host
		}
	}
	if !proxy.ValidHost(host) {
		host = "localhost"
	}
	return "https://" + host + "/v2/token"
}

type tokenAnswer struct {
	Token       string `json:"token"`
	AccessToken string `json:"access_token"`
	ExpiresIn   int64  `json:"expires_in"`
	IssuedAt    string `json:"issued_at"`
}

// token serves GET /v2/token: for the client token given as a Basic
// password (the user name is not read) or as a Bearer token, a bearer
// token standing for it (proxy.Auth.IssueToken); whatever scope is asked,
// or none. Without client authentication, an anonymous token.
func (d *Door) token(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		d.fail(w, r, codeUnsupported, http.StatusMethodNotAllowed, errors.New("the token endpoint answers GET"))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	a := d.cfg.Auth
	if a == nil {
		answer(w, r, "anonymous", time.Hour)
		return
	}
	var tok string
	if _, pass, ok := r.BasicAuth(); ok {
		tok = pass
	} else if scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		tok = strings.TrimSpace(cred)
	}
	issued, ttl, ok := a.IssueToken(r, tok)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="`+service+`"`)
		d.fail(w, r, codeUnauthorized, http.StatusUnauthorized, errors.New("the token endpoint needs a token of this mirror as the Basic password"))
		return
	}
	w.Header().Set("Vary", "Authorization")
	answer(w, r, issued, ttl)
}

func answer(w http.ResponseWriter, r *http.Request, tok string, ttl time.Duration) {
	body, _ := json.Marshal(tokenAnswer{Token: tok, AccessToken: tok, ExpiresIn: int64(ttl / time.Second), IssuedAt: time.Now().UTC().Format(time.RFC3339)})
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, http.StatusOK, "application/json", body)
}
