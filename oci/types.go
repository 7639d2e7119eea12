package oci

import (
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Media types and artifact types of the documents and blobs served.
const (
	// MediaTypeIndex is an OCI image index: a provider version's tag
	// points at one.
	MediaTypeIndex = ocispec.MediaTypeImageIndex
	// MediaTypeManifest is an OCI image manifest: one per provider
	// platform, and one per module version.
	MediaTypeManifest = ocispec.MediaTypeImageManifest
	// MediaTypeZip is the media type of the one layer of every manifest:
	// the provider's zip, byte for byte the origin's, or the module
	// package as a zip.
	MediaTypeZip = "archive/zip"
	// MediaTypeEmptyConfig is the OCI empty descriptor's media type, the
	// config of every manifest.
	MediaTypeEmptyConfig = ocispec.MediaTypeEmptyJSON

	// ArtifactTypeProvider is a provider version's image index.
	ArtifactTypeProvider = "application/vnd.opentofu.provider"
	// ArtifactTypeProviderTarget is one platform's image manifest of a
	// provider version, and the artifactType of its index entry.
	ArtifactTypeProviderTarget = "application/vnd.opentofu.provider-target"
	// ArtifactTypeModulePackage is a module version's image manifest.
	ArtifactTypeModulePackage = "application/vnd.opentofu.modulepkg"
)

// EmptyConfig is the OCI empty descriptor (image-spec's
// DescriptorEmptyJSON: the blob "{}", embedded as its data), the config of
// every manifest built here.
func EmptyConfig() ocispec.Descriptor {
	d := ocispec.DescriptorEmptyJSON
	d.Data = EmptyConfigBlob()
	return d
}

// EmptyConfigBlob returns the bytes of the empty config blob, "{}": every
// repository serves it under EmptyConfig().Digest.
func EmptyConfigBlob() []byte { return []byte("{}") }

// MaxManifestSize is the largest manifest OpenTofu reads (4 MiB); the
// builders refuse to make a larger one.
const MaxManifestSize = 4 << 20
