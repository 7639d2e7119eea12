package proxy

import (
	"slices"
	"sync"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/discovery"
	"github.com/tfmirror/tfmirror/mirror"
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
	list *mirror.VersionList
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
func (m *renderMemo) index(p discovery.Provider, list *mirror.VersionList) document {
	key := p.String()
	m.mu.Lock()
	r, ok := m.indexes[key]
	m.mu.Unlock()
	if ok && r.list == list {
		return r.doc
	}
	r = renderedIndex{list: list, doc: newDocument(renderJSON(newIndexDocument(list)))}
	m.mu.Lock()
	remember(m.indexes, key, r)
	m.mu.Unlock()
	return r.doc
}

// registryVersions returns p's registry versions answer made from list by
// render.
func (m *renderMemo) registryVersions(p discovery.Provider, list *mirror.VersionList, render func() document) document {
	key := p.String()
	m.mu.Lock()
	r, ok := m.regLists[key]
	m.mu.Unlock()
	if ok && r.list == list {
		return r.doc
	}
	r = renderedIndex{list: list, doc: render()}
	m.mu.Lock()
	remember(m.regLists, key, r)
	m.mu.Unlock()
	return r.doc
}

// version returns the VERSION.json document of version v of p made from pkg.
func (m *renderMemo) version(p discovery.Provider, v versions.Version, pkg *mirror.Package) document {
	key := p.String() + "/" + v.String()
	m.mu.Lock()
	r, ok := m.versions[key]
	m.mu.Unlock()
	if ok && slices.Equal(r.archives, pkg.Archives) {
		return r.doc
	}
	r = renderedVersion{
		archives: slices.Clone(pkg.Archives),
		doc:      newDocument(renderJSON(newVersionDocument(p.Type, v, pkg.Archives))),
	}
	m.mu.Lock()
	remember(m.versions, key, r)
	m.mu.Unlock()
	return r.doc
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
