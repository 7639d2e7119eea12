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
	"strings"
	"time"
)

// issuedPrefix marks a token the mirror issued.
const issuedPrefix = "tfm1."

// CheckToken reports whether tok is one of the accepted client tokens
// (compared by hash, in constant time).
func (a *Auth) CheckToken(tok string) bool {
	if tok == "" {
		return false
	}
	sum := sha256.Sum256([]byte(tok))
	tokens := *a.tokens.Load()
	match := 0
	for i := range tokens {
		match |= subtle.ConstantTimeCompare(sum[:], tokens[i][:])
	}
	return match == 1
}

// IssueToken returns a bearer token standing for the accepted client
// token tok, valid for the signed URLs' TTL (AuthConfig.URLTTL), and that
// TTL; ok is false when tok is not accepted. The issued token names its
// client token only by a keyed hash: it reveals nothing of it, and stops
// being accepted when the tokens file no longer holds it.
func (a *Auth) IssueToken(tok string) (issued string, ttl time.Duration, ok bool) {
	if !a.CheckToken(tok) {
		return "", 0, false
	}
	sum := sha256.Sum256([]byte(tok))
	var payload [16]byte
	binary.BigEndian.PutUint64(payload[:8], uint64(a.now().Add(a.ttl).Unix()))
	copy(payload[8:], a.tokenID(sum))
	return issuedPrefix + base64.RawURLEncoding.EncodeToString(append(payload[:], a.issuedMAC(payload[:])...)), a.ttl, true
}

// CheckIssued reports whether s is a token IssueToken issued, unexpired,
// whose client token is still accepted.
func (a *Auth) CheckIssued(s string) bool {
	enc, ok := strings.CutPrefix(s, issuedPrefix)
	if !ok || len(enc) > 128 {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil || len(b) != 16+sha256.Size || !hmac.Equal(b[16:], a.issuedMAC(b[:16])) {
		return false
	}
	if a.now().Unix() >= int64(binary.BigEndian.Uint64(b[:8])) {
		return false
	}
	tokens := *a.tokens.Load()
	match := 0
	for i := range tokens {
		match |= subtle.ConstantTimeCompare(b[8:16], a.tokenID(tokens[i]))
	}
	return match == 1
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
