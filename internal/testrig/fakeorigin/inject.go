package fakeorigin

import (
	"bytes"
	"context"
	"slices"
	"time"
)

// SetDown makes every request answer status with a JSON error body; 0
// restores normal service. It takes precedence over every other injection.
func (o *Origin) SetDown(status int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.down = status
}

// SetKindStatus makes requests of kind k answer status with a JSON error
// body; 0 restores normal service.
func (o *Origin) SetKindStatus(k Kind, status int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if status == 0 {
		delete(o.kindStatus, k)
		return
	}
	o.kindStatus[k] = status
}

// SetKindBody makes requests of kind k answer 200 with body and the given
// Content-Type instead of the real document (garbage, truncated or
// oversized bodies); a nil body restores the real one.
func (o *Origin) SetKindBody(k Kind, body []byte, contentType string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if body == nil {
		delete(o.kindBody, k)
		return
	}
	o.kindBody[k] = canned{body: body, contentType: contentType}
}

// SetFailNextN makes only the next n requests of kind k answer status (with
// a JSON error body); later ones are served normally. It replaces any
// earlier count for k; n <= 0 cancels it. SetDown takes precedence and does
// not consume the count.
func (o *Origin) SetFailNextN(k Kind, n, status int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n <= 0 || status == 0 {
		delete(o.failNext, k)
		return
	}
	o.failNext[k] = failN{n: n, status: status}
}

// SetRetryAfter adds "Retry-After: value" to every injected failure
// response (SetDown, SetKindStatus, SetFailNextN); "" removes it.
func (o *Origin) SetRetryAfter(value string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.retryAfter = value
}

// TamperArchive serves, while on, the package's archive with one byte
// flipped near its end (same length). Package metadata and SHA256SUMS keep
// the true sha256, and Archive/SHA256 keep returning the true values.
func (o *Origin) TamperArchive(ns, typ, version, platform string, on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tamper[akey{ns, typ, version, platform}] = on
}

// SetArchiveBytes makes the package's archive data instead of the
// generated zip, as from an origin that signs whatever it built (bytes
// that are not a zip, or a zip without the provider executable): the
// package JSON, the correctly signed SHA256SUMS, Archive and SHA256 all
// describe data. nil restores the generated archive. The package must be
// registered with AddProvider for data to be served.
func (o *Origin) SetArchiveBytes(ns, typ, version, platform string, data []byte) {
	k := akey{ns, typ, version, platform}
	o.mu.Lock()
	defer o.mu.Unlock()
	if data == nil {
		delete(o.replaced, k)
		return
	}
	b := &built{data: bytes.Clone(data), sha: sha(data)}
	b.once.Do(func() {}) // data and sha are set
	o.replaced[k] = b
}

// SetWrongSigningKey makes the registry keep advertising key A but sign
// SHA256SUMS with key B, so signature verification fails.
func (o *Origin) SetWrongSigningKey(on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.wrongKey = on
}

// SetSigningKeys makes every package answer's signing_keys list these
// ASCII-armored keys, each as an entry of its own, in place of key A,
// which still signs; none restores key A alone.
func (o *Origin) SetSigningKeys(armored ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.signingKeys = armored
}

// OmitFromSums drops, while on, the package's line from its version's
// SHA256SUMS (which stays correctly signed).
func (o *Origin) OmitFromSums(ns, typ, version, platform string, on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.omit[akey{ns, typ, version, platform}] = on
}

// SetExtraSumsLines adds lines (each without its newline) to the
// version's SHA256SUMS, which stays correctly signed: lines for files
// other than the registered packages' zips, as release tools write them
// (an SBOM, a platform the versions list does not name), or lines that
// are not checksums at all; none removes them.
func (o *Origin) SetExtraSumsLines(ns, typ, version string, lines ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.extraSums[akey{ns, typ, version, ""}] = slices.Clone(lines)
}

// SetShasumOverride makes the package JSON's "shasum" report hex instead of
// the true value; "" turns the override off.
func (o *Origin) SetShasumOverride(ns, typ, version, platform, hex string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := akey{ns, typ, version, platform}
	if hex == "" {
		delete(o.shaOverride, k)
		return
	}
	o.shaOverride[k] = hex
}

// SetAnswerOf makes the package JSON of version and platform give the
// filename, download URL, shasum and SHA256SUMS URLs of the package of
// otherVersion and otherPlatform (os and arch stay those asked for, as
// clients check them), as a registry relabeling a signed release would;
// an empty otherVersion turns it off.
func (o *Origin) SetAnswerOf(ns, typ, version, platform, otherVersion, otherPlatform string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := akey{ns, typ, version, platform}
	if otherVersion == "" {
		delete(o.answerOf, k)
		return
	}
	o.answerOf[k] = akey{ns, typ, otherVersion, otherPlatform}
}

// GateArchives gates archive responses that start from now on: each sends
// its headers (with the full Content-Length) and the first half of the
// body, flushes, then blocks until release is called, its request ends or
// the Origin closes. release is idempotent and also ungates later requests.
// ArchiveStarted, WaitArchiveStarted and WaitGated observe the gate.
func (o *Origin) GateArchives() (release func()) {
	g := &gate{release: make(chan struct{}), started: make(chan struct{})}
	o.mu.Lock()
	o.gate = g
	o.started = g.started
	o.mu.Unlock()
	return func() {
		g.releaseOnce.Do(func() { close(g.release) })
		o.mu.Lock()
		if o.gate == g {
			o.gate = nil
		}
		o.mu.Unlock()
	}
}

// ArchiveStarted returns a channel that is closed once an archive response
// gated by the latest GateArchives call has flushed its first half, i.e.
// the origin is mid-download. Before any GateArchives call it is never
// closed.
func (o *Origin) ArchiveStarted() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.started
}

// WaitArchiveStarted blocks until ArchiveStarted is closed or the Origin
// is closed.
func (o *Origin) WaitArchiveStarted() {
	select {
	case <-o.ArchiveStarted():
	case <-o.closed:
	}
}

// Gated returns how many archive responses are blocked at a gate right now.
func (o *Origin) Gated() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gated
}

// WaitGated blocks until at least n archive responses are blocked at a
// gate at the same time. It returns ctx's error if ctx ends first, and
// context.Canceled if the Origin closes.
func (o *Origin) WaitGated(ctx context.Context, n int) error {
	for {
		o.mu.Lock()
		got, changed := o.gated, o.gatedChanged
		o.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-o.closed:
			return context.Canceled
		}
	}
}

// addGated changes the count of gated responses and wakes WaitGated.
func (o *Origin) addGated(delta int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gated += delta
	close(o.gatedChanged)
	o.gatedChanged = make(chan struct{})
}

// SetArchiveRate throttles archive bodies to about bytesPerSecond per
// response; 0 means unlimited. It applies to responses in flight too.
func (o *Origin) SetArchiveRate(bytesPerSecond int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rate = bytesPerSecond
}

// SetLatency delays every response (of every kind, before any injected
// failure) by d; 0 removes the delay.
func (o *Origin) SetLatency(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.latency = d
}

// SetPackageHashes makes the "packages" entry of the package's platform,
// in the package JSON of every platform of its version (with
// Options.PackageHashes), list hashes instead of the true zh: and h1:;
// nil restores the true ones. SHA256SUMS and the archive stay true.
func (o *Origin) SetPackageHashes(ns, typ, version, platform string, hashes []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := akey{ns, typ, version, platform}
	if hashes == nil {
		delete(o.hashOverride, k)
		return
	}
	o.hashOverride[k] = slices.Clone(hashes)
}

// SetStatedSize makes the origin state n bytes as the size of the
// package's archive wherever it states one without downloading it: the
// "packages" entry's package_size (with Options.PackageHashes) and the
// total of the Content-Range of a first-byte request (ArchiveSize). 0
// restores the true size. The archive itself, its download's
// Content-Length and SHA256SUMS stay true.
func (o *Origin) SetStatedSize(ns, typ, version, platform string, n int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := akey{ns, typ, version, platform}
	if n == 0 {
		delete(o.sizeOverride, k)
		return
	}
	o.sizeOverride[k] = n
}

// SetArchiveLengthHidden makes archive downloads announce no length (no
// Content-Length: chunked), as some release hosts answer; false
// restores it. Writing the body is otherwise unchanged.
func (o *Origin) SetArchiveLengthHidden(hidden bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lengthHidden = hidden
}

// SetSignedAt makes the SHA256SUMS signature of a version state that it
// was made at t (its OpenPGP creation time); the zero t: when it is
// served (the default). t must not be in the future: verifiers refuse
// signatures made after their own clock.
func (o *Origin) SetSignedAt(ns, typ, version string, t time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if t.IsZero() {
		delete(o.signedAt, akey{ns, typ, version, ""})
		return
	}
	o.signedAt[akey{ns, typ, version, ""}] = t
}

// RemoveVersion takes version of NAMESPACE/TYPE out of the registry, as
// if it had not been published yet: it is no longer listed, and its
// download answers, SHA256SUMS and archives answer 404. AddProvider adds
// it again (listed last).
func (o *Origin) RemoveVersion(ns, typ, version string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.providers[pkey{ns, typ}]
	if p == nil {
		return
	}
	delete(p.plats, version)
	p.versions = slices.DeleteFunc(p.versions, func(v string) bool { return v == version })
}

// ExpireDownloadURLs makes every archive URL the download answers gave
// so far answer 403, as a pre-signed URL that expired does: the answers
// give URLs signed anew from then on, which the archives answer.
func (o *Origin) ExpireDownloadURLs() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.urlGen++
}
