package releases

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/memo"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// Document returns a small file of a version, by its publisher's name for
// it: the verified SHA256SUMS, and the signature that verified it
// (HashiCorp: PRODUCT_VERSION_SHA256SUMS.sig and .KEYID.sig under the ID
// of the key that verified it; OpenTofu: tofu_VERSION_SHA256SUMS.gpgsig).
// HashiCorp's .KEYID.sig named by another key in force is the origin's,
// served once it verifies the SHA256SUMS with that key (keyIDSignature).
// OpenTofu's cosign files (.sig, .pem) are passed through as the origin
// sends them, for installers that check them with cosign: tfmirror does
// not vouch for them (it verifies the .gpgsig), it checks their shape
// (checkCosignFile). Errors: those of Sums; a cosign file of another
// shape, a *failure.OriginError.
func (r *Releases) Document(ctx context.Context, pub Publisher, product, version, name string) ([]byte, error) {
	s, err := r.Sums(ctx, pub, product, version)
	if err != nil {
		return nil, err
	}
	sums := SumsName(pub, product, version)
	switch {
	case name == sums:
		r.metrics.CLIServed(string(pub), product, "sums", false)
		return s.Document, nil
	case pub == HashiCorp && (name == sums+".sig" || name == sums+"."+s.KeyID+".sig"),
		pub == OpenTofu && name == sums+".gpgsig":
		r.metrics.CLIServed(string(pub), product, "signature", false)
		return s.Signature, nil
	case slices.Contains(passedThrough(pub, product, version), name):
		return r.passThrough(ctx, pub, product, version, name)
	case pub == HashiCorp:
		rest, named := strings.CutPrefix(name, sums+".")
		if id, ok := strings.CutSuffix(rest, ".sig"); named && ok && slices.Contains(r.keys[pub].ids, id) {
			return r.keyIDSignature(ctx, s, id, name)
		}
	}
	return nil, fmt.Errorf("%w: %s %s has no file %q", ErrNotFound, product, version, name)
}

// keyIDSignature is HashiCorp's signature of s's SHA256SUMS named by id,
// a key in force other than the one that verified it (s.KeyID): during a
// rotation HashiCorp signs each release with both keys, the .sig with
// one and each key's own .KEYID.sig with that key, and an installer that
// trusts the other asks for that one by its ID (tfenv and js-releases ask
// for .72D7468F.sig whatever key made the .sig). It is served only once
// it verifies s's SHA256SUMS with the key it names, and kept, verified
// again when read; a sealed mirror serves it only when kept. One the
// origin answers 404 is remembered as missing, as a file passed through.
func (r *Releases) keyIDSignature(ctx context.Context, s *Sums, id, name string) ([]byte, error) {
	key := fileKey(HashiCorp, s.Product, s.Version, name)
	var held []byte
	if _, err := r.store.GetMeta(key, &held); err == nil && r.signedBy(s, id, held, true) == nil {
		r.metrics.CLIServed(string(HashiCorp), s.Product, "signature", false)
		return held, nil
	}
	if r.cfg.Offline {
		return nil, fmt.Errorf("%w: %w: the sealed mirror does not hold %s", ErrNotFound, records.ErrOffline, name)
	}
	if err := r.missing.known(key, name); err != nil {
		r.metrics.CLIServed(string(HashiCorp), s.Product, "missing", false)
		return nil, err
	}
	raw := r.fileURL(HashiCorp, s.Product, s.Version, name)
	v, err := r.detached(ctx, key, func(ctx context.Context) (any, error) {
		sig, err := r.fetchDocument(ctx, raw, maxSmallDocument)
		switch {
		case errors.Is(err, ErrNotFound):
			r.rememberMissing(ctx, HashiCorp, s.Product, s.Version, key)
			return nil, err
		case err != nil:
			return nil, err
		}
		if err := r.signedBy(s, id, sig, false); err != nil {
			reason := r.refusedSums(HashiCorp, s.Product, err)
			r.originRefused(raw, reason)
			r.log.Error("release signature refused; nothing was cached", "product", s.Product, "version", s.Version,
				"file", name, "reason", reason, "error", err)
			return nil, err
		}
		if err := r.store.PutMeta(key, sig); err != nil {
			r.log.Warn("release signature served but not cached", "file", name, "error", err)
		}
		return sig, nil
	})
	if err != nil {
		return nil, err
	}
	r.metrics.CLIServed(string(HashiCorp), s.Product, "signature", false)
	return v.([]byte), nil
}

// signedBy checks that sig, a signature of s's SHA256SUMS, was made by
// the key in force whose short ID is id, judged as verifySums judges a
// new signature (stored false) or a kept one (stored true).
func (r *Releases) signedBy(s *Sums, id string, sig []byte, stored bool) error {
	check := verify.VerifyDetached
	if stored {
		check = verify.VerifyStoredDetached
	}
	for _, keys := range r.keys[s.Publisher].blocks {
		if issuer, _, err := check(keys, s.Document, sig); err == nil && signerID(keys, issuer) == id {
			return nil
		}
	}
	return &verify.Error{Reason: verify.ReasonSignature,
		Detail: fmt.Sprintf("%s %s: the signature named by key %s does not verify its SHA256SUMS with that key", s.Product, s.Version, id)}
}

// Serves says whether name is one of the files of a version that the
// mirror serves, by its name alone: an archive of the layout
// (PRODUCT_VERSION_OS_ARCH.zip; served when its SHA256SUMS lists it), the
// SHA256SUMS, its signature, or a file passed through (Document,
// OpenArchive). A version list names no other (OpenTofu's lists the
// publisher's .tar.gz, packages and the like, which it does not serve).
func Serves(pub Publisher, product, version, name string) bool {
	if _, _, ok := archiveName(product, version, name); ok {
		return true
	}
	sums := SumsName(pub, product, version)
	switch {
	case name == sums,
		pub == HashiCorp && name == sums+".sig",
		pub == OpenTofu && name == sums+".gpgsig":
		return true
	}
	return slices.Contains(passedThrough(pub, product, version), name)
}

// SignerKeyID is the short ID of the key under whose ID the mirror
// serves the signature of version's SHA256SUMS
// (PRODUCT_VERSION_SHA256SUMS.KEYID.sig, Document), as far as it is known
// without asking an origin: the key that verified the SHA256SUMS held (in
// memory or the cache); for a version none is held of, the one key in
// force when there is one (whatever SHA256SUMS is served verifies with
// it); "" when several are in force and none has verified the version
// yet (which one signs it is learnt when its SHA256SUMS is fetched), and
// for OpenTofu, whose signature is not named by a key. A listing names
// the file only when this says which.
func (r *Releases) SignerKeyID(pub Publisher, product, version string) string {
	if pub != HashiCorp {
		return ""
	}
	if s, err := r.HeldSums(pub, product, version); err == nil {
		return s.KeyID
	}
	if ids := r.keys[pub].ids; len(ids) == 1 {
		return ids[0]
	}
	return ""
}

// maxMissingFiles bounds the optional files remembered as missing at the
// origin (Releases.missing): two a version at most, of versions with a
// verified SHA256SUMS that the version list has.
const maxMissingFiles = 1024

// passThrough serves a file no key of the operator covers, kept once
// fetched (a release's files do not change) and of the shape cosign
// writes (checkCosignFile): one of another is refused, not kept, and
// asked of the origin again next time. A file the origin answers
// 404 (a release published without its cosign files) is remembered as
// missing for Config.ListTTL: until then it is answered not found without
// asking the origin again, so that every installer run does not cost an
// origin request; then it is asked for again, in case it was published
// since.
func (r *Releases) passThrough(ctx context.Context, pub Publisher, product, version, name string) ([]byte, error) {
	key := fileKey(pub, product, version, name)
	if data, ok := heldCosignFile(r.store, key, name); ok {
		return data, nil
	}
	if r.cfg.Offline {
		// Sealed, a file not held is one the mirror does not have (404),
		// as an archive not held is (OpenArchive).
		return nil, fmt.Errorf("%w: %w: the sealed mirror does not hold %s", ErrNotFound, records.ErrOffline, name)
	}
	if err := r.missing.known(key, name); err != nil {
		r.metrics.CLIServed(string(pub), product, "missing", false)
		return nil, err
	}
	v, err := r.detached(ctx, key, func(ctx context.Context) (any, error) {
		// Again: a flight that ended just before this one began may
		// have learnt it, or kept it.
		if err := r.missing.known(key, name); err != nil {
			return nil, err
		}
		if data, ok := heldCosignFile(r.store, key, name); ok {
			return data, nil
		}
		data, err := r.fetchDocument(ctx, r.fileURL(pub, product, version, name), maxCosignDocument)
		switch {
		case errors.Is(err, ErrNotFound):
			r.rememberMissing(ctx, pub, product, version, key)
			return nil, err
		case err != nil:
			return nil, err
		}
		if err := checkCosignFile(name, data); err != nil {
			// Neither kept nor remembered as missing: asked of the
			// origin again next time.
			r.log.Warn("release file refused; nothing was cached", "file", name, "error", err)
			return nil, err
		}
		// Kept before the flight ends, so that a flight after it finds it.
		if err := r.store.PutMeta(key, data); err != nil {
			r.log.Warn("release file served but not cached", "file", name, "error", err)
		}
		return data, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// rememberMissing remembers the file under key, which the origin
// answered 404 for, as missing: only for a release the version list has,
// as the origin last answered it (not a stale list), so that it is a
// file a listed release lacks, not a version the list does not know.
func (r *Releases) rememberMissing(ctx context.Context, pub Publisher, product, version, key string) {
	list, st, err := r.list(ctx, pub, product, r.cfg.ListTTL)
	if err == nil && !st.Stale && list.Has(version) {
		r.missing.remember(key)
	}
}

// missingFiles remembers the files of releases that the origin answered
// 404 (optional files passed through, by fileKey; SHA256SUMS, by
// sumsKey), each until a time to live has passed; at most
// maxMissingFiles, the least recently used forgotten first.
type missingFiles struct {
	memo *memo.Memo[string, time.Time] // until when
	ttl  time.Duration
	now  func() time.Time
}

func newMissingFiles(ttl time.Duration, now func() time.Time) *missingFiles {
	return &missingFiles{memo: memo.New[string, time.Time](maxMissingFiles), ttl: ttl, now: now}
}

// known is ErrNotFound while the file under key is remembered as missing,
// else nil. A miss learnt more than a day ahead of the clock (one set
// forward and back) is forgotten (records.Fresh), not kept until the
// clock catches up with it.
func (m *missingFiles) known(key, name string) error {
	if until, _, ok := m.memo.Get(key); ok && records.Fresh(m.now(), until.Add(-m.ttl), m.ttl) {
		return fmt.Errorf("%w: the origin has no %s (asked again after %s)", ErrNotFound, name, until.UTC().Format(time.RFC3339))
	}
	return nil
}

// remember remembers the file under key as missing for the time to live.
func (m *missingFiles) remember(key string) {
	_, gen, _ := m.memo.Get(key)
	m.memo.Put(key, gen, m.now().Add(m.ttl))
}

// fileKey keys a file passed through (passThrough).
func fileKey(pub Publisher, product, version, name string) string {
	return "releases/file/" + string(pub) + "/" + product + "/" + version + "/" + name
}

// PassedThrough are the names of a version's files passed through as the
// origin sends them (Document): OpenTofu's cosign signature and
// certificate; none of HashiCorp's. A sync keeps them with the archives
// it ensures, so that a sealed mirror serves them: tenv downloads them
// before it checks an OpenTofu release, with or without cosign.
func PassedThrough(pub Publisher, product, version string) []string {
	return passedThrough(pub, product, version)
}

// passedThrough are the names of a version's files passed through: OpenTofu's
// cosign signature and certificate.
func passedThrough(pub Publisher, product, version string) []string {
	if pub != OpenTofu {
		return nil
	}
	sums := SumsName(pub, product, version)
	return []string{sums + ".sig", sums + ".pem"}
}

// OpenArchive opens a version's archive name, which must be listed in its
// verified SHA256SUMS under the layout's name for an archive
// (PRODUCT_VERSION_OS_ARCH.zip): from the cache, or fetched once from
// the origin through the engine (mirror.Engine.OpenBlob), its last bytes
// released only once its sha256 matched and it proved a zip holding the
// program. Errors: those of Sums and of mirror.Engine.OpenBlob.
func (r *Releases) OpenArchive(ctx context.Context, pub Publisher, product, version, name string) (*mirror.Archive, error) {
	s, err := r.Sums(ctx, pub, product, version)
	if err != nil {
		return nil, err
	}
	builds := s.Builds()
	i := slices.IndexFunc(builds, func(b Build) bool { return b.Filename == name })
	if i < 0 {
		return nil, fmt.Errorf("%w: the signed SHA256SUMS of %s %s lists no archive %q", ErrNotFound, product, version, name)
	}
	b := builds[i]
	raw := r.fileURL(pub, product, version, name)
	p, err := originOf(raw)
	if err != nil {
		return nil, err
	}
	r.notify.serving(pub, product, version, b.SHA256)
	arc, err := r.engine.OpenBlob(ctx, r.archiveBlob(pub, product, version, b.SHA256, name, raw,
		func(ctx context.Context) (io.ReadCloser, int64, error) {
			return r.origin.OpenArchive(ctx, p, raw)
		}))
	if r.cfg.Offline && errors.Is(err, records.ErrOffline) {
		// Sealed, an archive not cached (never fetched, or pruned) is
		// one the mirror does not hold.
		return nil, fmt.Errorf("%w: %w: the sealed mirror does not hold %s", ErrNotFound, err, name)
	}
	if err != nil {
		return nil, err
	}
	r.metrics.CLIServed(string(pub), product, "archive", false)
	return arc, nil
}

// Cached reports whether the archive whose sha256 is sha is in the cache
// (an archive read to its end through OpenArchive is committed just
// after).
func (r *Releases) Cached(sha string) bool { return r.engine.HasBlob(sha) }

// archiveBlob is the archive name of a release, whose signed SHA256SUMS
// gives sha256, as the engine stores it: read with open (from the origin
// URL from, or "" for a file that is no origin's), checked as a CLI
// archive of product within the archive limits, a refusal counted and,
// from an origin, told Config.OriginRefused.
func (r *Releases) archiveBlob(pub Publisher, product, version, sha256, name, from string, open func(context.Context) (io.ReadCloser, int64, error)) mirror.Blob {
	return mirror.Blob{
		SHA256:   sha256,
		Filename: name,
		Label:    Address(pub, product) + " " + version,
		Open:     open,
		Check: func(ctx context.Context, ra io.ReaderAt, size int64) error {
			return verify.CheckCLIArchive(ctx, ra, size, product, r.cfg.ArchiveLimits)
		},
		Refused: func(reason string) {
			r.metrics.CLIRefused(string(pub), product, reason)
			if from != "" {
				r.originRefused(from, reason)
			}
		},
	}
}

// originRefused tells Config.OriginRefused that the origin of the URL
// raw answered a file that failed verification for reason.
func (r *Releases) originRefused(raw, reason string) {
	if r.cfg.OriginRefused == nil {
		return
	}
	if p, err := originOf(raw); err == nil {
		r.cfg.OriginRefused(string(p.Hostname), reason)
	}
}

// refusedSums counts a release's SHA256SUMS, or an archive it lists,
// refused by verification (err), and returns the verify.Reason counted.
func (r *Releases) refusedSums(pub Publisher, product string, err error) string {
	reason := string(verify.ReasonSignature)
	var verr *verify.Error
	if errors.As(err, &verr) {
		reason = string(verr.Reason)
	}
	r.metrics.CLIRefused(string(pub), product, reason)
	r.metrics.VerificationFailed(reason)
	return reason
}
