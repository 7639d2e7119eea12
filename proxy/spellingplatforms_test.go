package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// An origin can list one version in as many spellings as the mirror
// keeps (records.MaxSpellings), each with as many platforms as it keeps
// (records.MaxPlatforms), none of which it has a package for. The
// version's other spellings are asked, in all, for no more platforms
// than a version has: one VERSION.json costs the origin at most two
// requests per platform kept, not one per platform and spelling.
func TestVersionSpellingsTimesPlatformsBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	var platforms strings.Builder
	platforms.WriteString(`{"os":"linux","arch":"amd64"}`)
	for i := 1; i < records.MaxPlatforms; i++ {
		fmt.Fprintf(&platforms, `,{"os":"os%d","arch":"amd64"}`, i)
	}
	var b strings.Builder
	b.WriteString(`{"versions":[`)
	for i := range records.MaxSpellings {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"version":"%s1.0.0","protocols":["5.0"],"platforms":[%s]}`, strings.Repeat("0", i), platforms.String())
	}
	b.WriteString(`]}`)
	h.origin.SetKindBody(fakeorigin.Versions, []byte(b.String()), "application/json")

	r := h.get(providerPath("1.0.0.json"))
	if r.status != http.StatusOK {
		t.Fatalf("VERSION.json: status %d: %s", r.status, r.body)
	}
	h.waitIdle()
	if n, most := h.origin.Hits(fakeorigin.Download), 2*records.MaxPlatforms; n > most {
		t.Errorf("one VERSION.json made %d package requests of the origin, want at most %d (%d platforms of %d spellings)", n, most, records.MaxPlatforms, records.MaxSpellings)
	}
}
