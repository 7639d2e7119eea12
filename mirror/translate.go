package mirror

import (
	"slices"
	"strings"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/discovery"
)

// TranslateVersions turns an origin's version list into the cached form:
// canonical version strings (clients re-serialise "1.2" as "1.2.0" and ask
// for that), sorted, duplicates merged. Invalid versions are reported to
// skip and dropped, as the clients themselves do.
func TranslateVersions(infos []discovery.VersionInfo, skip func(raw string, err error)) *VersionList {
	byVersion := make(map[string]*VersionEntry)
	parsed := make(map[string]versions.Version)
	for _, info := range infos {
		v, err := ParseSemver(info.Version)
		if err != nil {
			skip(info.Version, err)
			continue
		}
		canon := v.String()
		e, ok := byVersion[canon]
		if !ok {
			e = &VersionEntry{Version: canon, Platforms: []string{}}
			if info.Version != canon {
				e.Origin = info.Version
			}
			byVersion[canon] = e
			parsed[canon] = v
		}
		for _, pl := range info.Platforms {
			name := pl.String()
			if _, err := ParsePlatform(name); err != nil {
				skip(info.Version+" "+name, err)
				continue
			}
			if !slices.Contains(e.Platforms, name) {
				e.Platforms = append(e.Platforms, name)
			}
		}
	}
	list := &VersionList{Schema: recordSchema, Versions: make([]VersionEntry, 0, len(byVersion))}
	for _, e := range byVersion {
		slices.Sort(e.Platforms)
		list.Versions = append(list.Versions, *e)
	}
	slices.SortFunc(list.Versions, func(a, b VersionEntry) int {
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
