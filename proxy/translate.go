package proxy

import (
	"slices"
	"strings"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/discovery"
	"github.com/tfmirror/tfmirror/verify"
)

// This file translates between the provider registry protocol (what origins
// answer) and the provider network mirror protocol (what clients ask).

// translateVersions turns an origin's version list into the cached form:
// canonical version strings (clients re-serialise "1.2" as "1.2.0" and ask
// for that), sorted, duplicates merged. Invalid versions are reported to
// skip and dropped, as the clients themselves do.
//
// When the origin lists one version in several spellings ("1.0" and
// "1.0.0"), the entry offers the platforms of all of them, and is asked
// for by the canonical spelling if the origin lists it (the first listed
// otherwise), the others being kept as aliases to ask when that one has
// no package for a platform.
func translateVersions(infos []discovery.VersionInfo, skip func(raw string, err error)) *versionList {
	byVersion := make(map[string]*versionEntry)
	parsed := make(map[string]versions.Version)
	spellings := make(map[string][]string) // canonical -> the origin's, in order
	for _, info := range infos {
		v, err := parseSemver(info.Version)
		if err != nil {
			skip(info.Version, err)
			continue
		}
		canon := v.String()
		e, ok := byVersion[canon]
		if !ok {
			e = &versionEntry{Version: canon, Platforms: []string{}}
			byVersion[canon] = e
			parsed[canon] = v
		}
		if !slices.Contains(spellings[canon], info.Version) {
			spellings[canon] = append(spellings[canon], info.Version)
		}
		for _, pl := range info.Platforms {
			name := pl.String()
			if _, err := parsePlatform(name); err != nil {
				skip(info.Version+" "+name, err)
				continue
			}
			if !slices.Contains(e.Platforms, name) {
				e.Platforms = append(e.Platforms, name)
			}
		}
	}
	list := &versionList{Versions: make([]versionEntry, 0, len(byVersion))}
	for canon, e := range byVersion {
		spelt := spellings[canon]
		first := 0
		if i := slices.Index(spelt, canon); i >= 0 {
			first = i
		}
		if spelt[first] != canon {
			e.Origin = spelt[first]
		}
		for i, alias := range spelt {
			if i != first {
				e.Aliases = append(e.Aliases, alias)
			}
		}
		slices.Sort(e.Platforms)
		list.Versions = append(list.Versions, *e)
	}
	slices.SortFunc(list.Versions, func(a, b versionEntry) int {
		va, vb := parsed[a.Version], parsed[b.Version]
		switch {
		case va.LessThan(vb):
			return -1
		case vb.LessThan(va):
			return 1
		}
		// Equal precedence differs only in build metadata
		// ("1.0.0+a", "1.0.0+b"): keep the order stable.
		return strings.Compare(a.Version, b.Version)
	})
	return list
}

// indexDocument is the mirror protocol's index.json.
type indexDocument struct {
	Versions map[string]struct{} `json:"versions"`
}

func newIndexDocument(list *versionList) indexDocument {
	doc := indexDocument{Versions: make(map[string]struct{}, len(list.Versions))}
	for _, e := range list.Versions {
		doc.Versions[e.Version] = struct{}{}
	}
	return doc
}

// versionDocument is the mirror protocol's VERSION.json.
type versionDocument struct {
	Archives map[string]archiveDocument `json:"archives"`
}

type archiveDocument struct {
	URL    string   `json:"url"`
	Hashes []string `json:"hashes"`
}

// newVersionDocument lists every platform of rec that is in platforms, each
// linking to this mirror's archive by a URL relative to VERSION.json, with
// its zh: hash (the origin's signed sha256) and, where h1 knows it, its h1:
// hash.
func newVersionDocument(typ string, v versions.Version, rec *packageRecord, platforms []string, h1 func(sha string) string) versionDocument {
	doc := versionDocument{Archives: make(map[string]archiveDocument, len(platforms))}
	version := v.String()
	for _, name := range platforms {
		a, ok := rec.Archives[name]
		if !ok {
			continue
		}
		pl, err := parsePlatform(name)
		if err != nil {
			continue
		}
		hashes := make([]string, 0, 2)
		if h := h1(a.SHA256); h != "" {
			hashes = append(hashes, h)
		}
		hashes = append(hashes, verify.ZH(a.SHA256))
		doc.Archives[name] = archiveDocument{URL: archiveNameOf(typ, version, pl), Hashes: hashes}
	}
	return doc
}
