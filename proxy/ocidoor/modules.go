package ocidoor

// Module repositories: PREFIX-FOR-MODULES/HOST/NAMESPACE/NAME/SYSTEM, a
// tag per version, each tag an image manifest (artifactType
// application/vnd.opentofu.modulepkg) whose one archive/zip layer is the
// module package as a zip, as OpenTofu's oci:// module sources read it.

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// Modules is what the front door needs of the engine for module
// repositories, behind the package policy: *mirror/served.Packages
// implements it. Each of its calls decides whether the module's host is
// served and the policy lets it through, before anything else.
type Modules interface {
	// CheckModuleOrigin fails for a module of a host the engine does not
	// serve, or one the policy refuses whatever the version: asked only
	// where the door answers without another of these calls (the empty
	// config blob, referrers), as each of the others decides it itself.
	CheckModuleOrigin(m addrs.Module) error
	ModuleVersions(ctx context.Context, m addrs.Module) (*records.ModuleVersionList, modules.ListState, error)
	ModuleManifest(ctx context.Context, m addrs.Module, version versions.Version) (oci.Document, error)
	ModuleDocument(ctx context.Context, m addrs.Module, d digest.Digest) (oci.Document, error)
	ModuleBlob(ctx context.Context, m addrs.Module, d digest.Digest) (*modules.Zip, error)
}

// serveModule serves a request of a module repository, and reports
// whether name is one (false: the provider routes answer).
func (d *Door) serveModule(w http.ResponseWriter, r *http.Request, name, ref, route string) bool {
	if !strings.HasPrefix(name, d.cfg.Names.ModulePrefix()+"/") {
		return false
	}
	repo, err := d.cfg.Names.Parse(name)
	if err != nil || repo.Kind != oci.KindModule {
		return false
	}
	m := repo.Module
	if d.cfg.Modules == nil {
		d.fail(w, r, codeNameUnknown, http.StatusNotFound, fmt.Errorf("%q: module repositories are not served", name))
		return true
	}
	switch route {
	case oci.RouteTags:
		d.moduleTags(w, r, name, m)
	case oci.RouteManifests:
		d.moduleManifest(w, r, m, ref)
	case oci.RouteBlobs:
		d.moduleBlob(w, r, m, ref)
	case oci.RouteReferrers:
		// No artifact refers to another here: an empty index.
		if _, err := digest.Parse(ref); err != nil {
			d.fail(w, r, codeDigestInvalid, http.StatusBadRequest, err)
			return true
		}
		if !d.served(w, r, d.cfg.Modules.CheckModuleOrigin(m)) {
			return true
		}
		writeReferrers(w, r)
	default:
		return false
	}
	return true
}

// moduleTags serves NAME/tags/list: a tag per version of the module's
// list whose canonical form makes one.
func (d *Door) moduleTags(w http.ResponseWriter, r *http.Request, name string, m addrs.Module) {
	n, last, ok := d.tagPage(w, r)
	if !ok {
		return
	}
	list, st, err := d.cfg.Modules.ModuleVersions(r.Context(), m)
	if err != nil {
		d.failEngine(w, r, codeNameUnknown, err)
		return
	}
	all := make([]string, 0, len(list.Versions))
	for _, v := range list.Versions {
		if pv, err := addrs.ParseModuleVersion(v); err == nil {
			if tag, ok := oci.Tag(pv.String()); ok {
				all = append(all, tag)
			}
		}
	}
	writeTagPage(w, r, name, all, n, last, st.Stale)
}

// moduleManifest serves NAME/manifests/REF: by tag (the version's, or
// with a leading "v": oci.ParseModuleTag), the version's image
// manifest; by digest, any manifest of the module's versions whose zip
// is recorded.
func (d *Door) moduleManifest(w http.ResponseWriter, r *http.Request, m addrs.Module, ref string) {
	var doc oci.Document
	if strings.Contains(ref, ":") {
		dg, err := digest.Parse(ref)
		if err != nil {
			d.fail(w, r, codeDigestInvalid, http.StatusBadRequest, err)
			return
		}
		if doc, err = d.cfg.Modules.ModuleDocument(r.Context(), m, dg); err != nil {
			d.failEngine(w, r, codeManifestUnknown, err)
			return
		}
		w.Header()["Cache-Control"] = byDigest
	} else {
		version, ok := oci.ParseModuleTag(ref)
		if !ok {
			d.fail(w, r, codeManifestUnknown, http.StatusNotFound, fmt.Errorf("tag %.140q names no version", ref))
			return
		}
		var err error
		if doc, err = d.cfg.Modules.ModuleManifest(r.Context(), m, version); err != nil {
			d.failEngine(w, r, codeManifestUnknown, err)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
	}
	h := w.Header()
	h.Set("Docker-Content-Digest", doc.Digest.String())
	h.Set("ETag", `"`+doc.Digest.String()+`"`)
	writeTagged(w, r, doc.MediaType, doc.Bytes, d.AnswerError)
}

// moduleBlob serves NAME/blobs/DIGEST: the empty config, or a version's
// zip, from the cache (made again from the stored package when it was
// evicted), with Range and conditional requests.
func (d *Door) moduleBlob(w http.ResponseWriter, r *http.Request, m addrs.Module, ref string) {
	dg, err := digest.Parse(ref)
	if err != nil {
		d.fail(w, r, codeDigestInvalid, http.StatusBadRequest, err)
		return
	}
	h := w.Header()
	if dg == oci.EmptyConfig().Digest {
		if !d.served(w, r, d.cfg.Modules.CheckModuleOrigin(m)) {
			return
		}
		h.Set("Docker-Content-Digest", dg.String())
		h.Set("ETag", `"`+dg.String()+`"`)
		h["Cache-Control"] = immutable
		writeTagged(w, r, oci.MediaTypeEmptyConfig, oci.EmptyConfigBlob(), d.AnswerError)
		return
	}
	z, err := d.cfg.Modules.ModuleBlob(r.Context(), m, dg)
	if err != nil {
		d.failEngine(w, r, codeBlobUnknown, err)
		return
	}
	defer z.Close()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Docker-Content-Digest", dg.String())
	h.Set("ETag", `"`+dg.String()+`"`)
	h["Cache-Control"] = byDigest
	h.Set("X-Tfmirror-Cache", z.Source.String())
	proxy.ServeCached(w, r, z.ModTime, z.Content(), d.AnswerError)
}
