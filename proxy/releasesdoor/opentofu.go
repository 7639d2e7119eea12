package releasesdoor

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/tfmirror/tfmirror/v2/releases"
)

// OpenTofu's release files, as GitHub serves them (vVERSION/FILE), the
// version list its installers read (get.opentofu.org/tofu/api.json), and
// the tag of the latest release (latest), as GitHub's API answers it.

type tofuVersion struct {
	ID    string   `json:"id"`
	Files []string `json:"files"`
}

type tofuList struct {
	Versions []tofuVersion `json:"versions"`
}

// githubRelease is what OpenTofu's install script reads of GitHub's
// latest release (api.github.com/repos/opentofu/opentofu/releases/latest)
// when it is given no version.
type githubRelease struct {
	TagName string `json:"tag_name"`
}

// opentofu serves /releases/opentofu/ + parts.
func (d *Door) opentofu(w http.ResponseWriter, r *http.Request, parts []string) {
	const pub, product = releases.OpenTofu, releases.TofuProduct
	ctx := r.Context()
	switch {
	case len(parts) == 1 && (parts[0] == "api.json" || parts[0] == ""),
		len(parts) == 2 && parts[0] == product && parts[1] == "api.json":
		list, st, err := d.rel.Versions(ctx, pub, product)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		if parts[0] == "" {
			links := make([]link, 0, len(list.Versions))
			at := d.linkBase(r)
			for _, v := range list.Versions {
				links = append(links, link{Href: at + "opentofu/v" + v.Version + "/", Text: "v" + v.Version})
			}
			d.writeListing(w, r, "OpenTofu releases", links, st.Stale)
			return
		}
		doc := tofuList{Versions: make([]tofuVersion, 0, len(list.Versions))}
		for _, v := range list.Versions {
			files := []string{} // only what the door serves: the publisher's other files would be answered 404
			for _, f := range v.Files {
				if releases.Serves(pub, product, v.Version, f) {
					files = append(files, f)
				}
			}
			doc.Versions = append(doc.Versions, tofuVersion{ID: v.Version, Files: files})
		}
		d.writeJSON(w, r, doc, st.Stale)
	case len(parts) == 1 && parts[0] == "latest":
		list, st, err := d.rel.Versions(ctx, pub, product)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		for _, v := range list.Versions { // newest first, held versions left out
			if !releases.PreRelease(v.Version) {
				d.writeJSON(w, r, githubRelease{TagName: "v" + v.Version}, st.Stale)
				return
			}
		}
		d.fail(w, r, fmt.Errorf("%w: no release that is not a pre-release", releases.ErrNotFound))
	case len(parts) == 2 && strings.HasPrefix(parts[0], "v"):
		version, file := strings.TrimPrefix(parts[0], "v"), parts[1]
		switch {
		case file == "":
			s, err := d.rel.Sums(ctx, pub, product, version)
			if err != nil {
				d.fail(w, r, err)
				return
			}
			sums := releases.SumsName(pub, product, version)
			links := []link{}
			at := d.linkBase(r)
			for _, b := range d.rel.ServedBuilds(s) {
				links = append(links, link{Href: at + "opentofu/v" + version + "/" + b.Filename, Text: b.Filename})
			}
			for _, n := range []string{sums, sums + ".gpgsig"} {
				links = append(links, link{Href: at + "opentofu/v" + version + "/" + n, Text: n})
			}
			d.writeListing(w, r, "OpenTofu "+version, links, false)
		case strings.HasSuffix(file, ".zip"):
			d.serveArchive(w, r, pub, product, version, file)
		default:
			d.serveDocument(w, r, pub, product, version, file)
		}
	default:
		d.fail(w, r, notFound())
	}
}
