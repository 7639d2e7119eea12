package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// An origin can spell one version in as many ways as its answer has room
// for ("1.0.0", "01.0.0", "001.0.0", ...), each listing a platform it has
// no package for. The mirror asks each spelling it keeps for a platform
// the first lacks: a version's spellings are bounded as its platforms
// are, so that one request does not become thousands at the origin.
func TestVersionSpellingsBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	const spellings = 2000
	var b strings.Builder
	b.WriteString(`{"versions":[{"version":"1.0.0","protocols":["5.0"],"platforms":[{"os":"linux","arch":"amd64"}]}`)
	for i := 1; i <= spellings; i++ {
		fmt.Fprintf(&b, `,{"version":"%s1.0.0","protocols":["5.0"],"platforms":[{"os":"windows","arch":"amd64"}]}`, strings.Repeat("0", i))
	}
	b.WriteString(`]}`)
	n := versionDocCost(t, h, b.String())
	if n > 64 {
		t.Errorf("one VERSION.json made %d package requests of the origin, one per spelling of the version it listed", n)
	}
}

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
	n := versionDocCost(t, h, b.String())
	if most := 2 * records.MaxPlatforms; n > most {
		t.Errorf("one VERSION.json made %d package requests of the origin, want at most %d (%d platforms of %d spellings)", n, most, records.MaxPlatforms, records.MaxSpellings)
	}
}

// versionDocCost has the origin answer h's provider's version list with
// versions, asks for the VERSION.json of 1.0.0 (answered 200), and
// returns how many package requests that made of the origin.
func versionDocCost(t *testing.T, h *harness, versions string) int {
	t.Helper()
	h.origin.SetKindBody(fakeorigin.Versions, []byte(versions), "application/json")
	r := h.get(providerPath("1.0.0.json"))
	if r.status != http.StatusOK {
		t.Fatalf("VERSION.json: status %d: %s", r.status, r.body)
	}
	h.waitIdle()
	return h.origin.Hits(fakeorigin.Download)
}
