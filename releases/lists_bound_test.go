package releases

import (
	"errors"
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
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			_, err := tt.parse(tt.doc)
			runtime.ReadMemStats(&m1)
			if !errors.Is(err, jsonbound.ErrLimit) {
				t.Errorf("err = %v, want the element limit's", err)
			}
			if a := m1.TotalAlloc - m0.TotalAlloc; a > 64<<20 {
				t.Errorf("parsing a %d MiB list allocated %d MiB", len(tt.doc)>>20, a>>20)
			}
		})
	}
}
