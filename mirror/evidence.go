package mirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// This file is the engine's API to the origin's signed evidence of the
// versions it verified: what a provider-registry front door serves (the
// origin's package metadata with its own URLs, and the SHA256SUMS
// documents and signatures themselves), and what an export re-verifies.

// records.Evidence returns the origin's evidence for version v of p and platforms
// (nil: every platform the version list offers; platforms not served,
// see Config.Platforms, are left out), fetching and verifying what the
// cache lacks, as Package does: it returns only what the mirror verified.
// Package metadata cached by an earlier release, which kept no evidence,
// is fetched and verified again; when that fails the error says why (for
// a sealed mirror it wraps both records.ErrOffline and records.ErrNoEvidence). Before a
// record's evidence is handed out the first time after it was read from
// the cache, every stored signature is checked again over the stored
// SHA256SUMS bytes, and every platform's shasum against its line (see
// checkEvidence): a record that fails is dropped from the cache, so that
// the next call fetches it anew, and the call fails with the
// *verify.Error. Errors: those of Package, and verify.ErrIntegrity.
func (s *Engine) Evidence(ctx context.Context, p addrs.Provider, v versions.Version, platforms []addrs.Platform) (*records.Evidence, error) {
	k := records.KeysOf(p).Of(v)
	entry, st, err := s.allowedEntry(ctx, k)
	if err != nil {
		return nil, err
	}
	need := s.records.platformsFor(entry, platforms)
	rec, _, err := s.records.packageFor(ctx, k, need, &entry, true)
	if err != nil {
		return nil, err
	}
	if err := s.records.checkEvidence(p, v, rec); err != nil {
		return nil, err
	}
	ev := records.EvidenceOf(p, rec, need)
	ev.Stale = st.Stale
	return ev, nil
}

// platformsFor returns the names of platforms (nil: every platform entry
// offers) that the engine serves.
func (s *providerRecords) platformsFor(entry records.VersionEntry, platforms []addrs.Platform) []string {
	var need []string
	if platforms == nil {
		for _, pl := range entry.Platforms {
			if s.platforms.serves(pl) {
				need = append(need, pl)
			}
		}
		return need
	}
	for _, pl := range platforms {
		if s.platforms.serves(pl.String()) {
			need = append(need, pl.String())
		}
	}
	return need
}

// verifyCached checks again, from what the cache holds alone and without asking
// any origin, that the cached archive of version v of p for platform pl
// is the one the origin signed: the stored signature over the stored
// SHA256SUMS document with the stored signing keys, that the document is
// of p's type and version v, the platform's file name, os and arch (see
// signednames.go) and shasum against its line in that document, and the
// sha256 of the cached archive's bytes against it; then that the archive is still a package
// the clients can install, with the h1: hash recorded when it was cached.
// ctx bounds the reading of the archive.
//
// Errors: a *verify.Error (verify.ErrIntegrity) when a check fails;
// records.ErrNotCached when the cache has no package metadata of v, none for pl,
// or not its archive; records.ErrNoEvidence when the metadata was cached by an
// earlier release without evidence (fetching the version again, with
// Package or records.Evidence, stores it); records.ErrShutDown. It checks what is cached
// whatever its origin, allowed now or not.
func (s *providerRecords) verifyCached(ctx context.Context, p addrs.Provider, v versions.Version, pl addrs.Platform) error {
	if !s.life.StartWork() {
		return records.ErrShutDown
	}
	defer s.life.EndWork()
	// Reading a large archive must not hold up Shutdown past its deadline.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.life.Context(), cancel)()

	rec, ok := s.memo.CachedPackage(p, v)
	if !ok {
		return fmt.Errorf("%w: package metadata of %s %s", records.ErrNotCached, p, v)
	}
	if rec.Provenance == records.ProvenanceUnsigned {
		return fmt.Errorf("%w: %s %s was %s", records.ErrNoEvidence, p, v, records.ProvenanceUnsigned)
	}
	if !rec.HasEvidence() {
		return fmt.Errorf("%w: %s %s", records.ErrNoEvidence, p, v)
	}
	a, ok := rec.Archives[pl.String()]
	if !ok {
		return fmt.Errorf("%w: package metadata of %s %s for %s", records.ErrNotCached, p, v, pl)
	}
	if a.Evidence == nil || a.Evidence.Document < 0 || a.Evidence.Document >= len(rec.Documents) {
		return &verify.Error{Reason: verify.ReasonMissingChecksum,
			Detail: fmt.Sprintf("the stored record of %s %s %s refers to no stored SHA256SUMS document", p, v, pl)}
	}
	doc := rec.Documents[a.Evidence.Document]
	if err := verify.CheckSignature(doc.Content, doc.Signature, records.ArmoredKeys(doc.SigningKeys)); err != nil {
		return err
	}
	sums, err := verify.ParseSHA256SUMS(doc.Content)
	if err != nil {
		return err
	}
	rel, err := records.ReleaseOf(p.Type, v, sums)
	if err != nil {
		return err
	}
	if err := records.CheckStoredNames(rel, pl.String(), a); err != nil {
		return err
	}

	blob, err := s.store.OpenBlob(a.SHA256)
	if errors.Is(err, cache.ErrNotFound) {
		return fmt.Errorf("%w: archive %s", records.ErrNotCached, a.Filename)
	}
	if err != nil {
		return fmt.Errorf("opening cached archive %s: %w", a.Filename, err)
	}
	defer blob.Close()
	got, err := readSHA256(ctx, blob)
	if err != nil {
		return fmt.Errorf("reading cached archive %s: %w", a.Filename, err)
	}
	if got != strings.ToLower(a.SHA256) {
		return &verify.Error{Reason: verify.ReasonChecksum,
			Detail: fmt.Sprintf("the cached archive %s has sha256 %s, SHA256SUMS says %s", a.Filename, got, a.SHA256)}
	}
	h1, err := verify.CheckArchive(ctx, blob, blob.Size(), p.Type, s.cfg.ArchiveLimits)
	if err != nil {
		return err
	}
	if want := blob.Info().H1; want != "" && h1 != want {
		return &verify.Error{Reason: verify.ReasonChecksum,
			Detail: fmt.Sprintf("the cached archive %s has %s, %s when it was cached", a.Filename, h1, want)}
	}
	return nil
}

// readSHA256 reads r to its end, checking ctx between reads, and returns
// the hex sha256 of its bytes.
func readSHA256(ctx context.Context, r io.Reader) (string, error) {
	h := sha256.New()
	bufp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bufp)
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n, err := r.Read(*bufp)
		h.Write((*bufp)[:n])
		if err == io.EOF {
			return hex.EncodeToString(h.Sum(nil)), nil
		}
		if err != nil {
			return "", err
		}
	}
}

// checkEvidence checks rec's stored evidence again before it is served:
// each SHA256SUMS document's signature over its stored bytes with its
// stored keys, that the document is of p's type and version v, each
// archive's file name, os and arch (those of its platform: see
// signednames.go), shasum and sha256 against its line in its document,
// and the zh: hashes of its "packages" against theirs. The
// result is remembered in rec, which is only ever
// shared in memory, so a record is checked once per reading from the
// cache. A record that fails is deleted from the cache (it is fetched and
// verified anew on the next call) and the *verify.Error returned.
func (s *providerRecords) checkEvidence(p addrs.Provider, v versions.Version, rec *records.PackageRecord) error {
	if rec.EvidenceChecked() {
		return nil
	}
	err := rec.VerifyEvidence(p.Type, v)
	if err == nil {
		rec.MarkEvidenceChecked()
		return nil
	}
	reason := records.ReasonOf(err)
	s.metrics.VerificationFailed(reason)
	key := records.PackageKey(p, v)
	derr := s.store.DeleteMeta(key)
	s.memo.Forget(key)
	s.log.Error("cached evidence failed verification; dropped the record to fetch it again",
		"provider", p.String(), "version", v.String(), "reason", reason, "error", err, "drop_error", derr)
	return fmt.Errorf("%s %s: cached evidence: %w", p, v, err)
}
