package fakeorigin

import (
	"net/http"
	"slices"
	"strings"
)

// RequireGitAuth makes Git repository repo private: its requests are
// answered 401 unless they carry HTTP basic authentication with user and
// password.
func (o *Origin) RequireGitAuth(repo, user, password string) {
	m := o.modState()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gitAuth == nil {
		m.gitAuth = map[string]string{}
	}
	m.gitAuth[repo] = user + ":" + password
}

// GitAuthSeen returns every Authorization header value that Git requests
// carried, to any repository, in order.
func (o *Origin) GitAuthSeen() []string {
	m := o.modState()
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.gitAuthSeen)
}

// gitAuthorized records r's Authorization header and answers 401 (false)
// when r is for a private repository without its credentials.
func (m *moduleState) gitAuthorized(w http.ResponseWriter, r *http.Request) bool {
	m.mu.Lock()
	m.gitAuthSeen = append(m.gitAuthSeen, r.Header.Values("Authorization")...)
	rest := strings.TrimPrefix(r.URL.Path, "/git/")
	repo, _, _ := strings.Cut(rest, ".git/")
	want, private := m.gitAuth[repo]
	m.mu.Unlock()
	if !private {
		return true
	}
	if user, pass, ok := r.BasicAuth(); ok && user+":"+pass == want {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
	writeError(w, http.StatusUnauthorized)
	return false
}
