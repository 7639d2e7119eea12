package mirror

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// platformsOf are the platforms of pkg's archives.
func platformsOf(pkg *Package) []string {
	var out []string
	for _, a := range pkg.Archives {
		out = append(out, a.Platform)
	}
	slices.Sort(out)
	return out
}

// A platform the origin adds to a version the mirror has cached (its
// SHA256SUMS, at the same URL, signed again with the same key, now names
// it) is verified against the document as the origin gives it now: the
// stored one, which lacks its line, was checked instead, and every
// answer for the version, its cached platforms' too, failed for good
// ("SHA256SUMS has no line for ...") without the origin being asked.
func TestPlatformAddedToACachedVersion(t *testing.T) {
	h := newHarness(t, harnessOptions{cfg: Config{VersionsTTL: time.Nanosecond}})
	defer h.stop()
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64", "darwin_arm64"})
	if pkg, err := h.packages("1.0.0"); err != nil || !slices.Equal(platformsOf(pkg), []string{"darwin_arm64", "linux_amd64"}) {
		t.Fatalf("before: %v, %v", pkg, err)
	}
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64", "darwin_arm64", "windows_amd64"})
	sums := h.origin.Hits(fakeorigin.Shasums)
	for i := range 2 {
		pkg, err := h.packages("1.0.0")
		if err != nil || !slices.Equal(platformsOf(pkg), []string{"darwin_arm64", "linux_amd64", "windows_amd64"}) {
			t.Errorf("answer %d after the origin added windows_amd64: %v, %v; want its three platforms", i, pkg, err)
		}
	}
	if n := h.origin.Hits(fakeorigin.Shasums) - sums; n != 1 {
		t.Errorf("the origin's SHA256SUMS was fetched %d times, want once: the new document is kept", n)
	}
}

// After the origin rotates its signing key (its SHA256SUMS signed again
// with the new key, which its download answers give), a platform of a
// cached version not cached yet is verified with the new key against
// the document as the origin gives it now: the stored bytes, with the
// old key's signature, were checked against the new key, and refused as
// badly signed, for good.
func TestSigningKeyRotated(t *testing.T) {
	h := newHarness(t, harnessOptions{cfg: Config{VersionsTTL: time.Nanosecond}})
	defer h.stop()
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64", "darwin_arm64"})
	if _, err := h.packages("1.0.0", "linux_amd64"); err != nil {
		t.Fatal(err)
	}
	h.origin.SetWrongSigningKey(true) // signs with key B ...
	h.origin.SetSigningKeys(h.origin.ArmoredPublicKeyB())
	pkg, err := h.packages("1.0.0")
	if err != nil || !slices.Equal(platformsOf(pkg), []string{"darwin_arm64", "linux_amd64"}) {
		t.Fatalf("after the key rotation: %v, %v; want both platforms", pkg, err)
	}
	// A platform added then, whose document the keys given do not
	// verify (key A advertised, key B signing), is refused still.
	h.origin.SetSigningKeys()
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64", "darwin_arm64", "windows_amd64"})
	if _, err := h.packages("1.0.0", "windows_amd64"); !errors.Is(err, verify.ErrIntegrity) {
		t.Errorf("a platform whose document its keys do not verify: %v, want an integrity error", err)
	}
}

// The answer of every platform of a cached version (the network mirror's
// VERSION.json) when the origin cannot be asked for those the record
// lacks (down, or the mirror sealed) is that of the platforms the record
// holds, verified when they were cached: it failed (503), and a version
// installed through the provider registry protocol, which caches one
// platform's metadata, could not be installed through the network
// mirror, sealed or with the origin down, though its archive was served.
func TestCachedPlatformsAnsweredWhenTheOriginCannotBeAsked(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, harnessOptions{cacheDir: dir, cfg: Config{VersionsTTL: time.Nanosecond}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64", "darwin_arm64"})
	if _, err := h.packages("1.0.0", "linux_amd64"); err != nil {
		t.Fatal(err)
	}
	h.origin.SetDown(http.StatusServiceUnavailable)
	pkg, err := h.packages("1.0.0")
	if err != nil || !slices.Equal(platformsOf(pkg), []string{"linux_amd64"}) || !pkg.Stale || pkg.Unasked == nil {
		t.Errorf("origin down: %+v, %v; want linux_amd64's answer, stale, saying why the others are not", pkg, err)
	}
	if _, err := h.packages("1.0.0", "darwin_arm64"); err == nil {
		t.Errorf("origin down, darwin_arm64 alone: no error")
	}
	h.stop()
	h.origin.SetDown(0)
	h.start(harnessOptions{cacheDir: dir, cfg: Config{Offline: true}})
	defer h.stop()
	pkg, err = h.packages("1.0.0")
	if err != nil || !slices.Equal(platformsOf(pkg), []string{"linux_amd64"}) {
		t.Errorf("sealed: %+v, %v; want linux_amd64's answer", pkg, err)
	}
	if _, err := h.packages("9.9.9"); err == nil {
		t.Errorf("sealed, a version it does not hold: %v, want an error", err)
	}
}
