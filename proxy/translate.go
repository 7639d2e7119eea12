package proxy

import (
	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// This file renders the engine's records as the provider network mirror
// protocol's documents (the engine translates from the provider registry
// protocol, see records.TranslateVersions).

// indexDocument is the mirror protocol's index.json.
type indexDocument struct {
	Versions map[string]struct{} `json:"versions"`
}

func newIndexDocument(list *records.VersionList) indexDocument {
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

// newVersionDocument lists every platform of archives, each linking to
// this mirror's archive by a URL relative to VERSION.json, with its zh:
// hash (the origin's signed sha256) and, once the archive is cached, its
// h1: hash.
func newVersionDocument(typ string, v versions.Version, archives []mirror.PlatformArchive) versionDocument {
	doc := versionDocument{Archives: make(map[string]archiveDocument, len(archives))}
	version := v.String()
	for _, a := range archives {
		if _, err := addrs.ParsePlatform(a.Platform); err != nil {
			continue
		}
		hashes := make([]string, 0, 2)
		if a.H1 != "" {
			hashes = append(hashes, a.H1)
		}
		hashes = append(hashes, verify.ZH(a.SHA256))
		doc.Archives[a.Platform] = archiveDocument{URL: addrs.ArchiveName(typ, version, a.Platform), Hashes: hashes}
	}
	return doc
}
