package releases

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/jsonbound"
)

// TestListDocumentElementsBounded: a version list within the byte limit
// (64 MiB by default) made of millions of empty strings or objects, which
// encoding/json decodes into gigabytes before the list's own caps apply,
// is refused before it is decoded.
func TestListDocumentElementsBounded(t *testing.T) {
	fill := func(head, elem, tail string) []byte {
		var b strings.Builder
		b.WriteString(head)
		for b.Len() < 64<<20-64 {
			b.WriteString(elem)
		}
		b.WriteString(tail)
		return []byte(b.String())
	}
	tests := []struct {
		name  string
		doc   []byte
		parse func([]byte) (*List, error)
	}{
		{"OpenTofu files", fill(`{"versions":[{"id":"1.6.0","files":[`, `"",`, `""]}]}`), parseTofuList},
		{"OpenTofu versions", fill(`{"versions":[`, `{},`, `{}]}`), parseTofuList},
		{"HashiCorp builds", fill(`{"versions":{"1.6.0":{"builds":[`, `{},`, `{}]}}}`),
			func(b []byte) (*List, error) { return parseHashiCorpList("terraform", b) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			allocated, err := parseAllocating(tt.parse, tt.doc)
			if !errors.Is(err, jsonbound.ErrLimit) {
				t.Errorf("err = %v, want the element limit's", err)
			}
			if allocated > 64<<20 {
				t.Errorf("parsing a %d MiB list allocated %d MiB", len(tt.doc)>>20, allocated>>20)
			}
		})
	}
}

// parseAllocating parses doc with parse, and says how many bytes it
// allocated doing so.
func parseAllocating(parse func([]byte) (*List, error), doc []byte) (uint64, error) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	_, err := parse(doc)
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc, err
}

// TestListEntriesBoundedTogether: a list of versions each just within
// its own bound (16,000 empty builds or file names apiece), which
// decoded for seconds at each refresh (a 63 MiB one from an allowed
// release origin: some 6 s of CPU, 5 GiB allocated), is refused once
// its entries hold more elements together than maxListElements, having
// decoded no more than that.
func TestListEntriesBoundedTogether(t *testing.T) {
	versions := 4 * maxListElements / 16000
	// list is a document of versions entries, each head (with the
	// version) and 16,000 elems in an array.
	list := func(open, head, elem, closing string) []byte {
		var b strings.Builder
		b.WriteString(open)
		for i := range versions {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, head, fmt.Sprintf("1.%d.%d", i/100, i%100))
			b.WriteString(strings.Repeat(elem+",", 15999) + elem + "]}")
		}
		b.WriteString(closing)
		return []byte(b.String())
	}
	tests := []struct {
		name  string
		doc   []byte
		parse func([]byte) (*List, error)
	}{
		{"HashiCorp builds", list(`{"versions":{`, `%q:{"builds":[`, `{}`, `}}`),
			func(b []byte) (*List, error) { return parseHashiCorpList("terraform", b) }},
		{"OpenTofu files", list(`{"versions":[`, `{"id":%q,"files":[`, `""`, `]}`), parseTofuList},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			allocated, err := parseAllocating(tt.parse, tt.doc)
			if !errors.Is(err, jsonbound.ErrLimit) || !strings.Contains(err.Error(), "in all") {
				t.Fatalf("a list of %d versions of 16,000 elements each (%d MiB): err %v, want the bound of its entries together", versions, len(tt.doc)>>20, err)
			}
			// Decoding the 2 Mi elements it allows costs some 550 MiB
			// of allocations (an empty build is a struct of three
			// strings, in a slice grown as it is decoded); decoded
			// whole, this list (four times that) cost over 2 GiB.
			if allocated > 1<<30 {
				t.Errorf("refusing a %d MiB list allocated %d MiB", len(tt.doc)>>20, allocated>>20)
			}
		})
	}
}

// TestLongListWithItsBuildsRead: a HashiCorp list of more versions than
// are kept, each with the builds and fields a real index.json gives
// them (some hundred elements a version, over two million in all), is
// read and cut to its newest, as documented, not refused whole for its
// size; as many versions again as the list may hold are refused.
func TestLongListWithItsBuildsRead(t *testing.T) {
	t.Parallel()
	doc := func(n, builds int) []byte {
		var b strings.Builder
		b.WriteString(`{"name":"terraform","versions":{`)
		for i := range n {
			v := fmt.Sprintf("1.%d.%d", i/100, i%100)
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `%q:{"name":"terraform","version":%q,"shasums":"terraform_%s_SHA256SUMS","shasums_signature":"terraform_%s_SHA256SUMS.sig","shasums_signatures":["terraform_%s_SHA256SUMS.72D7468F.sig"],"builds":[`, v, v, v, v, v)
			for j, p := range []string{"darwin_amd64", "darwin_arm64", "freebsd_386", "freebsd_amd64", "freebsd_arm", "linux_386", "linux_amd64", "linux_arm", "linux_arm64", "openbsd_386", "openbsd_amd64", "solaris_amd64", "windows_386", "windows_amd64"}[:builds] {
				os, arch, _ := strings.Cut(p, "_")
				if j > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"name":"terraform","version":%q,"os":%q,"arch":%q,"filename":"terraform_%s_%s.zip","url":"https://releases.hashicorp.com/terraform/%s/terraform_%s_%s.zip"}`, v, os, arch, v, p, v, v, p)
			}
			b.WriteString("]}")
		}
		b.WriteString("}}")
		return []byte(b.String())
	}
	data := doc(maxListedVersions+500, 14)
	if err := jsonbound.Check(data, jsonbound.Limits{}); !errors.Is(err, jsonbound.ErrLimit) {
		t.Fatalf("the list fits the default element bound (%v): it tests nothing", err)
	}
	list, err := parseHashiCorpList("terraform", data)
	if err != nil {
		t.Fatalf("a list of %d versions (%d MiB): %v", maxListedVersions+500, len(data)>>20, err)
	}
	if len(list.Versions) < 1000 || list.Versions[0].Version != fmt.Sprintf("1.%d.%d", (maxListedVersions+499)/100, (maxListedVersions+499)%100) || len(list.Versions[0].Builds) != 14 {
		t.Errorf("%d versions kept, the first %+v; want the newest, with its 14 builds", len(list.Versions), list.Versions[:1])
	}
	if _, err := parseHashiCorpList("terraform", doc(maxListEntries+1, 0)); !errors.Is(err, jsonbound.ErrLimit) {
		t.Errorf("a list of %d versions: err %v, want the entries' bound", maxListEntries+1, err)
	}
}
