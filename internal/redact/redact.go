// Package redact removes what may be a secret from URLs and module
// download locations before they are logged, shown on a page, put into a
// metric or an error, or exported.
//
// It owns the one rule for that: a URL keeps its scheme, host, port and
// path, and of its query only the parameters that go-getter consumes and
// that never carry credentials (ref, archive, depth); its userinfo, its
// other query parameters (a pre-signed URL's X-Amz-Signature,
// X-Amz-Credential, a token=...) and its fragment go; a URL whose
// password held a "/" not percent-encoded (https://USER:/PASS@HOST/...,
// whose host net/url ends at that "/") is read as it was meant, its
// host the one after the "@". A module location
// keeps its forced getter ("git::") and its //SUBDIR. What cannot be
// parsed keeps what comes before its query and fragment, without
// userinfo. It does not decide what is logged or stored: the full
// location stays in the mirror's records, for fetching.
package redact

import (
	"context"
	"encoding/base64"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// kept are the query parameters shown: go-getter's own, never secrets.
var kept = []string{"ref", "archive", "depth"}

// URL is u without its secrets, for messages.
func URL(u *url.URL) string {
	if u == nil {
		return ""
	}
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	if u.User == nil {
		if host, path, _, ok := userinfoInPath(u.Host, strings.TrimPrefix(u.Path, "/")); ok {
			r.Host, r.Path, r.RawPath = host, path, ""
		}
	}
	r.RawQuery = keptQuery(u.Query())
	return r.String()
}

// userinfoInPath reads again a URL whose user or password held an
// unencoded "/" (https://USER:/PASS@HOST/PATH): its authority ends at
// that "/", so that auth (its host) is USER: or USER:DIGITS and path
// (without its leading "/") holds the rest of the password, an "@", and
// the host meant. It returns the host meant and the path after it
// ("/PATH", or "" for none), and the part of the password in path; ok
// is false for any other authority and path.
func userinfoInPath(auth, path string) (host, rest, password string, ok bool) {
	i := strings.Index(path, "@")
	if strings.Contains(auth, "@") || !strings.Contains(auth, ":") || i < 0 {
		return "", "", "", false
	}
	host, rest, found := strings.Cut(path[i+1:], "/")
	if host == "" {
		return "", "", "", false
	}
	if found {
		rest = "/" + rest
	}
	return host, rest, path[:i], true
}

func keptQuery(q url.Values) string {
	out := url.Values{}
	for _, k := range kept {
		if vs, ok := q[k]; ok {
			out[k] = vs
		}
	}
	return out.Encode()
}

var forcedGetter = regexp.MustCompile(`^([A-Za-z0-9]+)::(.+)$`)

// Location is a module download location (go-getter syntax: a URL, a
// forced getter such as git::, a shorthand such as github.com/ORG/REPO,
// //SUBDIR) or any URL, without its secrets, for messages and exports.
func Location(loc string) string {
	prefix := ""
	if m := forcedGetter.FindStringSubmatch(loc); m != nil {
		prefix, loc = m[1]+"::", m[2]
	}
	u, err := url.Parse(loc)
	switch {
	case err != nil || u.Opaque != "":
		return prefix + unparsed(loc)
	case u.Scheme == "" && u.Host == "":
		// A shorthand (github.com/ORG/REPO?ref=...): a path.
		r := url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: keptQuery(u.Query())}
		return prefix + r.String()
	}
	return prefix + URL(u)
}

// unparsed is what Location keeps of a location that does not parse:
// what comes before its query and fragment, without userinfo.
func unparsed(s string) string {
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	rest, scheme := s, ""
	if i := strings.Index(s, "://"); i >= 0 {
		scheme, rest = s[:i+3], s[i+3:]
	}
	auth, path, _ := strings.Cut(rest, "/")
	if host, p, _, ok := userinfoInPath(auth, path); ok {
		return scheme + host + p
	}
	if i := strings.LastIndex(auth, "@"); i >= 0 {
		auth = auth[i+1:]
	}
	if strings.Contains(rest, "/") {
		return scheme + auth + "/" + path
	}
	return scheme + auth
}

// Secrets are the parts of loc (a location or URL) that Location leaves
// out and that are long enough to be told apart in a message: its
// userinfo and the values of its other query parameters, raw and
// unescaped, longest first.
func Secrets(loc string) []string {
	if m := forcedGetter.FindStringSubmatch(loc); m != nil {
		loc = m[2]
	}
	var out []string
	add := func(s string) {
		if len(s) >= minSecret && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	u, err := url.Parse(loc)
	if err != nil {
		// All that Location leaves out of an unparsed one.
		if i := strings.IndexAny(loc, "?#"); i >= 0 {
			add(loc[i+1:])
			for _, kv := range strings.FieldsFunc(loc[i+1:], func(r rune) bool { return r == '&' || r == ';' || r == '#' }) {
				k, v, _ := strings.Cut(kv, "=")
				if !slices.Contains(kept, k) {
					add(k)
					add(v)
				}
			}
		}
		if i := strings.Index(loc, "://"); i >= 0 {
			auth, path, _ := strings.Cut(loc[i+3:], "/")
			if j := strings.LastIndex(auth, "@"); j >= 0 {
				add(auth[:j])
			} else if _, _, pass, ok := userinfoInPath(auth, path); ok {
				add(auth + "/" + pass)
				add(pass)
			}
		}
	} else {
		if _, _, pass, ok := userinfoInPath(u.Host, strings.TrimPrefix(u.Path, "/")); ok && u.User == nil {
			add(u.Host + "/" + pass)
			add(pass)
		}
		if u.User != nil {
			add(u.User.String())
			add(u.User.Username())
			if p, ok := u.User.Password(); ok {
				add(p)
			}
		}
		add(u.RawQuery)
		add(u.Fragment)
		for k, vs := range u.Query() {
			if slices.Contains(kept, k) {
				continue
			}
			for _, v := range vs {
				add(v)
				add(url.QueryEscape(v))
				add(url.PathEscape(v))
			}
			add(k)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// minSecret is the shortest secret Secrets names: shorter values (an
// expiry of 3600 seconds, a region) are not credentials, and replacing
// them would garble messages.
const minSecret = 8

// Error is err with every secret of the locations (as Secrets finds
// them) replaced by "REDACTED" in its message, and every URL its message
// spells out (scheme://...) shown as Location shows it; errors.Is and
// errors.As see err. It is for errors of libraries that put a URL into
// their messages: one they were given, or one they were sent to (a
// redirect's target, a submodule's URL), which no caller can name. It
// returns nil for nil.
func Error(err error, locations ...string) error {
	if err == nil {
		return nil
	}
	var secrets []string
	for _, l := range locations {
		secrets = append(secrets, Secrets(l)...)
	}
	if len(secrets) == 0 {
		if msg := err.Error(); urlsIn(msg) == msg {
			return err
		}
	}
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	return &redacted{err: err, secrets: secrets}
}

type redacted struct {
	err     error
	secrets []string
}

func (e *redacted) Error() string { return urlsIn(Text(e.err.Error(), e.secrets)) }

// urlInText is a URL inside a message: a scheme, "://", and what follows
// up to a space or a quote.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>\x60]+`)

// urlsIn is s with every URL in it as Location shows it; punctuation
// that ends it (a colon before the cause) is the message's.
func urlsIn(s string) string {
	return urlInText.ReplaceAllStringFunc(s, func(u string) string {
		trimmed := strings.TrimRight(u, ".,:;)]")
		return Location(trimmed) + u[len(trimmed):]
	})
}
func (e *redacted) Unwrap() error { return e.err }

// Text is s with every one of secrets replaced by "REDACTED".
func Text(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "REDACTED")
		}
	}
	return s
}

// A credential the mirror sends a host (an Authorization header) may
// come back in what that host answers: an error page, a Git ERR line or
// sideband message, an archive entry's name. Whatever quotes such text
// in an error is handed the credentials sent (Sending, Sent) and
// replaces them (SentError), as Error does a location's secrets.

type sentKey struct{}

// sent is the credentials sent on the requests of one context.
type sent struct {
	mu      sync.Mutex
	secrets []string
}

// Sending returns ctx recording the credentials that the requests made
// on it, or on any context derived from it, send (Sent); ctx itself when
// it records already.
func Sending(ctx context.Context) context.Context {
	if _, ok := ctx.Value(sentKey{}).(*sent); ok {
		return ctx
	}
	return context.WithValue(ctx, sentKey{}, &sent{})
}

// minCredential is the shortest credential Sent records: replacing a
// value of 1 to 3 bytes wherever it stands would garble messages (a
// letter, a digit of a status), and so short a one is guessed anyway.
const minCredential = 4

// Sent records, on a context that records (Sending), the secret parts
// of authorization, an Authorization header's value a request on ctx
// sends: a bearer token (or any other scheme's credentials); of Basic,
// the encoded credentials, "USER:PASSWORD" and the password (the user
// name alone, such as "x-access-token", is no secret and stays).
func Sent(ctx context.Context, authorization string) {
	s, ok := ctx.Value(sentKey{}).(*sent)
	if !ok || authorization == "" {
		return
	}
	scheme, cred, _ := strings.Cut(strings.TrimSpace(authorization), " ")
	cred = strings.TrimSpace(cred)
	if cred == "" {
		cred = scheme
	}
	values := []string{cred}
	if strings.EqualFold(scheme, "Basic") {
		if dec, err := base64.StdEncoding.DecodeString(cred); err == nil {
			_, pass, _ := strings.Cut(string(dec), ":")
			values = append(values, string(dec), pass)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range values {
		if len(v) >= minCredential && !slices.Contains(s.secrets, v) {
			s.secrets = append(s.secrets, v)
		}
	}
	slices.SortFunc(s.secrets, func(a, b string) int { return len(b) - len(a) })
}

// SentError is err with every credential recorded on ctx (Sent) replaced
// as Credentials replaces them.
func SentError(ctx context.Context, err error) error {
	s, ok := ctx.Value(sentKey{}).(*sent)
	if err == nil || !ok {
		return err
	}
	s.mu.Lock()
	secrets := slices.Clone(s.secrets)
	s.mu.Unlock()
	return Credentials(err, secrets...)
}

// Credentials is err with every one of credentials (values the mirror
// sent a host, of minCredential bytes or more) replaced by "REDACTED" in
// its message; errors.Is and errors.As see err. It is err itself when
// none is in its message, nil for nil.
func Credentials(err error, credentials ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var in []string
	for _, c := range credentials {
		if len(c) >= minCredential && strings.Contains(msg, c) {
			in = append(in, c)
		}
	}
	if len(in) == 0 {
		return err
	}
	slices.SortFunc(in, func(a, b string) int { return len(b) - len(a) })
	return &sentRedacted{err: err, msg: Text(msg, in)}
}

// sentRedacted is an error whose message had a credential sent.
type sentRedacted struct {
	err error
	msg string
}

func (e *sentRedacted) Error() string { return e.msg }
func (e *sentRedacted) Unwrap() error { return e.err }
