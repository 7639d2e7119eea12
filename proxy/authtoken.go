package proxy

// Bearer tokens the mirror issues (the OCI distribution front door's
// token endpoint): short-lived, standing for one accepted client token
// without carrying it, and void once that token is no longer accepted.

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"strings"
	"time"
)

// issuedPrefix marks a token the mirror issued.
const issuedPrefix = "tfm1."

// CheckToken reports whether tok, presented by r, is one of the accepted
// client tokens (compared by hash, in constant time). A token refused is
// a failed attempt of r's client address (an empty one is no attempt).
func (a *Auth) CheckToken(r *http.Request, tok string) bool {
	if tok == "" {
		return false
	}
	return a.checked(r, FailureToken, a.acceptedToken(tok))
}

// CheckBearer reports whether cred, a Bearer credential of r, is a token
// IssueToken issued (unexpired, its client token still accepted) or an
// accepted client token: one attempt either way. A token the mirror
// issued that has expired, or whose client token was withdrawn, is
// refused without counting as a failed attempt: it guessed nothing.
func (a *Auth) CheckBearer(r *http.Request, cred string) bool {
	if cred == "" {
		return false
	}
	authentic, valid := a.issued(cred)
	switch {
	case valid:
		return a.checked(r, FailureIssued, true)
	case authentic:
		return false
	}
	kind := FailureToken
	if strings.HasPrefix(cred, issuedPrefix) {
		kind = FailureIssued
	}
	return a.checked(r, kind, a.acceptedToken(cred))
}

// acceptedToken reports whether tok is one of the accepted client tokens.
func (a *Auth) acceptedToken(tok string) bool {
	sum := sha256.Sum256([]byte(tok))
	tokens := *a.tokens.Load()
	match := 0
	for i := range tokens {
		match |= subtle.ConstantTimeCompare(sum[:], tokens[i][:])
	}
	return match == 1
}

// IssueToken returns a bearer token standing for the accepted client
// token tok, presented by r, valid for the signed URLs' TTL
// (AuthConfig.URLTTL), and that TTL; ok is false when tok is not
// accepted (CheckToken). The issued token names its client token only by
// a keyed hash: it reveals nothing of it, and stops being accepted when
// the tokens file no longer holds it. A token it issued, given for tok
// (a client that sends the token endpoint the bearer token it holds), is
// refused without counting as a failed attempt, as CheckBearer refuses
// an expired one: it guessed nothing. It is not issued anew, so that an
// issued token does not outlive its TTL; one that only looks issued is a
// failed attempt of that kind (FailureIssued).
func (a *Auth) IssueToken(r *http.Request, tok string) (issued string, ttl time.Duration, ok bool) {
	if tok == "" {
		return "", 0, false
	}
	if authentic, _ := a.issued(tok); authentic {
		return "", 0, false
	}
	kind := FailureToken
	if strings.HasPrefix(tok, issuedPrefix) {
		kind = FailureIssued
	}
	if !a.checked(r, kind, a.acceptedToken(tok)) {
		return "", 0, false
	}
	sum := sha256.Sum256([]byte(tok))
	var payload [16]byte
	binary.BigEndian.PutUint64(payload[:8], uint64(a.now().Add(a.ttl).Unix()))
	copy(payload[8:], a.tokenID(sum))
	return issuedPrefix + base64.RawURLEncoding.EncodeToString(append(payload[:], a.issuedMAC(payload[:])...)), a.ttl, true
}

// issued reports whether s is a token IssueToken issued (authentic), and
// whether it is still valid: unexpired, its client token still accepted.
func (a *Auth) issued(s string) (authentic, valid bool) {
	enc, ok := strings.CutPrefix(s, issuedPrefix)
	if !ok || len(enc) > 128 {
		return false, false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil || len(b) != 16+sha256.Size || !hmac.Equal(b[16:], a.issuedMAC(b[:16])) {
		return false, false
	}
	if a.now().Unix() >= int64(binary.BigEndian.Uint64(b[:8])) {
		return true, false
	}
	tokens := *a.tokens.Load()
	match := 0
	for i := range tokens {
		match |= subtle.ConstantTimeCompare(b[8:16], a.tokenID(tokens[i]))
	}
	return true, match == 1
}

// tokenID names a client token (by its hash) in an issued token.
func (a *Auth) tokenID(hash [sha256.Size]byte) []byte {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte("tfmirror issued token id v1\n"))
	m.Write(hash[:])
	return m.Sum(nil)[:8]
}

func (a *Auth) issuedMAC(payload []byte) []byte {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte("tfmirror issued token v1\n"))
	m.Write(payload)
	return m.Sum(nil)
}
