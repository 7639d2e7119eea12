package fakeorigin

// A stand-in for the CLI release origins: HashiCorp's releases site
// (under /hc/) and OpenTofu's GitHub release downloads with its version
// list (under /tofu/), each publisher signing with a key of its own.

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// Releases is a running stand-in for the CLI release origins, on one TLS
// server on 127.0.0.1. Its methods are safe for concurrent use.
type Releases struct {
	// URL is "https://127.0.0.1:port"; HashiCorpURL and the OpenTofu URLs
	// are the bases to configure.
	URL, HashiCorpURL, OpenTofuDownloadURL, OpenTofuAPIURL string
	// CACertPEM is the PEM of the CA that signed the server certificate.
	CACertPEM []byte
	// HashiCorpKey and OpenTofuKey are the armored public keys that
	// verify each publisher's SHA256SUMS; HashiCorpKeyID is the former's
	// short ID (upper-case hex).
	HashiCorpKey, OpenTofuKey, HashiCorpKeyID string
	// OtherKey is the armored public key of the key nobody trusts
	// (SignWithOtherKey, SignPlainWithOtherKey), for a test that trusts
	// it: the other key of a rotation. OtherKeyID is its short ID.
	OtherKey, OtherKeyID string

	srv   *http.Server
	hc    *openpgp.Entity
	tofu  *openpgp.Entity
	other *openpgp.Entity

	mu       sync.Mutex
	products map[string][]relVersion // "hashicorp/terraform", "opentofu/tofu"
	hits     map[string]int          // by path
	down     bool
	tamper   map[string]bool // by archive file name
	badSig   map[string]bool // by SHA256SUMS name: signed by another key
	// rotated, by SHA256SUMS name: its .sig made by another key, its
	// key-ID-named .KEYID.sig still by HashiCorp's (a key rotation).
	rotated  map[string]bool
	signedAt time.Time
	// versionSignedAt overrides signedAt, by SHA256SUMS name.
	versionSignedAt map[string]time.Time
	pad             int64             // SetArchivePadding
	noLength        bool              // SetArchivesWithoutLength
	replaced        map[string][]byte // SetArchiveBytes, by file name
	// replayed answers a SHA256SUMS (by its name) with another
	// release's, signed (ReplaySums).
	replayed map[string]relRef
	// listed are extra file names api.json lists, by OpenTofu version
	// (ListFiles).
	listed map[string][]string
	// withheld are file names answered 404 and left out of api.json
	// (Withhold).
	withheld map[string]bool
	// unlisted are versions left out of the version lists, by
	// "pub/product/version" (Unlist); their files are still served.
	unlisted map[string]bool
	// listBody replaces a version list with other bytes, by
	// "pub/product" (SetListBody).
	listBody map[string][]byte
	// cosign signs OpenTofu's cosign files (cosign.go); cosignSig keeps
	// the signatures made, cosignBody replaces a file's bytes, by file
	// name (SetCosignFile).
	cosign     *cosignSigner
	cosignSig  map[string][]byte
	cosignBody map[string][]byte
	// delay is how long each answer whose path ends in delaySuffix
	// waits before it is written (SetDelay).
	delay       time.Duration
	delaySuffix string
}

// relRef names a release of a publisher's product.
type relRef struct{ pub, product, version string }

type relVersion struct {
	version   string
	platforms []string
}

// ReleasesOptions vary the stand-in.
type ReleasesOptions struct {
	// HashiCorpShortID signs HashiCorp's releases with a key made for
	// tests (testdata/hashicorp-shortid-standin.asc, private key
	// included) whose short key ID is HashiCorp's, 72D7468F: the last 32
	// bits of its fingerprint were searched for, nothing else of it is
	// HashiCorp's. Some installers (tfswitch, tfenv, js-releases) ask
	// for the signature file named by that ID whatever key they check it
	// with; with this key they can install from the stand-in.
	HashiCorpShortID bool
}

//go:embed testdata/hashicorp-shortid-standin.asc
var hashiCorpShortIDKey string

// StartReleases starts the stand-in. Call Close when done.
func StartReleases() (*Releases, error) { return StartReleasesWith(ReleasesOptions{}) }

// StartReleasesWith starts the stand-in with opts. Call Close when done.
func StartReleasesWith(opts ReleasesOptions) (*Releases, error) {
	r := &Releases{products: map[string][]relVersion{}, hits: map[string]int{}, tamper: map[string]bool{},
		badSig: map[string]bool{}, versionSignedAt: map[string]time.Time{}, signedAt: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		cosignSig: map[string][]byte{}, cosignBody: map[string][]byte{}}
	var err error
	if r.cosign, err = newCosignSigner(); err != nil {
		return nil, err
	}
	if opts.HashiCorpShortID {
		r.hc, r.HashiCorpKey, err = armoredSigningKey(hashiCorpShortIDKey)
	} else {
		r.hc, r.HashiCorpKey, err = newSigningKey("stand-in HashiCorp releases", "hc@fakeorigin.invalid")
	}
	if err != nil {
		return nil, err
	}
	if r.tofu, r.OpenTofuKey, err = newSigningKey("stand-in OpenTofu releases", "tofu@fakeorigin.invalid"); err != nil {
		return nil, err
	}
	if r.other, r.OtherKey, err = newSigningKey("someone else", "other@fakeorigin.invalid"); err != nil {
		return nil, err
	}
	r.OtherKeyID = strings.ToUpper(r.other.PrimaryKey.KeyIdShortString())
	r.HashiCorpKeyID = strings.ToUpper(r.hc.PrimaryKey.KeyIdShortString())
	cert, caPEM, _, err := newTLS(nil)
	if err != nil {
		return nil, err
	}
	r.CACertPEM = caPEM
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r.URL = "https://" + ln.Addr().String()
	r.HashiCorpURL = r.URL + "/hc/"
	r.OpenTofuDownloadURL = r.URL + "/tofu/download/"
	r.OpenTofuAPIURL = r.URL + "/tofu/api.json"
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), TLSConfig: tlsConfig(cert),
		ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go r.srv.ServeTLS(ln, "", "") //nolint:errcheck // ErrServerClosed after Close
	return r, nil
}

// SetDelay has each answer whose path ends in suffix wait d before it is
// written (a slow origin that still answers); d 0 ends it.
func (r *Releases) SetDelay(suffix string, d time.Duration) {
	r.mu.Lock()
	r.delaySuffix, r.delay = suffix, d
	r.mu.Unlock()
}

// Close stops the server.
func (r *Releases) Close() { r.srv.Close() }

// Add publishes a version of product ("terraform", "tofu", ...) of
// publisher pub ("hashicorp" or "opentofu") for platforms (os_arch).
func (r *Releases) Add(pub, product, version string, platforms ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := pub + "/" + product
	r.products[k] = append(r.products[k], relVersion{version, platforms})
}

// Program is the content of the executable in an archive: a shell script
// that prints the version as the real program's "version" does.
func Program(product, version, platform string) []byte {
	name := "Terraform"
	if product == "tofu" {
		name = "OpenTofu"
	} else if product != "terraform" {
		name = product
	}
	return fmt.Appendf(nil, "#!/bin/sh\necho '%s v%s'\necho 'on %s'\n", name, version, platform)
}

// ReleaseArchive is the zip of one platform of a version: the program
// named as the product, mode 0755.
func ReleaseArchive(product, version, platform string) []byte {
	return releaseArchive(product, version, platform, 0)
}

// SetArchivesWithoutLength makes every archive served from now on be
// sent without a Content-Length (chunked), as some origins stream a file
// they are still fetching themselves.
func (r *Releases) SetArchivesWithoutLength(on bool) { r.mu.Lock(); r.noLength = on; r.mu.Unlock() }

// SetArchivePadding makes every archive served from now on carry n bytes
// of stored padding besides the program (for benchmarks); 0: none.
func (r *Releases) SetArchivePadding(n int64) { r.mu.Lock(); r.pad = n; r.mu.Unlock() }

// SetArchiveBytes makes the stand-in publish data as the archive of a
// platform of a version, listed in its signed SHA256SUMS: a release its
// publisher signed, whatever it holds.
func (r *Releases) SetArchiveBytes(product, version, platform string, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.replaced == nil {
		r.replaced = map[string][]byte{}
	}
	r.replaced[ArchiveName(product, version, platform)] = data
}

// Archive is the archive the stand-in serves (with its padding).
func (r *Releases) Archive(product, version, platform string) []byte {
	r.mu.Lock()
	pad, data := r.pad, r.replaced[ArchiveName(product, version, platform)]
	r.mu.Unlock()
	if data != nil {
		return data
	}
	return releaseArchive(product, version, platform, pad)
}

func releaseArchive(product, version, platform string, pad int64) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: product, Method: zip.Deflate, Modified: fixedTime()}
	h.SetMode(0o755)
	f, err := zw.CreateHeader(h)
	if err != nil {
		panic(err)
	}
	f.Write(Program(product, version, platform)) //nolint:errcheck // memory
	if pad > 0 {
		ph := &zip.FileHeader{Name: "padding.bin", Method: zip.Store, Modified: fixedTime()}
		pf, err := zw.CreateHeader(ph)
		if err != nil {
			panic(err)
		}
		seed := sha256.Sum256([]byte(product + "/" + version + "/" + platform))
		data := make([]byte, pad)
		mrand.NewChaCha8(seed).Read(data) //nolint:errcheck // never fails
		pf.Write(data)                    //nolint:errcheck // memory
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// ArchiveName is the publisher's name of a platform's archive.
func ArchiveName(product, version, platform string) string {
	return product + "_" + version + "_" + platform + ".zip"
}

// ArchiveSHA256 is the archive's sha256 as its SHA256SUMS lists it.
func ArchiveSHA256(product, version, platform string) string {
	s := sha256.Sum256(ReleaseArchive(product, version, platform))
	return hex.EncodeToString(s[:])
}

// Hits counts the requests for path ("/hc/terraform/1.6.0/terraform_1.6.0_linux_amd64.zip").
func (r *Releases) Hits(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits[path]
}

// TotalHits counts every request.
func (r *Releases) TotalHits() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, h := range r.hits {
		n += h
	}
	return n
}

// SetDown makes every answer 503 (true) or normal again.
func (r *Releases) SetDown(down bool) { r.mu.Lock(); r.down = down; r.mu.Unlock() }

// Tamper serves the archive name with one byte changed from now on.
func (r *Releases) Tamper(name string) { r.mu.Lock(); r.tamper[name] = true; r.mu.Unlock() }

// SignWithOtherKey makes the signature of the SHA256SUMS sumsName come
// from a key nobody trusts.
func (r *Releases) SignWithOtherKey(sumsName string) {
	r.mu.Lock()
	r.badSig[sumsName] = true
	r.mu.Unlock()
}

// SignPlainWithOtherKey makes the plain signature of the SHA256SUMS
// sumsName (HashiCorp's .sig) come from a key nobody trusts, while the
// one named by HashiCorp's key ID (.KEYID.sig) is still made by that
// key: HashiCorp's layout during a key rotation, .sig made by the key
// that is not (or no longer) the one a mirror trusts.
func (r *Releases) SignPlainWithOtherKey(sumsName string) {
	r.mu.Lock()
	if r.rotated == nil {
		r.rotated = map[string]bool{}
	}
	r.rotated[sumsName] = true
	r.mu.Unlock()
}

// ReplaySums makes the stand-in answer the SHA256SUMS of version of
// product (and its signatures) with those of another release it
// publishes, fromProduct fromVersion: a document and a signature the
// publisher really made, for another release.
func (r *Releases) ReplaySums(pub, product, version, fromProduct, fromVersion string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.replayed == nil {
		r.replayed = map[string]relRef{}
	}
	r.replayed[product+"_"+version+"_SHA256SUMS"] = relRef{pub, fromProduct, fromVersion}
}

// ListFiles makes OpenTofu's api.json list names among version's files
// too, whatever they are: the unsigned list's word.
func (r *Releases) ListFiles(version string, names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listed == nil {
		r.listed = map[string][]string{}
	}
	r.listed[version] = append(r.listed[version], names...)
}

// Withhold makes the stand-in lack the file name of a release (true:
// answered 404 and left out of api.json's files, as a release published
// without it) or have it again (false: one published late).
func (r *Releases) Withhold(name string, withheld bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.withheld == nil {
		r.withheld = map[string]bool{}
	}
	r.withheld[name] = withheld
}

// SetListBody makes the stand-in answer the version list of product of
// publisher pub (HashiCorp's PRODUCT/index.json, OpenTofu's api.json)
// with body, whatever it is; nil answers the list again.
func (r *Releases) SetListBody(pub, product string, body []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listBody == nil {
		r.listBody = map[string][]byte{}
	}
	r.listBody[pub+"/"+product] = body
}

// rawList answers the list of pub's product with the bytes SetListBody
// gave it, if any.
func (r *Releases) rawList(w http.ResponseWriter, pub, product string) bool {
	r.mu.Lock()
	body := r.listBody[pub+"/"+product]
	r.mu.Unlock()
	if body == nil {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body) //nolint:errcheck
	return true
}

// SetSignedAt sets the creation time of the signatures made from now on.
func (r *Releases) SetSignedAt(t time.Time) { r.mu.Lock(); r.signedAt = t; r.mu.Unlock() }

// SetVersionSignedAt sets the creation time of the signatures of one
// version's SHA256SUMS made from now on, whatever SetSignedAt says: a
// version released at another time than the others.
func (r *Releases) SetVersionSignedAt(product, version string, t time.Time) {
	r.mu.Lock()
	r.versionSignedAt[product+"_"+version+"_SHA256SUMS"] = t
	r.mu.Unlock()
}

func (r *Releases) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.hits[req.URL.Path]++
	down, delay := r.down, time.Duration(0)
	if r.delaySuffix != "" && strings.HasSuffix(req.URL.Path, r.delaySuffix) {
		delay = r.delay
	}
	r.mu.Unlock()
	if down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-req.Context().Done():
			return
		}
	}
	p := req.URL.Path
	switch {
	case p == "/tofu/api.json":
		r.tofuList(w)
	case strings.HasPrefix(p, "/tofu/download/v"):
		rest := strings.TrimPrefix(p, "/tofu/download/v")
		version, file, ok := strings.Cut(rest, "/")
		if !ok || !r.has("opentofu", "tofu", version) {
			http.NotFound(w, req)
			return
		}
		r.file(w, req, "opentofu", "tofu", version, file)
	case strings.HasPrefix(p, "/hc/"):
		parts := strings.Split(strings.TrimPrefix(p, "/hc/"), "/")
		switch {
		case len(parts) == 2 && parts[1] == "index.json":
			r.hcProduct(w, parts[0])
		case len(parts) == 2 && parts[1] == "":
			r.hcProductHTML(w, parts[0])
		case len(parts) == 3 && r.has("hashicorp", parts[0], parts[1]):
			switch parts[2] {
			case "index.json":
				json.NewEncoder(w).Encode(r.hcVersion(parts[0], parts[1])) //nolint:errcheck
			case "":
				r.hcVersionHTML(w, parts[0], parts[1])
			default:
				r.file(w, req, "hashicorp", parts[0], parts[1], parts[2])
			}
		default:
			http.NotFound(w, req)
		}
	default:
		http.NotFound(w, req)
	}
}

func (r *Releases) has(pub, product, version string) bool {
	_, ok := r.version(pub, product, version)
	return ok
}

func (r *Releases) version(pub, product, version string) (relVersion, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.products[pub+"/"+product] {
		if v.version == version {
			return v, true
		}
	}
	return relVersion{}, false
}

func (r *Releases) list(pub, product string) []relVersion {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(r.products[pub+"/"+product]), func(v relVersion) bool {
		return r.unlisted[pub+"/"+product+"/"+v.version]
	})
}

// Unlist leaves a version out of the version lists (true: a list that
// lacks it for a while, as an origin's glitch answers one) or lists it
// again (false); its files are served all the same.
func (r *Releases) Unlist(pub, product, version string, unlisted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unlisted == nil {
		r.unlisted = map[string]bool{}
	}
	r.unlisted[pub+"/"+product+"/"+version] = unlisted
}

// Sums is the SHA256SUMS of a version.
func (r *Releases) Sums(pub, product, version string) []byte {
	v, _ := r.version(pub, product, version)
	var b strings.Builder
	names := map[string]string{}
	for _, pl := range v.platforms {
		sum := sha256.Sum256(r.Archive(product, version, pl))
		names[ArchiveName(product, version, pl)] = hex.EncodeToString(sum[:])
	}
	keys := make([]string, 0, len(names))
	for n := range names {
		keys = append(keys, n)
	}
	sort.Strings(keys)
	for _, n := range keys {
		fmt.Fprintf(&b, "%s  %s\n", names[n], n)
	}
	return []byte(b.String())
}

func (r *Releases) signature(pub, sumsName, file string, doc []byte) []byte {
	r.mu.Lock()
	key := r.hc
	if pub == "opentofu" {
		key = r.tofu
	}
	if r.badSig[sumsName] || r.rotated[sumsName] && file == sumsName+".sig" {
		key = r.other
	}
	at := r.signedAt
	if t, ok := r.versionSignedAt[sumsName]; ok {
		at = t
	}
	r.mu.Unlock()
	var sig bytes.Buffer
	if err := openpgp.DetachSign(&sig, key, bytes.NewReader(doc), &packet.Config{Time: func() time.Time { return at }}); err != nil {
		panic(err)
	}
	return sig.Bytes()
}

func (r *Releases) file(w http.ResponseWriter, req *http.Request, pub, product, version, file string) {
	sums := product + "_" + version + "_SHA256SUMS"
	doc, signedName := r.Sums(pub, product, version), sums
	r.mu.Lock()
	from, replayed := r.replayed[sums]
	r.mu.Unlock()
	if replayed {
		doc, signedName = r.Sums(from.pub, from.product, from.version), from.product+"_"+from.version+"_SHA256SUMS"
	}
	r.mu.Lock()
	withheld := r.withheld[file]
	r.mu.Unlock()
	switch {
	case withheld:
		http.NotFound(w, req)
		return
	case file == sums:
		w.Write(doc) //nolint:errcheck
		return
	case pub == "hashicorp" && (file == sums+".sig" || file == sums+"."+r.HashiCorpKeyID+".sig"),
		pub == "opentofu" && file == sums+".gpgsig":
		w.Write(r.signature(pub, signedName, signedName+strings.TrimPrefix(file, sums), doc)) //nolint:errcheck
		return
	case pub == "opentofu" && (file == sums+".sig" || file == sums+".pem"):
		w.Write(r.cosignFile(file, doc)) //nolint:errcheck
		return
	}
	v, _ := r.version(pub, product, version)
	for _, pl := range v.platforms {
		if file != ArchiveName(product, version, pl) {
			continue
		}
		data := r.Archive(product, version, pl)
		r.mu.Lock()
		tampered := r.tamper[file]
		r.mu.Unlock()
		if tampered {
			data = bytes.Clone(data)
			data[len(data)/2] ^= 0xff
		}
		r.mu.Lock()
		noLength := r.noLength
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/zip")
		if noLength {
			// Two writes, flushed between: chunked, with no length.
			w.Write(data[:len(data)/2])           //nolint:errcheck
			http.NewResponseController(w).Flush() //nolint:errcheck
			w.Write(data[len(data)/2:])           //nolint:errcheck
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.Write(data) //nolint:errcheck
		return
	}
	http.NotFound(w, req)
}

type hcBuild struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	Filename string `json:"filename"`
	URL      string `json:"url"`
}

type hcVersionDoc struct {
	Name              string    `json:"name"`
	Version           string    `json:"version"`
	Shasums           string    `json:"shasums"`
	ShasumsSignature  string    `json:"shasums_signature"`
	ShasumsSignatures []string  `json:"shasums_signatures"`
	Builds            []hcBuild `json:"builds"`
}

func (r *Releases) hcVersion(product, version string) hcVersionDoc {
	v, _ := r.version("hashicorp", product, version)
	sums := product + "_" + version + "_SHA256SUMS"
	d := hcVersionDoc{Name: product, Version: version, Shasums: sums, ShasumsSignature: sums + ".sig",
		ShasumsSignatures: []string{sums + "." + r.HashiCorpKeyID + ".sig", sums + ".sig"}}
	for _, pl := range v.platforms {
		os, arch, _ := strings.Cut(pl, "_")
		d.Builds = append(d.Builds, hcBuild{Name: product, Version: version, OS: os, Arch: arch,
			Filename: ArchiveName(product, version, pl), URL: r.HashiCorpURL + product + "/" + version + "/" + ArchiveName(product, version, pl)})
	}
	return d
}

func (r *Releases) hcProduct(w http.ResponseWriter, product string) {
	if r.rawList(w, "hashicorp", product) {
		return
	}
	doc := struct {
		Name     string                  `json:"name"`
		Versions map[string]hcVersionDoc `json:"versions"`
	}{Name: product, Versions: map[string]hcVersionDoc{}}
	for _, v := range r.list("hashicorp", product) {
		doc.Versions[v.version] = r.hcVersion(product, v.version)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(doc) //nolint:errcheck
}

func (r *Releases) hcProductHTML(w http.ResponseWriter, product string) {
	w.Header().Set("Content-Type", "text/html")
	fmt.Fprint(w, "<html><body><ul>\n")
	for _, v := range r.list("hashicorp", product) {
		fmt.Fprintf(w, "<li><a href=\"/hc/%s/%s/\">%s_%s</a></li>\n", product, v.version, html.EscapeString(product), v.version)
	}
	fmt.Fprint(w, "</ul></body></html>\n")
}

func (r *Releases) hcVersionHTML(w http.ResponseWriter, product, version string) {
	w.Header().Set("Content-Type", "text/html")
	fmt.Fprint(w, "<html><body><ul>\n")
	for _, b := range r.hcVersion(product, version).Builds {
		fmt.Fprintf(w, "<li><a href=\"/hc/%s/%s/%s\">%s</a></li>\n", product, version, b.Filename, b.Filename)
	}
	fmt.Fprint(w, "</ul></body></html>\n")
}

func (r *Releases) tofuList(w http.ResponseWriter) {
	if r.rawList(w, "opentofu", "tofu") {
		return
	}
	type ver struct {
		ID    string   `json:"id"`
		Files []string `json:"files"`
	}
	doc := struct {
		Versions []ver `json:"versions"`
	}{Versions: []ver{}}
	for _, v := range r.list("opentofu", "tofu") {
		sums := "tofu_" + v.version + "_SHA256SUMS"
		files := []string{sums, sums + ".gpgsig", sums + ".sig", sums + ".pem"}
		for _, pl := range v.platforms {
			files = append(files, ArchiveName("tofu", v.version, pl))
		}
		r.mu.Lock()
		files = append(files, r.listed[v.version]...)
		files = slices.DeleteFunc(files, func(f string) bool { return r.withheld[f] })
		r.mu.Unlock()
		doc.Versions = append(doc.Versions, ver{ID: v.version, Files: files})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(doc) //nolint:errcheck
}

// armoredSigningKey reads an armored private key, returning it and its
// armored public key.
func armoredSigningKey(armored string) (*openpgp.Entity, string, error) {
	el, err := openpgp.ReadArmoredKeyRing(strings.NewReader(armored))
	if err != nil || len(el) != 1 || el[0].PrivateKey == nil {
		return nil, "", fmt.Errorf("fakeorigin: test key: %v", err)
	}
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	if err != nil {
		return nil, "", err
	}
	if err := el[0].Serialize(w); err != nil {
		return nil, "", err
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	return el[0], b.String(), nil
}
