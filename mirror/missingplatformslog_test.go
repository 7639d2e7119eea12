package mirror

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// An origin listing a version's every platform (as many as a version
// keeps) with a package for none costs the log one line per fetch of
// the version, naming a few of them, not a line per platform.
func TestMissingPlatformsLoggedOncePerFetch(t *testing.T) {
	t.Parallel()
	var logs logbuf.Buffer
	h := newHarness(t, harnessOptions{cfg: Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	var b strings.Builder
	b.WriteString(`{"versions":[{"version":"1.0.0","protocols":["5.0"],"platforms":[{"os":"linux","arch":"amd64"}`)
	for i := 1; i < records.MaxPlatforms; i++ {
		fmt.Fprintf(&b, `,{"os":"os%d","arch":"amd64"}`, i)
	}
	b.WriteString(`]}]}`)
	h.origin.SetKindBody(fakeorigin.Versions, []byte(b.String()), "application/json")
	pkg, err := h.engine.Package(t.Context(), h.provider(), mustVersion(t, "1.0.0"), nil)
	if err != nil || len(pkg.Archives) != 1 {
		t.Fatalf("Package: %v, %v; want linux_amd64's archive", pkg, err)
	}
	if n := strings.Count(logs.String(), "has no package for"); n != 1 {
		t.Errorf("%d log lines of platforms the origin has no package for, want 1", n)
	}
}
