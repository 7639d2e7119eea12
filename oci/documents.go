package oci

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/sha256hex"
)

// Document is a manifest or an index as served: its media type, its
// bytes and their digest.
type Document struct {
	MediaType string
	Bytes     []byte
	Digest    digest.Digest
}

// Descriptor returns the document's descriptor: media type, digest, size.
func (d Document) Descriptor() ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: int64(len(d.Bytes))}
}

// NewDocument checks that b is a document of the given media type (JSON
// whose mediaType says so) and returns it with its digest: for a document
// read back from storage.
func NewDocument(mediaType string, b []byte) (Document, error) {
	var head struct {
		MediaType string `json:"mediaType"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return Document{}, fmt.Errorf("OCI document: %v", err)
	}
	if head.MediaType != mediaType || (mediaType != MediaTypeIndex && mediaType != MediaTypeManifest) {
		return Document{}, fmt.Errorf("OCI document: media type %q, want %q", head.MediaType, mediaType)
	}
	if len(b) > MaxManifestSize {
		return Document{}, fmt.Errorf("OCI document: %d bytes, over the %d a client reads", len(b), MaxManifestSize)
	}
	return Document{MediaType: mediaType, Bytes: b, Digest: digest.FromBytes(b)}, nil
}

// Layer is the one blob of a manifest: a zip, known by the sha256 of its
// bytes (64 lowercase hex digits: for a provider, the origin's SHA256SUMS
// entry), its size, and the file name an OCI client that saves layers as
// files (oras pull) writes it to.
type Layer struct {
	SHA256 string
	Size   int64
	Title  string
}

// maxTitleBytes bounds a layer's file name, as file systems bound one.
const maxTitleBytes = 255

// plainTitle reports whether s is one plain file name, as a layer's
// title must be: at most maxTitleBytes bytes of UTF-8 beginning with an
// ASCII letter or digit, of ASCII letters, digits, '.', '_', '+' and
// '-', and of characters outside ASCII that are graphic and no space (no
// control, format or separator character). A provider type's normal form
// may hold any character of an IDNA label ("café", "网络"), as OpenTofu
// accepts it, and the archive's file name holds the type as it is.
func plainTitle(s string) bool {
	if s == "" || len(s) > maxTitleBytes || !utf8.ValidString(s) {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i == 0:
			return false
		case c == '.', c == '_', c == '+', c == '-':
		case c >= utf8.RuneSelf && unicode.IsGraphic(c) && !unicode.IsSpace(c):
		default:
			return false
		}
	}
	return true
}

func (l Layer) descriptor() (ocispec.Descriptor, error) {
	if !sha256hex.Valid(l.SHA256) {
		return ocispec.Descriptor{}, fmt.Errorf("layer sha256 %.70q: want 64 lowercase hex digits", l.SHA256)
	}
	if l.Size <= 0 {
		return ocispec.Descriptor{}, fmt.Errorf("layer size %d: want the zip's size in bytes", l.Size)
	}
	if !plainTitle(l.Title) {
		return ocispec.Descriptor{}, fmt.Errorf("layer title %.70q: want a plain file name", l.Title)
	}
	return ocispec.Descriptor{
		MediaType:   MediaTypeZip,
		Digest:      digest.NewDigestFromEncoded(digest.SHA256, l.SHA256),
		Size:        l.Size,
		Annotations: map[string]string{ocispec.AnnotationTitle: l.Title},
	}, nil
}

// ProviderTargetManifest builds one platform's image manifest of a
// provider version: artifactType provider-target, the empty config, and
// one archive/zip layer, the provider's zip.
func ProviderTargetManifest(zip Layer) (Document, error) {
	return zipManifest(ArtifactTypeProviderTarget, zip)
}

// ProviderTargetLayer returns the zip layer of doc as doc states it (its
// sha256 and size) when doc is one platform's image manifest of a
// provider version, as ProviderTargetManifest builds it; false for any
// other document (an index, a module's manifest).
func ProviderTargetLayer(doc Document) (Layer, bool) {
	if doc.MediaType != MediaTypeManifest {
		return Layer{}, false
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(doc.Bytes, &m); err != nil || m.ArtifactType != ArtifactTypeProviderTarget || len(m.Layers) != 1 {
		return Layer{}, false
	}
	l := m.Layers[0]
	if l.MediaType != MediaTypeZip || l.Digest.Algorithm() != digest.SHA256 || !sha256hex.Valid(l.Digest.Encoded()) || l.Size <= 0 {
		return Layer{}, false
	}
	return Layer{SHA256: l.Digest.Encoded(), Size: l.Size, Title: l.Annotations[ocispec.AnnotationTitle]}, true
}

// ModuleManifest builds a module version's image manifest: artifactType
// modulepkg, the empty config, and one archive/zip layer, the module
// package.
func ModuleManifest(pkg Layer) (Document, error) {
	return zipManifest(ArtifactTypeModulePackage, pkg)
}

func zipManifest(artifactType string, l Layer) (Document, error) {
	layer, err := l.descriptor()
	if err != nil {
		return Document{}, err
	}
	return encode(MediaTypeManifest, ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    MediaTypeManifest,
		ArtifactType: artifactType,
		Config:       EmptyConfig(),
		Layers:       []ocispec.Descriptor{layer},
	})
}

// Target is one entry of a provider version's index: a platform and its
// image manifest (from ProviderTargetManifest).
type Target struct {
	Platform addrs.Platform
	Manifest Document
}

// ProviderIndex builds a provider version's image index: artifactType
// provider, one entry per platform, sorted by OS and then architecture,
// each an image manifest descriptor with artifactType provider-target and
// a platform of OS and architecture only. A version without platforms, or
// with one twice, is refused.
func ProviderIndex(targets []Target) (Document, error) {
	if len(targets) == 0 {
		return Document{}, errors.New("provider index: no platforms")
	}
	sorted := slices.Clone(targets)
	slices.SortFunc(sorted, func(a, b Target) int {
		return cmp.Or(cmp.Compare(a.Platform.OS, b.Platform.OS), cmp.Compare(a.Platform.Arch, b.Platform.Arch))
	})
	entries := make([]ocispec.Descriptor, 0, len(sorted))
	for i, t := range sorted {
		if i > 0 && t.Platform == sorted[i-1].Platform {
			return Document{}, fmt.Errorf("provider index: platform %s twice", t.Platform)
		}
		if _, err := addrs.ParsePlatform(t.Platform.String()); err != nil {
			return Document{}, fmt.Errorf("provider index: %w", err)
		}
		if t.Manifest.MediaType != MediaTypeManifest || t.Manifest.Digest != digest.FromBytes(t.Manifest.Bytes) {
			return Document{}, fmt.Errorf("provider index: platform %s: not an image manifest built here", t.Platform)
		}
		d := t.Manifest.Descriptor()
		d.ArtifactType = ArtifactTypeProviderTarget
		d.Platform = &ocispec.Platform{OS: t.Platform.OS, Architecture: t.Platform.Arch}
		entries = append(entries, d)
	}
	return encode(MediaTypeIndex, ocispec.Index{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    MediaTypeIndex,
		ArtifactType: ArtifactTypeProvider,
		Manifests:    entries,
	})
}

// encode writes v as canonical JSON: encoding/json's struct field order
// and sorted map keys, no HTML escaping, no trailing newline.
func encode(mediaType string, v any) (Document, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return Document{}, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(b) > MaxManifestSize {
		return Document{}, fmt.Errorf("OCI document: %d bytes, over the %d a client reads", len(b), MaxManifestSize)
	}
	return Document{MediaType: mediaType, Bytes: b, Digest: digest.FromBytes(b)}, nil
}
