package proxy

// Client authentication: bearer tokens for the JSON documents, signed
// expiring URLs for archives (clients never send credentials for archive
// downloads).

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/mux"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// Query parameters of a signed archive URL.
const (
	expiryParam    = "exp"
	signatureParam = "sig"
)

// MinSigningKeyLen is the shortest URL-signing key accepted, in bytes.
const MinSigningKeyLen = 32

// MinTokenLen is the shortest client token a tokens file may hold, in
// characters. Sixteen random hex digits are 64 bits: at the limit of
// failed attempts (AuthFailureRate), guessing one online would take
// longer than the universe has existed. `openssl rand -hex 32` makes a
// token of 64.
const MinTokenLen = 16

// AuthConfig configures client authentication.
type AuthConfig struct {
	// TokenHashes are the SHA-256 hashes of the accepted bearer tokens
	// (see ParseTokens). At least one is required.
	TokenHashes [][sha256.Size]byte
	// SigningKey is the HMAC-SHA256 key for archive URLs, at least
	// MinSigningKeyLen bytes. Mirrors behind one load balancer must share it.
	SigningKey []byte
	// URLTTL is how long a signed archive URL stays valid. Default 1 hour.
	URLTTL time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives the credentials refused (at warn, within a bound
	// of failureWarnBurst at once and failureWarnRate a second; the
	// others at debug), by client address and kind, never the
	// credential itself. Default: discard.
	Logger *slog.Logger
	// Metrics, when set, counts the credentials refused and the requests
	// refused for too many failures. Default: not counted.
	Metrics AuthMetrics
}

// Auth checks client credentials and signs archive URLs. It limits the
// failed attempts of each client address (authlimit.go).
type Auth struct {
	tokens  atomic.Pointer[[][sha256.Size]byte]
	key     []byte
	ttl     time.Duration
	now     func() time.Time
	log     *slog.Logger
	metrics AuthMetrics
	limit   *failureLimiter
	failed  [len(failureKinds)]atomic.Uint64 // credentials refused since start, by kind
}

// NewAuth validates cfg and returns an Auth.
func NewAuth(cfg AuthConfig) (*Auth, error) {
	if len(cfg.TokenHashes) == 0 {
		return nil, errors.New("proxy: client authentication needs at least one token")
	}
	if len(cfg.SigningKey) < MinSigningKeyLen {
		return nil, fmt.Errorf("proxy: URL-signing key is %d bytes, want at least %d", len(cfg.SigningKey), MinSigningKeyLen)
	}
	a := &Auth{key: cfg.SigningKey, ttl: cfg.URLTTL, now: cfg.Now, log: cfg.Logger, metrics: cfg.Metrics,
		limit: newFailureLimiter(maxTrackedClients)}
	a.tokens.Store(&cfg.TokenHashes)
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.ttl <= 0 {
		a.ttl = time.Hour
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a, nil
}

// SetTokens replaces the accepted token hashes (on a reload of the tokens
// file). Requests already checked are not affected. An empty list is
// refused, so a mistake cannot lock every client out silently.
func (a *Auth) SetTokens(hashes [][sha256.Size]byte) error {
	if len(hashes) == 0 {
		return errors.New("proxy: client authentication needs at least one token")
	}
	a.tokens.Store(&hashes)
	return nil
}

// TokenLineError is a line of a tokens file that ParseTokens refuses. Its
// reason never quotes the token.
type TokenLineError struct {
	Line   int
	Reason string
}

func (e *TokenLineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// ParseTokens reads a tokens file: one token per line, blank lines and
// lines starting with '#' ignored, surrounding space trimmed, a UTF-8
// byte order mark that begins the file (as some editors write one)
// dropped. Every token has at least MinTokenLen characters, no space
// and no control character, and is UTF-8 (a file saved as UTF-16 is
// refused, not read as tokens no client can send); a line that breaks
// one of these rules is a *TokenLineError. It returns
// only the tokens' SHA-256 hashes; no token is kept in memory. A file
// without any token is an error.
func ParseTokens(r io.Reader) ([][sha256.Size]byte, error) {
	var hashes [][sha256.Size]byte
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			// Not part of the first token, nor of a comment.
			text = strings.TrimPrefix(text, byteOrderMark)
		}
		tok := strings.TrimSpace(text)
		if tok == "" || strings.HasPrefix(tok, "#") {
			continue
		}
		if strings.ContainsAny(tok, " \t") {
			return nil, &TokenLineError{Line: line, Reason: "a token may not contain spaces"}
		}
		if !sendable(tok) {
			// A file saved as UTF-16 (PowerShell's > and Out-File,
			// Notepad's "Unicode") holds a NUL byte beside each
			// character: taken as tokens, no client could send one, and
			// every client would be refused.
			return nil, &TokenLineError{Line: line, Reason: "a token may hold no control character (a NUL byte, as a file saved as UTF-16 holds beside each character) and no byte that is not UTF-8: no client can send it; save the file as UTF-8"}
		}
		if n := utf8.RuneCountInString(tok); n < MinTokenLen {
			return nil, &TokenLineError{Line: line, Reason: fmt.Sprintf(
				"a token of %d characters is too short: at least %d are needed, so that it cannot be guessed (make one with: openssl rand -hex 32)", n, MinTokenLen)}
		}
		hashes = append(hashes, sha256.Sum256([]byte(tok)))
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		// The line after the last one read: no token is so long.
		return nil, &TokenLineError{Line: line + 1, Reason: fmt.Sprintf(
			"a line longer than %d KiB: no token is so long (is this the client tokens file?)", bufio.MaxScanTokenSize>>10)}
	} else if err != nil {
		return nil, err
	}
	if len(hashes) == 0 {
		return nil, errors.New("no tokens (one per line; '#' starts a comment)")
	}
	return hashes, nil
}

// sendable reports whether tok can be sent in an Authorization header:
// valid UTF-8 without a control character.
func sendable(tok string) bool {
	if !utf8.ValidString(tok) {
		return false
	}
	for _, r := range tok {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return false
		}
	}
	return true
}

// byteOrderMark is the UTF-8 byte order mark.
const byteOrderMark = "\ufeff"

// checkBearer reports whether r's Authorization header carries an
// accepted token. Every stored hash is compared, in constant time.
func (a *Auth) checkBearer(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return a.CheckToken(r, strings.TrimSpace(tok))
}

// sign returns the query string that authorizes a GET of file of provider
// p until the TTL has passed.
func (a *Auth) sign(p addrs.Provider, file string) string {
	exp := strconv.FormatInt(a.now().Add(a.ttl).Unix(), 10)
	q := url.Values{}
	q.Set(expiryParam, exp)
	q.Set(signatureParam, base64.RawURLEncoding.EncodeToString(a.mac(p, file, exp)))
	return q.Encode()
}

// verify checks the signature of r, an archive request for file of p. A
// signature that is there and does not verify is a failed attempt of r's
// client; a missing one is not, nor is one the mirror made that has
// expired (a slow install's, which guessed nothing).
func (a *Auth) verify(r *http.Request, p addrs.Provider, file string) bool {
	q := r.URL.Query()
	exp, sig := q.Get(expiryParam), q.Get(signatureParam)
	if sig == "" {
		return false
	}
	authentic, fresh := a.signature(p, file, exp, sig)
	if authentic && !fresh {
		return false
	}
	return a.checked(r, FailureSignature, authentic)
}

// signature reports whether sig is the mirror's signature of file of p
// until exp (authentic), and whether exp has not passed (fresh).
func (a *Auth) signature(p addrs.Provider, file, exp, sig string) (authentic, fresh bool) {
	if exp == "" || len(exp) > 20 || len(sig) > 64 {
		return false, false
	}
	got, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil || !hmac.Equal(got, a.mac(p, file, exp)) {
		return false, false
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	return true, err == nil && a.now().Unix() < unix
}

// mac is the HMAC of one archive path and expiry. The provider address is
// in its canonical (parsed) form, so every spelling of a path that the
// router accepts signs the same.
func (a *Auth) mac(p addrs.Provider, file, exp string) []byte {
	m := hmac.New(sha256.New, a.key)
	fmt.Fprintf(m, "tfmirror archive v1\n%s/%s\n%s", p, file, exp)
	return m.Sum(nil)
}

// routeAuth says how one family of routes (the provider mirror protocol,
// the provider registry protocol, the module registry protocol) is
// guarded when client authentication is on: a request for a file the
// mirror hands out signed URLs of needs a valid, unexpired signature (the
// clients send no token for it), any other request a bearer token.
type routeAuth struct {
	// signed returns, for a request of a signed file, the provider and
	// file name its signature must vouch for; ok is false for a request
	// that needs a bearer token instead. An error (a malformed path) is
	// the answer, before any signature is checked.
	signed func(r *http.Request) (signer addrs.Provider, file string, ok bool, err error)
	// badSignature is the answer to a missing, invalid or expired signature.
	badSignature error
	// unauthorized is the answer to a missing or invalid bearer token.
	unauthorized func(r *http.Request) error
}

// authorize is the middleware of a family of routes, guarded as ra says.
// Without client authentication it lets every request through.
//
// Answers to authenticated requests, documents with signed URLs and
// files served on a signed URL (which a shared cache would keep serving
// after it expired, to anyone holding it) are marked private by
// privateWriter, overriding any other caching policy.
func (rs *responder) authorize(ra routeAuth) mux.MiddlewareFunc {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a := rs.auth
			if a == nil {
				next.ServeHTTP(w, r)
				return
			}
			signer, file, signed, err := ra.signed(r)
			if err != nil {
				rs.fail(w, r, err)
				return
			}
			if signed {
				if !a.verify(r, signer, file) {
					rs.fail(w, r, ra.badSignature)
					return
				}
			} else if !a.checkBearer(r) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="tfmirror"`)
				rs.fail(w, r, ra.unauthorized(r))
				return
			}
			next.ServeHTTP(&privateWriter{ResponseWriter: w}, r)
		})
	}
}

// Private returns w marking its response as private to one client and
// not to be stored, whatever Cache-Control the handler chose, with Vary:
// Authorization: for a door's answers to a request its client
// authentication let through (the CLI releases door's), as authorize
// marks the mirror protocols'. A shared cache in front may keep answers
// whatever the request's Authorization (nginx's proxy_cache does), and
// would hand a token holder's to clients without one.
func Private(w http.ResponseWriter) http.ResponseWriter { return &privateWriter{ResponseWriter: w} }

// privateWriter marks a response as private to one client and not to be
// stored, whatever Cache-Control the handler chose.
type privateWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *privateWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		h := w.Header()
		h.Set("Cache-Control", "private, no-store")
		h.Add("Vary", "Authorization")
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
