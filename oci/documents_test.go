package oci

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// sha256Of is the digest as the distribution-spec defines it, computed
// here independently of the package's digest library.
func sha256Of(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

const (
	zipA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	zipB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	// The OCI empty descriptor as image-spec's manifest guidance writes it.
	emptyConfigJSON = `{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2,"data":"e30="}`
)

func wantTargetManifest(sha string, size, title string) string {
	return `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",` +
		`"artifactType":"application/vnd.opentofu.provider-target","config":` + emptyConfigJSON + `,` +
		`"layers":[{"mediaType":"archive/zip","digest":"sha256:` + sha + `","size":` + size +
		`,"annotations":{"org.opencontainers.image.title":"` + title + `"}}]}`
}

func TestProviderTargetManifest(t *testing.T) {
	doc, err := ProviderTargetManifest(Layer{SHA256: zipA, Size: 1234, Title: "terraform-provider-null_3.2.1_linux_amd64.zip"})
	if err != nil {
		t.Fatal(err)
	}
	want := wantTargetManifest(zipA, "1234", "terraform-provider-null_3.2.1_linux_amd64.zip")
	if string(doc.Bytes) != want {
		t.Errorf("bytes:\n got %s\nwant %s", doc.Bytes, want)
	}
	if doc.Digest.String() != sha256Of(want) || doc.MediaType != MediaTypeManifest {
		t.Errorf("digest %s media type %s, want %s %s", doc.Digest, doc.MediaType, sha256Of(want), MediaTypeManifest)
	}
	if d := doc.Descriptor(); d.Size != int64(len(want)) || d.Digest != doc.Digest {
		t.Errorf("descriptor %+v", d)
	}
	if sha256Of("{}") != EmptyConfig().Digest.String() || string(EmptyConfigBlob()) != "{}" {
		t.Errorf("empty config descriptor %v does not name the blob {}", EmptyConfig().Digest)
	}
}

// A platform's manifest states its layer, read back as built; no other
// document does.
func TestProviderTargetLayer(t *testing.T) {
	want := Layer{SHA256: zipA, Size: 1234, Title: "terraform-provider-null_3.2.1_linux_amd64.zip"}
	doc, err := ProviderTargetManifest(want)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := ProviderTargetLayer(doc); !ok || got != want {
		t.Errorf("the platform's manifest: %+v, %v; want %+v", got, ok, want)
	}
	module, err := ModuleManifest(Layer{SHA256: zipB, Size: 99, Title: "net-aws-1.0.0.zip"})
	if err != nil {
		t.Fatal(err)
	}
	index, err := ProviderIndex([]Target{{addrs.Platform{OS: "linux", Arch: "amd64"}, doc}})
	if err != nil {
		t.Fatal(err)
	}
	twoLayers := wantTargetManifest(zipA, "10", "a.zip")
	twoLayers = strings.Replace(twoLayers, `"layers":[`, `"layers":[{"mediaType":"archive/zip","digest":"sha256:`+zipB+`","size":5},`, 1)
	for name, d := range map[string]Document{
		"a module's manifest": module,
		"an index":            index,
		"two layers":          {MediaType: MediaTypeManifest, Bytes: []byte(twoLayers)},
		"not JSON":            {MediaType: MediaTypeManifest, Bytes: []byte("{")},
		"a size of 0":         {MediaType: MediaTypeManifest, Bytes: []byte(wantTargetManifest(zipA, "0", "a.zip"))},
	} {
		if got, ok := ProviderTargetLayer(d); ok {
			t.Errorf("%s: %+v", name, got)
		}
	}
}

func TestModuleManifest(t *testing.T) {
	doc, err := ModuleManifest(Layer{SHA256: zipB, Size: 99, Title: "net-aws-1.0.0.zip"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",` +
		`"artifactType":"application/vnd.opentofu.modulepkg","config":` + emptyConfigJSON + `,` +
		`"layers":[{"mediaType":"archive/zip","digest":"sha256:` + zipB + `","size":99` +
		`,"annotations":{"org.opencontainers.image.title":"net-aws-1.0.0.zip"}}]}`
	if string(doc.Bytes) != want || doc.Digest.String() != sha256Of(want) {
		t.Errorf("got %s (%s)\nwant %s (%s)", doc.Bytes, doc.Digest, want, sha256Of(want))
	}
}

func TestProviderIndex(t *testing.T) {
	linux := wantTargetManifest(zipA, "10", "a.zip")
	darwin := wantTargetManifest(zipB, "20", "b.zip")
	mLinux, err := ProviderTargetManifest(Layer{SHA256: zipA, Size: 10, Title: "a.zip"})
	if err != nil {
		t.Fatal(err)
	}
	mDarwin, err := ProviderTargetManifest(Layer{SHA256: zipB, Size: 20, Title: "b.zip"})
	if err != nil {
		t.Fatal(err)
	}
	entry := func(doc, os, arch string) string {
		return `{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"` + sha256Of(doc) + `","size":` +
			strconv.Itoa(len(doc)) + `,"platform":{"architecture":"` + arch + `","os":"` + os + `"},"artifactType":"application/vnd.opentofu.provider-target"}`
	}
	want := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json",` +
		`"artifactType":"application/vnd.opentofu.provider","manifests":[` +
		entry(darwin, "darwin", "arm64") + "," + entry(linux, "linux", "amd64") + "," + entry(linux, "linux", "arm64") + `]}`

	// The same platforms in any order make the same bytes.
	orders := [][]Target{
		{{addrs.Platform{OS: "linux", Arch: "amd64"}, mLinux}, {addrs.Platform{OS: "darwin", Arch: "arm64"}, mDarwin}, {addrs.Platform{OS: "linux", Arch: "arm64"}, mLinux}},
		{{addrs.Platform{OS: "linux", Arch: "arm64"}, mLinux}, {addrs.Platform{OS: "linux", Arch: "amd64"}, mLinux}, {addrs.Platform{OS: "darwin", Arch: "arm64"}, mDarwin}},
	}
	for i, targets := range orders {
		doc, err := ProviderIndex(targets)
		if err != nil {
			t.Fatal(err)
		}
		if string(doc.Bytes) != want || doc.Digest.String() != sha256Of(want) || doc.MediaType != MediaTypeIndex {
			t.Errorf("order %d: got %s (%s)\nwant %s (%s)", i, doc.Bytes, doc.Digest, want, sha256Of(want))
		}
	}
}

func TestProviderIndexRefuses(t *testing.T) {
	m, err := ProviderTargetManifest(Layer{SHA256: zipA, Size: 10, Title: "a.zip"})
	if err != nil {
		t.Fatal(err)
	}
	forged := m
	forged.Bytes = append([]byte(nil), m.Bytes...)
	forged.Bytes[len(forged.Bytes)-2] = ' '
	linux := addrs.Platform{OS: "linux", Arch: "amd64"}
	tests := []struct {
		name    string
		targets []Target
	}{
		{"no platforms", nil},
		{"a platform twice", []Target{{linux, m}, {linux, m}}},
		{"a platform with an underscore", []Target{{addrs.Platform{OS: "linux_x", Arch: "amd64"}, m}}},
		{"an empty platform", []Target{{addrs.Platform{}, m}}},
		{"bytes that are not the digest's", []Target{{linux, forged}}},
		{"an index as a platform manifest", []Target{{linux, Document{MediaType: MediaTypeIndex, Bytes: m.Bytes, Digest: m.Digest}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if doc, err := ProviderIndex(tt.targets); err == nil {
				t.Errorf("built %s", doc.Bytes)
			}
		})
	}
}

// A provider type's normal form may hold any character of an IDNA label
// (OpenTofu accepts "café", "网络", "☃"), and its archive's file name
// holds it: the title is that name, still one plain name.
func TestLayerTitleOfNonASCIIType(t *testing.T) {
	for _, typ := range []string{"café", "网络", "☃"} {
		title := addrs.ArchiveName(typ, "1.0.0", "linux_amd64")
		if _, err := ProviderTargetManifest(Layer{SHA256: zipA, Size: 1, Title: title}); err != nil {
			t.Errorf("%s: %v", title, err)
		}
	}
}

func TestLayerRefused(t *testing.T) {
	tests := []struct {
		name  string
		layer Layer
	}{
		{"uppercase hex", Layer{SHA256: strings.ToUpper(zipA), Size: 1, Title: "a.zip"}},
		{"short hex", Layer{SHA256: zipA[:63], Size: 1, Title: "a.zip"}},
		{"zero size", Layer{SHA256: zipA, Size: 0, Title: "a.zip"}},
		{"negative size", Layer{SHA256: zipA, Size: -1, Title: "a.zip"}},
		{"no title", Layer{SHA256: zipA, Size: 1}},
		{"title with a slash", Layer{SHA256: zipA, Size: 1, Title: "../a.zip"}},
		{"title a dot name", Layer{SHA256: zipA, Size: 1, Title: ".."}},
		{"title too long", Layer{SHA256: zipA, Size: 1, Title: strings.Repeat("a", 256)}},
		{"title with a quote", Layer{SHA256: zipA, Size: 1, Title: `a".zip`}},
		{"title with a space", Layer{SHA256: zipA, Size: 1, Title: "a b.zip"}},
		{"title with a no-break space", Layer{SHA256: zipA, Size: 1, Title: "a\u00a0b.zip"}},
		{"title with a bidi override", Layer{SHA256: zipA, Size: 1, Title: "a\u202ep.zip"}},
		{"title with a control character", Layer{SHA256: zipA, Size: 1, Title: "a\u0085b.zip"}},
		{"title not UTF-8", Layer{SHA256: zipA, Size: 1, Title: "a\xffb.zip"}},
		{"title beginning outside ASCII", Layer{SHA256: zipA, Size: 1, Title: "é.zip"}},
		{"title over 255 bytes", Layer{SHA256: zipA, Size: 1, Title: strings.Repeat("é", 127) + ".zip"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if doc, err := ProviderTargetManifest(tt.layer); err == nil {
				t.Errorf("built %s", doc.Bytes)
			}
			if doc, err := ModuleManifest(tt.layer); err == nil {
				t.Errorf("built %s", doc.Bytes)
			}
		})
	}
}

func TestNewDocument(t *testing.T) {
	m, err := ProviderTargetManifest(Layer{SHA256: zipA, Size: 10, Title: "a.zip"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := NewDocument(MediaTypeManifest, m.Bytes)
	if err != nil || got.Digest != m.Digest {
		t.Fatalf("read back: %v, %v", got.Digest, err)
	}
	for name, tc := range map[string]struct {
		mediaType string
		b         []byte
	}{
		"manifest as index": {MediaTypeIndex, m.Bytes},
		"not JSON":          {MediaTypeManifest, []byte("{")},
		"other media type":  {"application/json", []byte(`{"mediaType":"application/json"}`)},
		"too large":         {MediaTypeManifest, []byte(`{"mediaType":"` + MediaTypeManifest + `","x":"` + strings.Repeat("a", MaxManifestSize) + `"}`)},
	} {
		if _, err := NewDocument(tc.mediaType, tc.b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
