package proxy

import (
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"slices"
	"sync"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// renderMemoMaxEntries bounds each kind of remembered document: with more
// than this, one is dropped for every one added.
const renderMemoMaxEntries = 4096

// renderMemo remembers the index.json and VERSION.json documents last
// rendered for each provider and version, so that warm requests do not
// render and hash them again. The engine's records are shared and never
// modified, so a document made from a version list stays right for as
// long as the engine hands out that same list; VERSION.json is made again
// when the archives (and their h1: hashes, which appear once an archive
// is cached and go when it is evicted) differ from the last call.
type renderMemo struct {
	mu       sync.Mutex
	indexes  map[string]renderedIndex   // by provider address
	regLists map[string]renderedIndex   // registry versions answers, by provider address
	versions map[string]renderedVersion // by provider address and version
}

type renderedIndex struct {
	list *records.VersionList
	doc  document
}

type renderedVersion struct {
	archives []mirror.PlatformArchive
	doc      document
}

func newRenderMemo() *renderMemo {
	return &renderMemo{indexes: make(map[string]renderedIndex), regLists: make(map[string]renderedIndex),
		versions: make(map[string]renderedVersion)}
}

// index returns p's index.json document made from list.
func (m *renderMemo) index(p addrs.Provider, list *records.VersionList) document {
	return m.listDoc(m.indexes, p, list, func() document { return newDocument(renderJSON(newIndexDocument(list))) })
}

// registryVersions returns p's registry versions answer made from list by
// render.
func (m *renderMemo) registryVersions(p addrs.Provider, list *records.VersionList, render func() document) document {
	return m.listDoc(m.regLists, p, list, render)
}

// listDoc returns the document of table made from list for p, rendering
// it anew when the list is not the one it was made from.
func (m *renderMemo) listDoc(table map[string]renderedIndex, p addrs.Provider, list *records.VersionList, render func() document) document {
	return memoized(&m.mu, table, p.String(),
		func(r renderedIndex) bool { return r.list == list },
		func() renderedIndex { return renderedIndex{list: list, doc: render()} }).doc
}

// version returns the VERSION.json document of version v of p made from pkg.
func (m *renderMemo) version(p addrs.Provider, v versions.Version, pkg *mirror.Package) document {
	return memoized(&m.mu, m.versions, p.String()+"/"+v.String(),
		func(r renderedVersion) bool { return slices.Equal(r.archives, pkg.Archives) },
		func() renderedVersion {
			return renderedVersion{
				archives: slices.Clone(pkg.Archives),
				doc:      newDocument(renderJSON(newVersionDocument(p.Type, v, pkg.Archives))),
			}
		}).doc
}

// memoized returns table[key] while holds says it is still right, and
// otherwise the entry build returns, remembered. mu guards table; build
// runs without it.
func memoized[V any](mu *sync.Mutex, table map[string]V, key string, holds func(V) bool, build func() V) V {
	mu.Lock()
	r, ok := table[key]
	mu.Unlock()
	if ok && holds(r) {
		return r
	}
	r = build()
	mu.Lock()
	remember(table, key, r)
	mu.Unlock()
	return r
}

// remember sets m[key], dropping an arbitrary entry when m is full.
func remember[V any](m map[string]V, key string, val V) {
	if _, ok := m[key]; !ok && len(m) >= renderMemoMaxEntries {
		for k := range m {
			delete(m, k)
			break
		}
	}
	m[key] = val
}
