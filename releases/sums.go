package releases

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// sumsSchema is the schema of the stored SHA256SUMS records.
const sumsSchema = 1

// Sums is a version's SHA256SUMS, verified with its publisher's key: the
// document and the signature exactly as the origin sent them.
type Sums struct {
	Publisher Publisher `json:"publisher"`
	Product   string    `json:"product"`
	Version   string    `json:"version"`
	Document  []byte    `json:"document"`
	Signature []byte    `json:"signature"`
	// KeyID is the short ID of the key that verified the signature
	// (upper-case hex, "72D7468F").
	KeyID string `json:"key_id"`
	// SignedAt is the signature's creation time: the release time the
	// package policy's minimum release age judges by.
	SignedAt time.Time `json:"signed_at"`
	// Provenance says how the SHA256SUMS reached the cache: fetched from
	// the publisher (records.ProvenanceOrigin, ""), or imported from a
	// bundle (records.ProvenanceImported), which retention never removes
	// unless a prune names the version: it cannot be fetched again.
	Provenance records.Provenance `json:"provenance,omitempty"`
	Schema     int                `json:"schema"`

	files map[string]string
}

// SHA256 is the signed sha256 of file name, "" when not listed.
func (s *Sums) SHA256(name string) string { return s.files[name] }

// Build is one platform's archive of a version, named as its publisher
// names it and listed in the signed SHA256SUMS.
type Build struct {
	OS, Arch, Filename, SHA256 string
}

// Builds are the archives the signed SHA256SUMS lists under the names the
// publisher gives them (PRODUCT_VERSION_OS_ARCH.zip), by OS and arch: a
// signature vouches for the names it signed, so nothing else is offered.
func (s *Sums) Builds() []Build {
	var out []Build
	for name, sha := range s.files {
		if os, arch, ok := archiveName(s.Product, s.Version, name); ok {
			out = append(out, Build{OS: os, Arch: arch, Filename: name, SHA256: sha})
		}
	}
	slices.SortFunc(out, func(a, b Build) int { return strings.Compare(a.Filename, b.Filename) })
	return out
}

// archiveName returns the OS and arch of name when it is the
// publisher's name of an archive of product's version
// (PRODUCT_VERSION_OS_ARCH.zip).
func archiveName(product, version, name string) (os, arch string, ok bool) {
	rest, ok := strings.CutPrefix(name, product+"_"+version+"_")
	if !ok {
		return "", "", false
	}
	if rest, ok = strings.CutSuffix(rest, ".zip"); !ok {
		return "", "", false
	}
	os, arch, ok = strings.Cut(rest, "_")
	if !ok || !platformPart(os) || !platformPart(arch) {
		return "", "", false
	}
	return os, arch, true
}

func platformPart(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// SumsName is the publisher's name of a version's SHA256SUMS.
func SumsName(pub Publisher, product, version string) string {
	return product + "_" + version + "_SHA256SUMS"
}

// CanonicalVersion parses a version as the installers write it ("1.6.0",
// "1.7.0-rc1"), returning its one spelling; ErrNotFound when it does not
// parse (addrs.ParseSemver: a numeric part too large for 64 bits is not a
// version) or is spelt otherwise ("v1.6.0", "1.6", "01.6.0").
func CanonicalVersion(v string) (string, error) {
	if len(v) > 64 {
		return "", fmt.Errorf("%w: not a version", ErrNotFound)
	}
	pv, err := addrs.ParseSemver(v)
	if err != nil || pv.String() != v {
		return "", fmt.Errorf("%w: %q is not a version in its canonical spelling", ErrNotFound, v)
	}
	return v, nil
}

func sumsKey(pub Publisher, product, version string) string {
	return "releases/sums/" + string(pub) + "/" + product + "/" + version
}

// fileURL is where publisher pub keeps a file of a version.
func (r *Releases) fileURL(pub Publisher, product, version, name string) string {
	if pub == OpenTofu {
		return strings.TrimSuffix(r.cfg.OpenTofuDownloadURL, "/") + "/v" + url.PathEscape(version) + "/" + url.PathEscape(name)
	}
	return strings.TrimSuffix(r.cfg.HashiCorpURL, "/") + "/" + url.PathEscape(product) + "/" + url.PathEscape(version) + "/" + url.PathEscape(name)
}

// Sums returns version's verified SHA256SUMS: from memory, the cache
// (verified again with the keys in force), or the origin (one fetch for
// every caller at once). The package policy is not applied here
// (mirror/served.Releases does, by the signature time it carries).
// Errors: ErrNotFound, records.ErrOffline, verify.ErrIntegrity (a
// signature that does not verify: nothing is kept), origin errors.
func (r *Releases) Sums(ctx context.Context, pub Publisher, product, version string) (*Sums, error) {
	if err := r.CheckProduct(pub, product); err != nil {
		return nil, err
	}
	if _, err := CanonicalVersion(version); err != nil {
		return nil, err
	}
	s, err := r.sumsOf(ctx, pub, product, version)
	if r.cfg.Offline && (errors.Is(err, records.ErrOffline) || err == nil && !holdsArchive(r.engine, s)) {
		// Sealed, a version none of whose archives is cached (never
		// fetched, or pruned) is not held: listed nowhere, answered 404.
		return nil, fmt.Errorf("%w: %w: the sealed mirror holds no archive of %s %s", ErrNotFound, records.ErrOffline, product, version)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// holdsArchive says whether the engine's cache holds one of the archives
// s lists.
func holdsArchive(e Engine, s *Sums) bool {
	return slices.ContainsFunc(s.Builds(), func(b Build) bool { return e.HasBlob(b.SHA256) })
}

// ServedBuilds are the archives of s that the listings name: every one
// its signed SHA256SUMS lists (Sums.Builds), fetched from the origin
// when asked for and not cached; sealed, only those the cache holds, so
// that no listing names an archive a sealed mirror answers 404 for. It
// asks no origin.
func (r *Releases) ServedBuilds(s *Sums) []Build {
	builds := s.Builds()
	if !r.cfg.Offline {
		return builds
	}
	return slices.DeleteFunc(builds, func(b Build) bool { return !r.engine.HasBlob(b.SHA256) })
}

// sumsOf is Sums of a product served and a version in its one spelling.
func (r *Releases) sumsOf(ctx context.Context, pub Publisher, product, version string) (*Sums, error) {
	key := sumsKey(pub, product, version)
	r.mu.Lock()
	s := r.sums[key]
	r.mu.Unlock()
	if s != nil {
		return s, nil
	}
	v, err := r.detached(ctx, key, func(ctx context.Context) (any, error) {
		s, err := r.loadSums(key)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, cache.ErrNotFound) {
			r.log.Warn("stored SHA256SUMS no longer verifies; fetching it again", "publisher", string(pub), "product", product, "version", version, "error", err)
		}
		if !r.cfg.Offline {
			if err := r.checkListed(ctx, pub, product, version); err != nil {
				return nil, err
			}
		}
		// A listed release whose SHA256SUMS the origin lacks is not
		// asked for again until the list's time to live has passed (a
		// version list under a minimum release age looks its newest
		// versions up on every request), as a file passed through is
		// not (passThrough).
		name := SumsName(pub, product, version)
		if err := r.missing.known(key, name); err != nil {
			return nil, err
		}
		s, err = r.fetchSums(ctx, pub, product, version)
		if errors.Is(err, ErrNotFound) && !r.cfg.Offline {
			r.rememberMissing(ctx, pub, product, version, key)
		}
		return s, err
	})
	if err != nil {
		return nil, err
	}
	s = v.(*Sums)
	r.remember(key, s)
	return s, nil
}

// HeldSums is a version's verified SHA256SUMS from memory or the cache,
// never the origin; cache.ErrNotFound when neither has it.
func (r *Releases) HeldSums(pub Publisher, product, version string) (*Sums, error) {
	key := sumsKey(pub, product, version)
	r.mu.Lock()
	s := r.sums[key]
	r.mu.Unlock()
	if s != nil {
		return s, nil
	}
	s, err := r.loadSums(key)
	if err != nil {
		return nil, err
	}
	r.remember(key, s)
	return s, nil
}

// remember keeps a verified SHA256SUMS in memory.
func (r *Releases) remember(key string, s *Sums) {
	r.mu.Lock()
	if len(r.sums) > 4096 {
		clear(r.sums)
	}
	r.sums[key] = s
	r.mu.Unlock()
}

// loadSums reads a stored SHA256SUMS and verifies it again: the keys in
// force decide, not the ones that were, with the validity a key had when
// the SHA256SUMS was verified (verifySums, stored): one that has expired
// since still verifies what it signed while valid.
func (r *Releases) loadSums(key string) (*Sums, error) {
	var s Sums
	if _, err := r.store.GetMeta(key, &s); err != nil {
		return nil, err
	}
	if s.Schema != sumsSchema {
		return nil, cache.ErrNotFound
	}
	if sumsKey(s.Publisher, s.Product, s.Version) != key {
		// The record of another release stands for nothing here: as
		// if none were stored.
		return nil, cache.ErrNotFound
	}
	if err := r.verifySums(&s, true); err != nil {
		return nil, err
	}
	return &s, nil
}

// fetchSums fetches a version's SHA256SUMS and signature, verifies them
// and stores them. HashiCorp's .sig made by no key in force is followed
// by the signatures named by the keys' IDs (verifyByKeyIDSignature). A
// signature that does not verify is counted, logged and refused; nothing
// is stored.
func (r *Releases) fetchSums(ctx context.Context, pub Publisher, product, version string) (*Sums, error) {
	name := SumsName(pub, product, version)
	raw := r.fileURL(pub, product, version, name)
	doc, err := r.fetchDocument(ctx, raw, maxSmallDocument)
	if err != nil {
		return nil, err
	}
	sig, err := r.fetchSignature(ctx, pub, product, version, name)
	if err != nil {
		return nil, err
	}
	s := &Sums{Publisher: pub, Product: product, Version: version, Document: doc, Signature: sig, Schema: sumsSchema}
	err = r.verifySums(s, false)
	if err != nil && pub == HashiCorp && signatureRefused(err) {
		if err = r.verifyByKeyIDSignature(ctx, s, name, err); err != nil && ctx.Err() != nil {
			// A signature named by a key's ID not fetched in time (or
			// the mirror shutting down): none in force was read, so
			// nothing was refused.
			return nil, err
		}
	}
	if err != nil {
		reason := r.refusedSums(pub, product, err)
		r.originRefused(raw, reason)
		r.log.Error("release SHA256SUMS refused; nothing was cached", "publisher", string(pub), "product", product,
			"version", version, "reason", reason, "error", err)
		return nil, err
	}
	if err := r.store.PutMeta(sumsKey(pub, product, version), s); err != nil {
		r.log.Error("verified SHA256SUMS served but not cached", "publisher", string(pub), "product", product, "version", version, "error", err)
	}
	return s, nil
}

// fetchSignature fetches the signature of a SHA256SUMS: OpenTofu's
// .gpgsig; HashiCorp's .sig, or else the one named by the ID of a key in
// force (.72D7468F.sig).
func (r *Releases) fetchSignature(ctx context.Context, pub Publisher, product, version, sumsName string) ([]byte, error) {
	if pub == OpenTofu {
		return r.fetchDocument(ctx, r.fileURL(pub, product, version, sumsName+".gpgsig"), maxSmallDocument)
	}
	sig, err := r.fetchDocument(ctx, r.fileURL(pub, product, version, sumsName+".sig"), maxSmallDocument)
	if !errors.Is(err, ErrNotFound) {
		return sig, err
	}
	for _, id := range r.keys[pub].ids {
		sig, err = r.fetchDocument(ctx, r.fileURL(pub, product, version, sumsName+"."+id+".sig"), maxSmallDocument)
		if !errors.Is(err, ErrNotFound) {
			return sig, err
		}
	}
	return nil, err
}

// signatureRefused says whether err is verifySums' refusal of the
// signature itself (no key in force made it), not of the document it
// vouches for.
func signatureRefused(err error) bool {
	var verr *verify.Error
	return errors.As(err, &verr) && verr.Reason == verify.ReasonSignature
}

// verifyByKeyIDSignature verifies s with HashiCorp's signature named by
// the ID of each key in force (.72D7468F.sig), once its plain .sig did
// not verify (refused, that refusal): across a key rotation HashiCorp's
// .sig is made by one key and each key's own file by that key, so that
// whoever trusts the other still verifies the release. The first that
// verifies is kept in s; when none does, or none is published, the .sig's
// refusal stands. One not fetched once ctx is done (out of time, or the
// mirror shutting down) ends it with the fetch's error: not a refusal.
func (r *Releases) verifyByKeyIDSignature(ctx context.Context, s *Sums, sumsName string, refused error) error {
	for _, id := range r.keys[HashiCorp].ids {
		sig, err := r.fetchDocument(ctx, r.fileURL(HashiCorp, s.Product, s.Version, sumsName+"."+id+".sig"), maxSmallDocument)
		if err != nil {
			if ctx.Err() != nil {
				return err // out of time: no refusal to count (fetchSums)
			}
			continue
		}
		if bytes.Equal(sig, s.Signature) {
			continue // the .sig, refused already
		}
		c := *s
		c.Signature = sig
		if err := r.verifySums(&c, false); err != nil {
			if !signatureRefused(err) {
				return err
			}
			continue
		}
		*s = c
		return nil
	}
	return refused
}

// namesVersion refuses a signed SHA256SUMS that names no file of s's
// product and version (PRODUCT_VERSION_…): one its publisher signed for
// another release (another version, another spelling of it, another
// product), answered for this one. The signature vouches for the names
// it signed; kept, such a document would date the version by another
// release's signature and stand for it until pruned.
func namesVersion(s *Sums, files map[string]string) error {
	prefix := s.Product + "_" + s.Version + "_"
	for name := range files {
		if strings.HasPrefix(name, prefix) {
			return nil
		}
	}
	return &verify.Error{Reason: verify.ReasonChecksum,
		Detail: fmt.Sprintf("the signed SHA256SUMS names no file of %s %s: it is another release's", s.Product, s.Version)}
}

// verifySums checks s's signature with its publisher's keys, sets the key
// ID and the signing time, and parses the document. A new SHA256SUMS (an
// origin's answer) is judged with the keys' validity now, as the
// installers judge it; a stored one (one verified when it was stored,
// read again from the cache, or exported by a mirror that verified it,
// as an import's manifest vouches) with the validity a key had when it
// was verified (verify.VerifyStoredDetached): a key that has expired
// since still verifies what it signed while valid, and nothing it
// signed after.
func (r *Releases) verifySums(s *Sums, stored bool) error {
	kr := r.keys[s.Publisher]
	check := verify.VerifyDetached
	if stored {
		check = verify.VerifyStoredDetached
	}
	for _, keys := range kr.blocks {
		// verify.VerifyDetached, keeping which key of the block signed: a
		// block may hold more than one, and the signature is served under
		// the ID of the one that made it (.72D7468F.sig).
		issuer, sig, err := check(keys, s.Document, s.Signature)
		if err != nil {
			continue
		}
		id := signerID(keys, issuer)
		if id == "" { // not reached: the keyring found the key by that ID
			id = shortID(keys[0])
		}
		files, err := verify.ParseSHA256SUMS(s.Document)
		if err != nil {
			return err
		}
		if err := namesVersion(s, files); err != nil {
			return err
		}
		s.KeyID, s.SignedAt, s.files = id, sig.CreationTime.UTC(), files
		return nil
	}
	// Each block failed alone: the failure of all together says why.
	keyring, err := verify.SigningKeys(kr.armored)
	if err != nil {
		return err
	}
	if _, _, err = check(keyring, s.Document, s.Signature); err == nil { // not reached
		err = errors.New("no key block verifies it alone")
	}
	return &verify.Error{Reason: verify.ReasonSignature, Detail: "SHA256SUMS signature does not verify with the publisher's signing keys", Err: err}
}
