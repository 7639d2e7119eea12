package records

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
)

// MaxPlatforms, MaxProtocols and MaxSpellings bound what one version of
// a provider offers: a real provider builds for some twenty platforms,
// speaks two or three protocols and is listed in one spelling (two at
// most: "1.0" beside "1.0.0"), while an origin's answer, within its
// bounds, may list a hundred thousand of each ("01.0.0", "001.0.0", ...
// are all 1.0.0), which every request for the version would then go
// through (and ask the origin about, a platform at a time, and for a
// platform the first spelling lacks, a spelling at a time). Beyond them,
// TranslateVersions keeps the first in the origin's order (and the
// canonical spelling, wherever it is listed) and reports the rest to
// skip.
const (
	MaxPlatforms = 256
	MaxProtocols = 64
	MaxSpellings = 8
)

var (
	errTooManyPlatforms = fmt.Errorf("more platforms for one version than the %d a mirror keeps", MaxPlatforms)
	errTooManyProtocols = fmt.Errorf("more protocols for one version than the %d a mirror keeps", MaxProtocols)
	errTooManySpellings = fmt.Errorf("more spellings of one version than the %d a mirror keeps", MaxSpellings)
)

// TranslateVersions turns an origin's version list into the cached form:
// canonical version strings (clients re-serialise "1.2" as "1.2.0" and ask
// for that), sorted, duplicates merged. Invalid versions are reported to
// skip and dropped, as the clients themselves do, and so are the
// platforms and protocols of a version beyond MaxPlatforms and
// MaxProtocols, and its spellings beyond MaxSpellings.
//
// When the origin lists one version in several spellings ("1.0" and
// "1.0.0"), the entry offers the platforms of all of them, and is asked
// for by the canonical spelling if the origin lists it (the first listed
// otherwise), the others being kept as aliases to ask when that one has
// no package for a platform.
func TranslateVersions(infos []discovery.VersionInfo, skip func(raw string, err error)) *VersionList {
	byVersion := make(map[string]*VersionEntry)
	spellings := make(map[string][]string)      // canonical -> the origin's, in order
	parsed := make(map[string]versions.Version) // canonical -> the version, for sorting
	// What each entry holds already, so that merging costs time in
	// proportion to what the origin listed: looked up in its slice, a
	// version listing 100,000 protocols or platforms took minutes.
	type held struct{ spelt, protocols, platforms map[string]bool }
	heldBy := make(map[string]*held)
	for _, info := range infos {
		v, err := addrs.ParseSemver(info.Version)
		if err != nil {
			skip(info.Version, err)
			continue
		}
		canon := v.String()
		e, ok := byVersion[canon]
		h := heldBy[canon]
		if !ok {
			e = &VersionEntry{Version: canon, Platforms: []string{}}
			byVersion[canon] = e
			parsed[canon] = v
			h = &held{spelt: map[string]bool{}, protocols: map[string]bool{}, platforms: map[string]bool{}}
			heldBy[canon] = h
		}
		if !h.spelt[info.Version] {
			if len(spellings[canon]) >= MaxSpellings && info.Version != canon {
				skip(info.Version, errTooManySpellings)
				continue
			}
			h.spelt[info.Version] = true
			spellings[canon] = append(spellings[canon], info.Version)
		}
		for _, proto := range info.Protocols {
			if !h.protocols[proto] {
				if len(e.Protocols) == MaxProtocols {
					skip(info.Version+" protocol "+proto, errTooManyProtocols)
					continue
				}
				h.protocols[proto] = true
				e.Protocols = append(e.Protocols, proto)
			}
		}
		for _, pl := range info.Platforms {
			name := pl.String()
			if _, err := addrs.ParsePlatform(name); err != nil {
				skip(info.Version+" "+name, err)
				continue
			}
			if !h.platforms[name] {
				if len(e.Platforms) == MaxPlatforms {
					skip(info.Version+" "+name, errTooManyPlatforms)
					continue
				}
				h.platforms[name] = true
				e.Platforms = append(e.Platforms, name)
			}
		}
	}
	list := &VersionList{Schema: Schema, Versions: make([]VersionEntry, 0, len(byVersion))}
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
	sortParsed(list.Versions, parsed)
	return list
}

// SortVersions sorts entries by version precedence. Versions of equal
// precedence differ only in build metadata ("1.0.0+a", "1.0.0+b"): they
// keep the order of their strings.
func SortVersions(entries []VersionEntry) {
	parsed := make(map[string]versions.Version, len(entries))
	for _, e := range entries {
		parsed[e.Version], _ = addrs.ParseSemver(e.Version)
	}
	sortParsed(entries, parsed)
}

// sortParsed is SortVersions of entries whose versions are parsed
// already, by their strings.
func sortParsed(entries []VersionEntry, parsed map[string]versions.Version) {
	slices.SortStableFunc(entries, func(a, b VersionEntry) int {
		va, vb := parsed[a.Version], parsed[b.Version]
		switch {
		case va.LessThan(vb):
			return -1
		case vb.LessThan(va):
			return 1
		}
		return strings.Compare(a.Version, b.Version)
	})
}
