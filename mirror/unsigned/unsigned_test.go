package unsigned_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
)

// An unsigned import of HOST/NS/TYPE under an allowed origin host adds and
// replaces no version of that provider: neither one the origin publishes
// (before or after it is cached) nor a new one, and nothing of it is
// cached; unless the engine's configuration names the host.
func TestUnsignedImportStaysInItsLane(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		version string
		cached  bool // the origin's version is cached before the import
	}{
		{"a version the origin publishes", "1.0.0", false},
		{"a version the origin publishes, cached", "1.0.0", true},
		{"a new version", "9.0.0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := harness.New(t, harness.Options{})
			h.Origin.AddProvider(harness.NS, harness.Type, []string{"1.0.0"}, harness.Platforms)
			p := h.Provider()
			if tc.cached {
				h.Read(t.Context(), "1.0.0", "linux_amd64")
				h.WaitCommitted(h.Origin.SHA256(harness.NS, harness.Type, "1.0.0", "linux_amd64"))
			}
			in, sha := harness.UnsignedImport(t, p, tc.version)
			_, err := h.Engine.AirGap().Import(t.Context(), in)
			if !errors.Is(err, unsigned.ErrUnsignedOrigin) {
				t.Fatalf("Import: %v, want ErrUnsignedOrigin", err)
			}
			for _, want := range []string{p.String(), "registry.terraform.io is an allowed origin", "--allow-unsigned-hosts"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q does not say %q", err, want)
				}
			}
			if _, ok := h.Engine.CachedSize(sha); ok {
				t.Errorf("the in-house archive was cached")
			}
			list, _, err := h.Engine.Versions(t.Context(), p)
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Versions) != 1 || list.Versions[0].Version != "1.0.0" {
				t.Errorf("version list %+v, want the origin's 1.0.0 only", list.Versions)
			}
			// Whatever the client asks for is the origin's.
			a := h.Read(t.Context(), "1.0.0", "linux_amd64")
			if a.Err != nil || !bytes.Equal(a.Body, h.Origin.Archive(harness.NS, harness.Type, "1.0.0", "linux_amd64")) {
				t.Errorf("1.0.0 linux_amd64: %v, not the origin's archive", a.Err)
			}
			if _, err := h.Engine.Package(t.Context(), p, harness.MustVersion(t, "9.0.0"), nil); !errors.Is(err, records.ErrVersionNotFound) {
				t.Errorf("9.0.0: %v, want ErrVersionNotFound", err)
			}
			h.WaitIdle()
			err = h.Engine.ListCachedAfter("", "", func(cv harness.CachedVersion) error {
				if cv.Provenance == records.ProvenanceUnsigned {
					t.Errorf("an unsigned record was stored: %+v", cv)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}

	// Named, the host takes them: a version the origin publishes (served
	// as imported) and, sealed (a connected mirror's list is the
	// origin's), a new one.
	for _, tc := range []struct {
		version string
		offline bool
	}{{"1.0.0", false}, {"9.0.0", true}} {
		t.Run("allowed for the host "+tc.version, func(t *testing.T) {
			h := harness.New(t, harness.Options{Config: harness.Config{UnsignedHosts: []string{harness.OriginHost}, Offline: tc.offline}})
			h.Origin.AddProvider(harness.NS, harness.Type, []string{"1.0.0"}, harness.Platforms)
			p := h.Provider()
			in, sha := harness.UnsignedImport(t, p, tc.version)
			if _, err := h.Engine.AirGap().Import(t.Context(), in); err != nil {
				t.Fatalf("Import: %v", err)
			}
			pkg, err := h.Engine.Package(t.Context(), p, harness.MustVersion(t, tc.version), nil)
			if err != nil || len(pkg.Archives) != 1 || pkg.Archives[0].SHA256 != sha {
				t.Errorf("mirror.Package of the in-house version: %+v, %v", pkg, err)
			}
			if got := h.Engine.Config().UnsignedHosts; len(got) != 1 || got[0] != harness.OriginHost {
				t.Errorf("mirror.Config().UnsignedHosts = %q", got)
			}
		})
	}

	t.Run("a host that is no allowed origin", func(t *testing.T) {
		h := harness.New(t, harness.Options{})
		_, err := harness.NewEngine(harness.Config{AllowedOrigins: []string{harness.OriginHost}, UnsignedHosts: []string{"tf.corp.example"}},
			enginetest.OriginClient(t, h.Origin), h.Store)
		if err == nil || !strings.Contains(err.Error(), "tf.corp.example is not an allowed origin") {
			t.Errorf("New: %v, want the host refused", err)
		}
	})
}

// Versions imported without signature under an allowed origin host (as
// an earlier release allowed) are found at start, logged, listed by
// Withheld and not served unless the configuration names the host; their
// data is kept: named again, they are served again. A withheld import
// never takes a version away: connected, the origin's own version of the
// same number (1.0.0) is listed, its package metadata verified and its
// archive pulled through as if the import were not there, and the import
// is kept beside it (listed by Withheld, its archive cached) even once
// the host is named. Sealed, the origin cannot give it: not found.
func TestWithheldAtStart(t *testing.T) {
	t.Parallel()
	for _, offline := range []bool{false, true} {
		t.Run(map[bool]string{false: "connected", true: "sealed"}[offline], func(t *testing.T) { testWithheldAtStart(t, offline) })
	}
}

func testWithheldAtStart(t *testing.T, offline bool) {
	allowed := harness.Options{CacheDir: t.TempDir(), Config: harness.Config{UnsignedHosts: []string{harness.OriginHost}, Offline: offline}}
	h := harness.New(t, allowed)
	h.Origin.AddProvider(harness.NS, harness.Type, []string{"1.0.0"}, harness.Platforms)
	p := h.Provider()
	shas := map[string]string{}
	for _, v := range []string{"1.0.0", "9.0.0"} {
		in, sha := harness.UnsignedImport(t, p, v)
		if _, err := h.Engine.AirGap().Import(t.Context(), in); err != nil {
			t.Fatalf("seeding %s: %v", v, err)
		}
		shas[v] = sha
	}
	h.Stop()

	var logs logbuf.Buffer
	strict := harness.Options{CacheDir: allowed.CacheDir, Config: harness.Config{Offline: offline, Logger: slog.New(slog.NewTextHandler(&logs, nil))}}
	h.Start(strict)
	checkWithheld := func(what string, want ...string) {
		t.Helper()
		got := h.Engine.Withheld()
		var vs []string
		for _, w := range got {
			if w.Provider != p.String() || strings.Join(w.Platforms, ",") != "linux_amd64" {
				t.Errorf("%s: Withheld() = %+v", what, got)
			}
			vs = append(vs, w.Version)
		}
		if strings.Join(vs, ",") != strings.Join(want, ",") {
			t.Errorf("%s: Withheld() = %+v, want versions %v", what, got, want)
		}
	}
	checkWithheld("at start", "1.0.0", "9.0.0")
	for _, v := range []string{"1.0.0", "9.0.0"} {
		if !strings.Contains(logs.String(), "withholding a version imported without signature") || !strings.Contains(logs.String(), "version="+v) {
			t.Errorf("no warning about %s %s in the log:\n%s", p, v, logs.String())
		}
	}
	list, _, err := h.Engine.Versions(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	wantList := "1.0.0" // the origin's
	if offline {
		wantList = ""
	}
	var listed []string
	for _, e := range list.Versions {
		listed = append(listed, e.Version)
	}
	if strings.Join(listed, ",") != wantList {
		t.Errorf("version list %v, want %q (the origin's; 9.0.0 is withheld, 1.0.0 too when sealed)", listed, wantList)
	}
	originSHA := h.Origin.SHA256(harness.NS, harness.Type, "1.0.0", "linux_amd64")
	for _, v := range []string{"1.0.0", "9.0.0"} {
		pkg, err := h.Engine.Package(t.Context(), p, harness.MustVersion(t, v), []addrs.Platform{harness.MustPlatform(t, "linux_amd64")})
		if !offline && v == "1.0.0" {
			if err != nil || len(pkg.Archives) != 1 || pkg.Archives[0].SHA256 != originSHA {
				t.Errorf("mirror.Package 1.0.0: %+v, %v, want the origin's (sha256 %s)", pkg, err, originSHA)
			}
			a := h.Read(t.Context(), v, "linux_amd64")
			if sum := sha256.Sum256(a.Body); a.Err != nil || hex.EncodeToString(sum[:]) != originSHA {
				t.Errorf("archive of 1.0.0: %v, want the origin's", a.Err)
			}
		} else {
			// Connected, 9.0.0 is not in the origin's list at all.
			if !errors.Is(err, records.ErrVersionNotFound) || offline && !errors.Is(err, unsigned.ErrUnsignedOrigin) {
				t.Errorf("mirror.Package %s: %v, want withheld", v, err)
			}
			if arc, err := h.Engine.OpenArchive(t.Context(), p, harness.MustVersion(t, v), harness.MustPlatform(t, "linux_amd64")); !errors.Is(err, records.ErrVersionNotFound) {
				t.Errorf("OpenArchive %s: %v, want withheld", v, err)
				if err == nil {
					arc.Close()
				}
			}
		}
		if _, ok := h.Engine.CachedSize(shas[v]); !ok {
			t.Errorf("the imported archive of %s is gone", v)
		}
	}
	wantHits := 1
	if offline {
		wantHits = 0
	}
	if n := h.Origin.Hits("archive"); n != wantHits {
		t.Errorf("origin archive requests = %d, want %d", n, wantHits)
	}
	h.Stop()

	h.Start(allowed)
	if offline {
		checkWithheld("with the host named")
		a := h.Read(t.Context(), "9.0.0", "linux_amd64")
		if sum := sha256.Sum256(a.Body); a.Err != nil || hex.EncodeToString(sum[:]) != shas["9.0.0"] {
			t.Errorf("with the host named, 9.0.0 is not served: %v", a.Err)
		}
		return
	}
	// The origin's verified 1.0.0 has the version now; the import stays
	// set aside in its record, kept and listed.
	checkWithheld("with the host named", "1.0.0")
	a := h.Read(t.Context(), "1.0.0", "linux_amd64")
	if sum := sha256.Sum256(a.Body); a.Err != nil || hex.EncodeToString(sum[:]) != originSHA {
		t.Errorf("with the host named, 1.0.0 is not the origin's: %v", a.Err)
	}
	if _, ok := h.Engine.CachedSize(shas["1.0.0"]); !ok {
		t.Error("the imported archive of 1.0.0 is gone")
	}
}
