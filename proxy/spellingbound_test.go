package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
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
	h.origin.SetKindBody(fakeorigin.Versions, []byte(b.String()), "application/json")

	r := h.get(providerPath("1.0.0.json"))
	if r.status != http.StatusOK {
		t.Fatalf("VERSION.json: status %d: %s", r.status, r.body)
	}
	h.waitIdle()
	if n := h.origin.Hits(fakeorigin.Download); n > 64 {
		t.Errorf("one VERSION.json made %d package requests of the origin, one per spelling of the version it listed", n)
	}
}
