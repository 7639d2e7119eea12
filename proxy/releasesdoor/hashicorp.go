package releasesdoor

import (
	"net/http"
	"strings"

	"github.com/tfmirror/tfmirror/v2/proxy"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// HashiCorp's releases layout, as its API (index.json) and its listings
// show it.

type hcBuild struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	Filename string `json:"filename"`
	URL      string `json:"url"`
}

type hcVersion struct {
	Name              string    `json:"name"`
	Version           string    `json:"version"`
	Shasums           string    `json:"shasums"`
	ShasumsSignature  string    `json:"shasums_signature"`
	ShasumsSignatures []string  `json:"shasums_signatures"`
	Builds            []hcBuild `json:"builds"`
}

type hcProduct struct {
	Name     string               `json:"name"`
	Versions map[string]hcVersion `json:"versions"`
}

// hcVersionDoc is a version's document. Its signatures are those the door
// serves: the .sig, and the one named by keyID, the key that made it
// (releases.Releases.SignerKeyID), when known ("": not named).
func (d *Door) hcVersionDoc(base, product, version string, builds []releases.Build, keyID string) hcVersion {
	sums := releases.SumsName(releases.HashiCorp, product, version)
	v := hcVersion{Name: product, Version: version, Shasums: sums, ShasumsSignature: sums + ".sig", Builds: []hcBuild{}}
	if keyID != "" {
		v.ShasumsSignatures = append(v.ShasumsSignatures, sums+"."+keyID+".sig")
	}
	v.ShasumsSignatures = append(v.ShasumsSignatures, sums+".sig")
	for _, b := range builds {
		v.Builds = append(v.Builds, hcBuild{Name: product, Version: version, OS: b.OS, Arch: b.Arch, Filename: b.Filename,
			URL: base + "/" + product + "/" + version + "/" + b.Filename})
	}
	return v
}

// hashicorp serves /releases/hashicorp/ + parts.
func (d *Door) hashicorp(w http.ResponseWriter, r *http.Request, parts []string) {
	const pub = releases.HashiCorp
	ctx := r.Context()
	switch {
	case len(parts) == 0 || len(parts) == 1 && parts[0] == "":
		var links []link
		at := d.linkBase(r)
		for _, p := range d.rel.Products() {
			links = append(links, link{Href: at + "hashicorp/" + p + "/", Text: p})
		}
		d.writeListing(w, r, "HashiCorp releases", links, false)
	case len(parts) == 1, len(parts) == 2 && (parts[1] == "index.json" || parts[1] == ""):
		// PRODUCT/ and PRODUCT are the listing (tenv asks for the one
		// without the slash, as the releases site answers it), and
		// PRODUCT/index.json the product's document.
		product := parts[0]
		list, st, err := d.rel.Versions(ctx, pub, product)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		if len(parts) == 1 || parts[1] == "" {
			links := make([]link, 0, len(list.Versions))
			at := d.linkBase(r)
			for _, v := range list.Versions {
				links = append(links, link{Href: at + "hashicorp/" + product + "/" + v.Version + "/", Text: product + "_" + v.Version})
			}
			d.writeListing(w, r, product+" versions", links, st.Stale)
			return
		}
		doc := hcProduct{Name: product, Versions: make(map[string]hcVersion, len(list.Versions))}
		base := d.base(w, r, pub)
		for _, v := range list.Versions {
			doc.Versions[v.Version] = d.hcVersionDoc(base, product, v.Version, v.Builds, d.rel.SignerKeyID(pub, product, v.Version))
		}
		d.writeJSON(w, r, doc, st.Stale)
	case len(parts) == 3:
		product, version, file := parts[0], parts[1], parts[2]
		switch {
		case file == "" || file == "index.json":
			s, err := d.rel.Sums(ctx, pub, product, version)
			if err != nil {
				d.fail(w, r, err)
				return
			}
			doc := d.hcVersionDoc(d.base(w, r, pub), product, version, d.rel.ServedBuilds(s), s.KeyID)
			if file == "index.json" {
				d.writeJSON(w, r, doc, false)
				return
			}
			links := []link{}
			at := d.linkBase(r)
			for _, b := range doc.Builds {
				links = append(links, link{Href: at + "hashicorp/" + product + "/" + version + "/" + b.Filename, Text: b.Filename})
			}
			for _, n := range append([]string{doc.Shasums}, doc.ShasumsSignatures...) {
				links = append(links, link{Href: at + "hashicorp/" + product + "/" + version + "/" + n, Text: n})
			}
			d.writeListing(w, r, product+" "+version, links, false)
		case strings.HasSuffix(file, ".zip"):
			d.serveArchive(w, r, pub, product, version, file)
		default:
			d.serveDocument(w, r, pub, product, version, file)
		}
	default:
		d.fail(w, r, notFound())
	}
}

func (d *Door) serveDocument(w http.ResponseWriter, r *http.Request, pub releases.Publisher, product, version, file string) {
	body, err := d.rel.Document(r.Context(), pub, product, version, file)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", proxy.PackageCacheControl) // the policy may refuse the version on a reload
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	if strings.HasSuffix(file, "SHA256SUMS") {
		h.Set("Content-Type", "text/plain; charset=utf-8")
	}
	proxy.ServeDocument(w, r, body, d.fail)
}
