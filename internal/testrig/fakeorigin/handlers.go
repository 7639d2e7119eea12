package fakeorigin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// mux builds the routes of one server: the registry API and/or release files.
func (o *Origin) mux(registry, releases bool) *http.ServeMux {
	m := http.NewServeMux()
	if registry {
		m.HandleFunc("GET /.well-known/terraform.json", o.serveDiscovery)
		m.HandleFunc("GET /v1/providers/{ns}/{typ}/versions", o.serveVersions)
		m.HandleFunc("GET /v1/providers/{ns}/{typ}/{version}/download/{os}/{arch}", o.serveDownload)
		o.moduleRoutes(m)
	}
	if releases {
		m.HandleFunc("GET /releases/{ns}/{typ}/{version}/{file}", o.serveRelease)
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { writeError(w, http.StatusNotFound) })
	return m
}

// begin counts the hit, records its Authorization header, applies latency
// and the injected failures and bodies; it reports whether the real
// handler should go on.
func (o *Origin) begin(w http.ResponseWriter, r *http.Request, k Kind, ak *akey) bool {
	o.mu.Lock()
	o.hits[k]++
	if ak != nil {
		o.archiveHits[*ak]++
	}
	o.lastAuth[k] = append([]string{}, r.Header.Values("Authorization")...)
	lat, status := o.latency, o.down
	if status == 0 {
		if f := o.failNext[k]; f.n > 0 {
			status = f.status
			if f.n--; f.n == 0 {
				delete(o.failNext, k)
			} else {
				o.failNext[k] = f
			}
		}
	}
	if status == 0 {
		status = o.kindStatus[k]
	}
	retryAfter := o.retryAfter
	body, hasBody := o.kindBody[k]
	o.mu.Unlock()

	if !o.sleep(r.Context(), lat) {
		return false
	}
	if status != 0 {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		writeError(w, status)
		return false
	}
	if tok := o.opts.RequireToken; tok != "" && (k == Versions || k == Download) &&
		r.Header.Get("Authorization") != "Bearer "+tok {
		writeError(w, http.StatusUnauthorized)
		return false
	}
	if hasBody {
		if body.contentType != "" {
			w.Header().Set("Content-Type", body.contentType)
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body.body)))
		w.Write(body.body) //nolint:errcheck // client may be gone
		return false
	}
	return true
}

func (o *Origin) serveDiscovery(w http.ResponseWriter, r *http.Request) {
	if !o.begin(w, r, Discovery, nil) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"providers.v1": "/v1/providers/", "modules.v1": "/v1/modules/"})
}

func (o *Origin) serveVersions(w http.ResponseWriter, r *http.Request) {
	if !o.begin(w, r, Versions, nil) {
		return
	}
	o.mu.Lock()
	p := o.providers[pkey{r.PathValue("ns"), r.PathValue("typ")}]
	var out []registryjson.Version
	if p != nil {
		out = []registryjson.Version{}
		for _, v := range p.versions {
			vj := registryjson.Version{Version: v, Protocols: []string{"5.0"}, Platforms: []registryjson.Platform{}}
			for _, pl := range p.plats[v] {
				goos, arch := splitPlatform(pl)
				vj.Platforms = append(vj.Platforms, registryjson.Platform{OS: goos, Arch: arch})
			}
			out = append(out, vj)
		}
	}
	o.mu.Unlock()
	if out == nil {
		writeError(w, http.StatusNotFound)
		return
	}
	writeJSON(w, http.StatusOK, registryjson.Versions{Versions: out})
}

func (o *Origin) serveDownload(w http.ResponseWriter, r *http.Request) {
	if !o.begin(w, r, Download, nil) {
		return
	}
	goos, arch := r.PathValue("os"), r.PathValue("arch")
	k := akey{r.PathValue("ns"), r.PathValue("typ"), r.PathValue("version"), goos + "_" + arch}
	if o.archive(k) == nil {
		writeError(w, http.StatusNotFound)
		return
	}
	o.mu.Lock()
	if other, ok := o.answerOf[k]; ok {
		k = other
	}
	shasum, over := o.shaOverride[k]
	keys := []registryjson.GPGPublicKey{o.SigningKey()}
	if len(o.signingKeys) > 0 {
		keys = nil
		for _, a := range o.signingKeys {
			keys = append(keys, registryjson.GPGPublicKey{ASCIIArmor: a, Source: "fakeorigin"})
		}
	}
	o.mu.Unlock()
	b := o.archive(k)
	if b == nil {
		writeError(w, http.StatusNotFound)
		return
	}
	if !over {
		shasum = b.sha
	}
	base := releasePath(k.ns, k.typ, k.version)
	if o.opts.SeparateDownloadHost || !o.opts.RelativeDownloadURLs {
		base = "https://" + o.DownloadAddr + base
	}
	download := base + zipName(k.typ, k.version, k.platform)
	o.mu.Lock()
	if o.urlGen > 0 {
		download += fmt.Sprintf("?sig=%d", o.urlGen)
	}
	o.mu.Unlock()
	d := registryjson.Package{
		Protocols:           []string{"5.0"},
		OS:                  goos,
		Arch:                arch,
		Filename:            zipName(k.typ, k.version, k.platform),
		DownloadURL:         download,
		SHASumsURL:          base + sumsName(k.typ, k.version),
		SHASumsSignatureURL: base + sumsName(k.typ, k.version) + ".sig",
		SHASum:              shasum,
	}
	d.SigningKeys.GPGPublicKeys = keys
	if o.opts.PackageHashes {
		var err error
		if d.Packages, err = o.packageHashes(k.ns, k.typ, k.version); err != nil {
			writeError(w, http.StatusInternalServerError)
			return
		}
	}
	writeJSON(w, http.StatusOK, d)
}

// packageHashes is the "packages" of a version's package JSON: the zh:
// and h1: hashes and size of the archive of each of its platforms, as
// served (a replaced archive's own).
func (o *Origin) packageHashes(ns, typ, version string) (map[string]registryjson.PackageHashes, error) {
	o.mu.Lock()
	var plats []string
	if p := o.providers[pkey{ns, typ}]; p != nil {
		plats = slices.Clone(p.plats[version])
	}
	o.mu.Unlock()
	out := make(map[string]registryjson.PackageHashes, len(plats))
	for _, pl := range plats {
		b := o.archive(akey{ns, typ, version, pl})
		if b == nil {
			continue
		}
		h1, err := verify.H1(bytes.NewReader(b.data), int64(len(b.data)))
		if err != nil {
			return nil, err
		}
		hashes := []string{"zh:" + b.sha, h1}
		o.mu.Lock()
		if over, ok := o.hashOverride[akey{ns, typ, version, pl}]; ok {
			hashes = slices.Clone(over)
		}
		size := o.statedSize(akey{ns, typ, version, pl}, b)
		o.mu.Unlock()
		out[pl] = registryjson.PackageHashes{Hashes: hashes, PackageSize: size}
	}
	return out, nil
}

func (o *Origin) serveRelease(w http.ResponseWriter, r *http.Request) {
	ns, typ, version, file := r.PathValue("ns"), r.PathValue("typ"), r.PathValue("version"), r.PathValue("file")
	sums := sumsName(typ, version)
	zipPrefix := fmt.Sprintf("terraform-provider-%s_%s_", typ, version)
	switch {
	case file == sums:
		if o.begin(w, r, Shasums, nil) {
			o.serveSums(w, ns, typ, version, false)
		}
	case file == sums+".sig":
		if o.begin(w, r, Signature, nil) {
			o.serveSums(w, ns, typ, version, true)
		}
	case strings.HasPrefix(file, zipPrefix) && strings.HasSuffix(file, ".zip"):
		k := akey{ns, typ, version, strings.TrimSuffix(strings.TrimPrefix(file, zipPrefix), ".zip")}
		o.mu.Lock()
		expired := o.urlGen > 0 && r.URL.Query().Get("sig") != strconv.Itoa(o.urlGen)
		o.mu.Unlock()
		if expired {
			http.Error(w, "Request has expired", http.StatusForbidden)
			return
		}
		if r.Header.Get("Range") == "bytes=0-0" {
			if o.begin(w, r, ArchiveSize, nil) {
				o.serveFirstByte(w, k)
			}
			return
		}
		if o.begin(w, r, Archive, &k) {
			o.serveArchive(w, r, k)
		}
	default:
		writeError(w, http.StatusNotFound)
	}
}

// sums renders SHA256SUMS for one version (nil when the version is unknown)
// and picks the key to sign it with.
func (o *Origin) sums(ns, typ, version string) ([]byte, *openpgp.Entity, *packet.Config) {
	o.mu.Lock()
	var cfg *packet.Config
	if at, ok := o.signedAt[akey{ns, typ, version, ""}]; ok {
		cfg = &packet.Config{Time: func() time.Time { return at }}
	}
	signer := o.keyA
	if o.wrongKey {
		signer = o.keyB
	}
	var keys []akey
	p := o.providers[pkey{ns, typ}]
	if p == nil {
		o.mu.Unlock()
		return nil, signer, cfg
	}
	plats, ok := p.plats[version]
	extra := slices.Clone(o.extraSums[akey{ns, typ, version, ""}])
	for _, pl := range plats {
		if k := (akey{ns, typ, version, pl}); !o.omit[k] {
			keys = append(keys, k)
		}
	}
	o.mu.Unlock()
	if !ok {
		return nil, signer, cfg
	}
	lines := make([]string, 0, len(keys)+1)
	for _, k := range keys {
		if b := o.archive(k); b != nil {
			lines = append(lines, b.sha+"  "+zipName(typ, version, k.platform)+"\n")
		}
	}
	if o.opts.ReleaseManifest {
		lines = append(lines, sha([]byte(releaseManifest))+"  "+fmt.Sprintf("terraform-provider-%s_%s_manifest.json", typ, version)+"\n")
	}
	for _, l := range extra {
		lines = append(lines, l+"\n")
	}
	sort.Strings(lines)
	return []byte(strings.Join(lines, "")), signer, cfg
}

func (o *Origin) serveSums(w http.ResponseWriter, ns, typ, version string, sig bool) {
	body, signer, cfg := o.sums(ns, typ, version)
	if body == nil {
		writeError(w, http.StatusNotFound)
		return
	}
	if sig {
		var b bytes.Buffer
		if err := openpgp.DetachSign(&b, signer, bytes.NewReader(body), cfg); err != nil {
			writeError(w, http.StatusInternalServerError)
			return
		}
		body = b.Bytes()
		w.Header().Set("Content-Type", "application/octet-stream")
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body) //nolint:errcheck // client may be gone
}

func (o *Origin) serveArchive(w http.ResponseWriter, r *http.Request, k akey) {
	b := o.archive(k)
	if b == nil {
		writeError(w, http.StatusNotFound)
		return
	}
	body := b.data
	o.mu.Lock()
	tamper := o.tamper[k]
	g := o.gate
	hidden := o.lengthHidden
	o.mu.Unlock()
	if tamper {
		body = bytes.Clone(body)
		body[tamperIndex(len(body))] ^= 0xff
	}
	w.Header().Set("Content-Type", "application/zip")
	if !hidden {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(http.StatusOK)
	if hidden {
		// Headers out now: a small body written whole would otherwise
		// be given its length by the server.
		http.NewResponseController(w).Flush() //nolint:errcheck // the body's write reports a gone client
	}
	if g != nil {
		half := len(body) / 2
		if !o.writeBody(w, r, body[:half]) {
			return
		}
		if err := http.NewResponseController(w).Flush(); err != nil {
			return
		}
		o.addGated(1)
		g.startedOnce.Do(func() { close(g.started) })
		select {
		case <-g.release:
		case <-r.Context().Done():
		case <-o.closed:
		}
		o.addGated(-1)
		select {
		case <-g.release:
		default:
			return // the client left or the Origin closed: cut the body short
		}
		body = body[half:]
	}
	o.writeBody(w, r, body)
}

// statedSize is the size of archive b of k that the origin states
// without a download (SetStatedSize); o.mu is held.
func (o *Origin) statedSize(k akey, b *built) int64 {
	if n, ok := o.sizeOverride[k]; ok {
		return n
	}
	return int64(len(b.data))
}

// serveFirstByte answers a request for an archive's first byte, with
// its total size in Content-Range.
func (o *Origin) serveFirstByte(w http.ResponseWriter, k akey) {
	b := o.archive(k)
	if b == nil {
		writeError(w, http.StatusNotFound)
		return
	}
	o.mu.Lock()
	size := o.statedSize(k, b)
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-0/%d", size))
	w.Header().Set("Content-Length", "1")
	w.WriteHeader(http.StatusPartialContent)
	w.Write(b.data[:1])
}

// tamperIndex picks the byte to flip: near the end, so a streaming client
// has received most of the body before the damage arrives.
func tamperIndex(n int) int {
	if n > 64 {
		return n - 32
	}
	return n - 1
}

// writeBody writes b, honouring the archive rate; it reports success.
func (o *Origin) writeBody(w http.ResponseWriter, r *http.Request, b []byte) bool {
	rc := http.NewResponseController(w)
	for len(b) > 0 {
		o.mu.Lock()
		rate := o.rate
		o.mu.Unlock()
		if rate <= 0 {
			_, err := w.Write(b)
			return err == nil
		}
		n := min(int64(len(b)), max(rate/20, 1)) // about 50ms per slice
		start := time.Now()
		if _, err := w.Write(b[:n]); err != nil {
			return false
		}
		rc.Flush() //nolint:errcheck // best effort
		b = b[n:]
		wait := time.Duration(float64(n)/float64(rate)*float64(time.Second)) - time.Since(start)
		if !o.sleep(r.Context(), wait) {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b) //nolint:errcheck // client may be gone
}

func writeError(w http.ResponseWriter, status int) {
	writeJSON(w, status, map[string][]string{"errors": {http.StatusText(status)}})
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func splitPlatform(p string) (goos, arch string) {
	goos, arch, _ = strings.Cut(p, "_")
	return goos, arch
}

// releaseManifest is the manifest.json a release built for the registry
// carries, which its SHA256SUMS lists.
const releaseManifest = `{"version":1,"metadata":{"protocol_versions":["5.0"]}}` + "\n"

func zipName(typ, version, platform string) string {
	return fmt.Sprintf("terraform-provider-%s_%s_%s.zip", typ, version, platform)
}

func sumsName(typ, version string) string {
	return fmt.Sprintf("terraform-provider-%s_%s_SHA256SUMS", typ, version)
}

func releasePath(ns, typ, version string) string {
	return fmt.Sprintf("/releases/%s/%s/%s/", ns, typ, version)
}
