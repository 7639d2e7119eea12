package fakeorigin

import (
	"bytes"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
)

// mux builds the routes of one server: registry endpoints and/or release files.
func (o *Origin) mux(releases, registry bool) *http.ServeMux {
	m := http.NewServeMux()
	if registry {
		m.HandleFunc("GET /.well-known/terraform.json", o.serveDiscovery)
		m.HandleFunc("GET /v1/providers/{ns}/{typ}/versions", o.serveVersions)
		m.HandleFunc("GET /v1/providers/{ns}/{typ}/{version}/download/{os}/{arch}", o.serveDownload)
	}
	if releases {
		m.HandleFunc("GET /releases/{ns}/{typ}/{version}/{file}", o.serveRelease)
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { writeError(w, http.StatusNotFound) })
	return m
}

func (o *Origin) serveDiscovery(w http.ResponseWriter, r *http.Request) {
	if !o.begin(w, r, Discovery, nil) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"providers.v1": "/v1/providers/"})
}

type platformJSON struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

type versionJSON struct {
	Version   string         `json:"version"`
	Protocols []string       `json:"protocols"`
	Platforms []platformJSON `json:"platforms"`
}

func (o *Origin) serveVersions(w http.ResponseWriter, r *http.Request) {
	if !o.begin(w, r, Versions, nil) {
		return
	}
	o.mu.Lock()
	p := o.providers[pkey{r.PathValue("ns"), r.PathValue("typ")}]
	var out []versionJSON
	if p != nil {
		out = []versionJSON{}
		for _, v := range p.versions {
			vj := versionJSON{Version: v, Protocols: []string{"5.0"}, Platforms: []platformJSON{}}
			for _, pl := range p.plats[v] {
				goos, arch := splitPlatform(pl)
				vj.Platforms = append(vj.Platforms, platformJSON{goos, arch})
			}
			out = append(out, vj)
		}
	}
	o.mu.Unlock()
	if out == nil {
		writeError(w, http.StatusNotFound)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"versions": out})
}

type gpgKeyJSON struct {
	KeyID      string `json:"key_id"`
	ASCIIArmor string `json:"ascii_armor"`
}

type downloadJSON struct {
	Protocols           []string `json:"protocols"`
	OS                  string   `json:"os"`
	Arch                string   `json:"arch"`
	Filename            string   `json:"filename"`
	DownloadURL         string   `json:"download_url"`
	ShasumsURL          string   `json:"shasums_url"`
	ShasumsSignatureURL string   `json:"shasums_signature_url"`
	Shasum              string   `json:"shasum"`
	SigningKeys         struct {
		GPGPublicKeys []gpgKeyJSON `json:"gpg_public_keys"`
	} `json:"signing_keys"`
}

func (o *Origin) serveDownload(w http.ResponseWriter, r *http.Request) {
	if !o.begin(w, r, Download, nil) {
		return
	}
	goos, arch := r.PathValue("os"), r.PathValue("arch")
	k := akey{r.PathValue("ns"), r.PathValue("typ"), r.PathValue("version"), goos + "_" + arch}
	o.mu.Lock()
	b := o.archiveLocked(k)
	shasum, over := o.shaOverride[k]
	o.mu.Unlock()
	if b == nil {
		writeError(w, http.StatusNotFound)
		return
	}
	if !over {
		shasum = sha(b)
	}
	base := fmt.Sprintf("https://%s/releases/%s/%s/%s/", o.DownloadAddr, k.ns, k.typ, k.version)
	d := downloadJSON{
		Protocols:           []string{"5.0"},
		OS:                  goos,
		Arch:                arch,
		Filename:            zipName(k.typ, k.version, k.platform),
		DownloadURL:         base + zipName(k.typ, k.version, k.platform),
		ShasumsURL:          base + sumsName(k.typ, k.version),
		ShasumsSignatureURL: base + sumsName(k.typ, k.version) + ".sig",
		Shasum:              shasum,
	}
	d.SigningKeys.GPGPublicKeys = []gpgKeyJSON{{KeyID: o.keyA.PrimaryKey.KeyIdString(), ASCIIArmor: o.armorA}}
	writeJSON(w, http.StatusOK, d)
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
		if o.begin(w, r, Archive, &k) {
			o.serveArchive(w, r, k)
		}
	default:
		writeError(w, http.StatusNotFound)
	}
}

// sumsLocked renders SHA256SUMS for one version; nil when unknown. Caller holds o.mu.
func (o *Origin) sumsLocked(ns, typ, version string) []byte {
	p := o.providers[pkey{ns, typ}]
	if p == nil {
		return nil
	}
	plats, ok := p.plats[version]
	if !ok {
		return nil
	}
	var lines []string
	for _, pl := range plats {
		k := akey{ns, typ, version, pl}
		if o.omit[k] {
			continue
		}
		lines = append(lines, sha(o.archiveLocked(k))+"  "+zipName(typ, version, pl)+"\n")
	}
	sort.Strings(lines)
	return []byte(strings.Join(lines, ""))
}

func (o *Origin) serveSums(w http.ResponseWriter, ns, typ, version string, sig bool) {
	o.mu.Lock()
	body := o.sumsLocked(ns, typ, version)
	signer := o.keyA
	if o.wrongKey {
		signer = o.keyB
	}
	o.mu.Unlock()
	if body == nil {
		writeError(w, http.StatusNotFound)
		return
	}
	if sig {
		var b bytes.Buffer
		if err := openpgp.DetachSign(&b, signer, bytes.NewReader(body), nil); err != nil {
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
	o.mu.Lock()
	body := o.archiveLocked(k)
	tamper := o.tamper[k]
	g := o.gate
	o.mu.Unlock()
	if body == nil {
		writeError(w, http.StatusNotFound)
		return
	}
	if tamper {
		body = bytes.Clone(body)
		body[tamperIndex(len(body))] ^= 0xff
	}
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	rest := body
	if g != nil {
		half := len(body) / 2
		if !o.writeBody(w, r, body[:half]) {
			return
		}
		http.NewResponseController(w).Flush() //nolint:errcheck // best effort
		o.startedOnce.Do(func() { close(o.started) })
		select {
		case <-g.ch:
		case <-r.Context().Done():
			return
		case <-o.closed:
			return
		}
		rest = body[half:]
	}
	o.writeBody(w, r, rest)
}

// tamperIndex picks the byte to flip: near the end, so a streaming client has
// received most of the body before the damage arrives.
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
		chunk := max(rate/20, 1) // ~50ms slices
		n := min(int64(len(b)), chunk)
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
