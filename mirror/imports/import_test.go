package imports_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// sourceEvidence starts an engine before an origin offering version 1.0.0
// of the harness's provider and returns it, the version and its evidence,
// as another cache would hand them to an import.
func sourceEvidence(t *testing.T) (*harness.Harness, versions.Version, *records.Evidence) {
	t.Helper()
	src := harness.New(t, harness.Options{})
	src.Origin.AddProvider(harness.NS, harness.Type, []string{"1.0.0"}, harness.Platforms)
	v := harness.MustVersion(t, "1.0.0")
	ev, err := src.Engine.Evidence(t.Context(), src.Provider(), v, nil)
	if err != nil {
		t.Fatal(err)
	}
	return src, v, ev
}

// A version imported from another cache's evidence into a sealed engine
// is served from it as if fetched from the Origin: the same evidence, and
// Verify passes from the cache alone. An archive of other bytes than the
// signed SHA256SUMS says is refused, and nothing of that version stored.
func TestImportFromEvidence(t *testing.T) {
	t.Parallel()
	src, v, ev := sourceEvidence(t)
	body := func(pl string) []byte { return src.Origin.Archive(harness.NS, harness.Type, "1.0.0", pl) }

	t.Run("tampered archive", func(t *testing.T) {
		dst := harness.New(t, harness.Options{Config: harness.Config{Offline: true}})
		in := enginetest.ImportedFrom(ev, func(pl string) []byte {
			b := bytes.Clone(body(pl))
			if pl == "linux_amd64" {
				b[len(b)/2] ^= 1
			}
			return b
		})
		in.Version = v
		_, err := dst.Engine.AirGap().Import(t.Context(), in)
		var ierr *imports.Error
		if !errors.Is(err, verify.ErrIntegrity) || !errors.As(err, &ierr) || in.Packages[ierr.Package].Platform != "linux_amd64" {
			t.Fatalf("Import of a tampered archive: %v, want an integrity error of linux_amd64", err)
		}
		if _, _, err := dst.Engine.Versions(t.Context(), dst.Provider()); err == nil {
			t.Error("the refused version is listed")
		}
		if _, err := dst.Packages("1.0.0"); err == nil {
			t.Error("the refused version is served")
		}
	})

	dst := harness.New(t, harness.Options{Config: harness.Config{Offline: true}})
	in := enginetest.ImportedFrom(ev, body)
	in.Version = v
	res, err := dst.Engine.AirGap().Import(t.Context(), in)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if len(res.Packages) != len(harness.Platforms) || res.Packages[0].Present || res.Packages[0].Size == 0 {
		t.Errorf("Import result %+v", res)
	}
	for _, pl := range harness.Platforms {
		if err := dst.VerifyCached(t.Context(), dst.Provider(), v, harness.MustPlatform(t, pl)); err != nil {
			t.Errorf("Verify %s after import: %v", pl, err)
		}
		if a := dst.Read(t.Context(), "1.0.0", pl); a.Err != nil || !bytes.Equal(a.Body, body(pl)) || a.Source != records.Hit {
			t.Errorf("archive %s after import: %v, %d bytes from %s", pl, a.Err, len(a.Body), a.Source)
		}
	}
	got, err := dst.Engine.Evidence(t.Context(), dst.Provider(), v, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The same, but for the download URL, which no signature covers and
	// an import does not keep (TestImportedDownloadURLNotContacted).
	platforms := slices.Clone(ev.Platforms)
	for i := range platforms {
		platforms[i].DownloadURL = ""
	}
	if !reflect.DeepEqual(got.Documents, ev.Documents) || !reflect.DeepEqual(got.Platforms, platforms) || got.Provenance != records.ProvenanceImported {
		t.Errorf("evidence after import differs:\n got %+v\nwant %+v", got, ev)
	}
	// Again: everything is present, nothing read.
	in = enginetest.ImportedFrom(ev, func(string) []byte { return nil })
	in.Version = v
	res, err = dst.Engine.AirGap().Import(t.Context(), in)
	if err != nil || !res.Packages[0].Present {
		t.Errorf("second Import: %+v, %v", res, err)
	}
}

// An unsigned import under a host that is no allowed origin makes the
// host local-only, across restarts: its imported providers are served,
// others are not found, and the host is never contacted. A package whose
// h1: differs from the one given is refused.
func TestImportUnsignedLocalOnlyHost(t *testing.T) {
	t.Parallel()
	opts := harness.Options{CacheDir: t.TempDir()}
	h := harness.New(t, opts)
	p := addrs.Provider{Hostname: "tf.corp.example", Namespace: "platform", Type: "thing"}
	v := harness.MustVersion(t, "1.0.0")
	zipped := enginetest.InHouseZip(t, "thing")
	h1, err := verify.H1(bytes.NewReader(zipped), int64(len(zipped)))
	if err != nil {
		t.Fatal(err)
	}
	imported := func(h1 string) imports.Imported {
		return imports.Imported{Provider: p, Version: v, Unsigned: true, Packages: []imports.Package{{
			Platform: "linux_amd64", Filename: "terraform-provider-thing_1.0.0_linux_amd64.zip", H1: h1, Document: -1,
			Open: func(context.Context) (io.ReadCloser, int64, error) {
				return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
			},
		}}}
	}
	if err := h.Engine.CheckOrigin(p); !errors.Is(err, discovery.ErrHostNotAllowed) {
		t.Fatalf("before import, CheckOrigin: %v", err)
	}
	if _, err := h.Engine.AirGap().Import(t.Context(), imported("h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")); !errors.Is(err, verify.ErrIntegrity) {
		t.Fatalf("Import with a wrong h1: %v, want an integrity error", err)
	}
	if _, err := h.Engine.AirGap().Import(t.Context(), imported(h1)); err != nil {
		t.Fatalf("Import: %v", err)
	}

	h.Stop()
	h.Start(opts)
	list, _, err := h.Engine.Versions(t.Context(), p)
	if err != nil {
		t.Fatalf("Versions of the in-house provider: %v", err)
	}
	if _, ok := list.Find(v); !ok || len(list.Versions) != 1 {
		t.Errorf("version list %+v", list.Versions)
	}
	pkg, err := h.Engine.Package(t.Context(), p, v, nil)
	if err != nil || len(pkg.Archives) != 1 || pkg.Archives[0].H1 != h1 {
		t.Fatalf("Package: %+v, %v", pkg, err)
	}
	arc, err := h.Engine.OpenArchive(t.Context(), p, v, harness.MustPlatform(t, "linux_amd64"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(arc)
	arc.Close()
	if err != nil || !bytes.Equal(got, zipped) {
		t.Errorf("archive: %v, %d bytes", err, len(got))
	}
	if _, err := h.Engine.Evidence(t.Context(), p, v, nil); !errors.Is(err, records.ErrNoEvidence) {
		t.Errorf("Evidence of an unsigned import: %v, want ErrNoEvidence", err)
	}
	if _, err := h.Engine.OpenArchive(t.Context(), p, v, harness.MustPlatform(t, "darwin_arm64")); !errors.Is(err, records.ErrPlatformNotFound) {
		t.Errorf("a platform not imported: %v, want ErrPlatformNotFound", err)
	}
	other := addrs.Provider{Hostname: p.Hostname, Namespace: "platform", Type: "other"}
	if _, _, err := h.Engine.Versions(t.Context(), other); !errors.Is(err, discovery.ErrNotFound) {
		t.Errorf("a provider not imported of the local-only host: %v, want not found", err)
	}
	err = h.Engine.ListCachedAfter("", "", func(cv harness.CachedVersion) error {
		if cv.Provenance != records.ProvenanceUnsigned || cv.HasEvidence {
			t.Errorf("ListCachedAfter: %+v", cv)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := h.Origin.TotalHits(); n != 0 {
		t.Errorf("the origin was asked %d times", n)
	}
}

// On a connected mirror, a version list that an import added to is
// refreshed from the origin on next use, whose list may have more.
func TestImportedListRefreshedWhenConnected(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	h.Origin.AddProvider(harness.NS, harness.Type, []string{"1.0.0", "2.0.0"}, harness.Platforms)
	v := harness.MustVersion(t, "1.0.0")
	ev, err := h.Engine.Evidence(t.Context(), h.Provider(), v, []addrs.Platform{harness.MustPlatform(t, "linux_amd64")})
	if err != nil {
		t.Fatal(err)
	}
	dst := harness.New(t, harness.Options{})
	dst.Origin.AddProvider(harness.NS, harness.Type, []string{"1.0.0", "2.0.0"}, harness.Platforms)
	in := enginetest.ImportedFrom(ev, func(pl string) []byte { return h.Origin.Archive(harness.NS, harness.Type, "1.0.0", pl) })
	in.Version = v
	if _, err := dst.Engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatalf("Import: %v", err)
	}
	if n := dst.Origin.TotalHits(); n != 0 {
		t.Errorf("Import asked the origin %d times", n)
	}
	list, st, err := dst.Engine.Versions(t.Context(), dst.Provider())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Fetched || len(list.Versions) != 2 {
		t.Errorf("version list after import: fetched %v, %+v; want the origin's two versions", st.Fetched, list.Versions)
	}
}

// An unsigned import that Import checked against no cached record must
// not end up inside the origin's signed record stored while its archives
// were read (a client's metadata fetch of the same version): it is
// refused, and the record stays the origin's alone.
func TestImportUnsignedDoesNotJoinRecordStoredMeanwhile(t *testing.T) {
	t.Parallel()
	// The host takes unsigned imports (Config.UnsignedHosts); without,
	// Import would refuse at once (TestUnsignedImportStaysInItsLane).
	h := harness.New(t, harness.Options{Config: harness.Config{UnsignedHosts: []string{harness.OriginHost}}})
	h.Origin.AddProvider(harness.NS, harness.Type, []string{"1.0.0"}, harness.Platforms)
	p, v := h.Provider(), harness.MustVersion(t, "1.0.0")
	zipped := enginetest.InHouseZip(t, harness.Type)
	opens := 0
	in := imports.Imported{Provider: p, Version: v, Unsigned: true, Packages: []imports.Package{{
		Platform: "freebsd_amd64", Filename: "terraform-provider-" + harness.Type + "_1.0.0_freebsd_amd64.zip", Document: -1,
		Open: func(ctx context.Context) (io.ReadCloser, int64, error) {
			// The first read sums the archive; the second commits it,
			// after Import looked for a cached record. In between, a
			// metadata fetch stores the origin's.
			if opens++; opens == 2 {
				if _, err := h.Engine.Package(ctx, p, v, nil); err != nil {
					t.Errorf("mirror.Package while importing: %v", err)
				}
			}
			return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
		},
	}}}
	_, err := h.Engine.AirGap().Import(t.Context(), in)
	if err == nil || !strings.Contains(err.Error(), "cannot be added from an import without signature") {
		t.Fatalf("Import: %v, want it refused: the version is cached with the origin's signature meanwhile", err)
	}
	if opens != 2 {
		t.Fatalf("the archive was opened %d times, want 2 (the test did not interleave)", opens)
	}
	ev, err := h.Engine.Evidence(t.Context(), p, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Provenance != records.ProvenanceOrigin || len(ev.Platforms) != len(harness.Platforms) {
		t.Errorf("after the refused import the record is %s with %d platforms, want the origin's %d", ev.Provenance, len(ev.Platforms), len(harness.Platforms))
	}
	if pkg, err := h.Engine.Package(t.Context(), p, v, []addrs.Platform{harness.MustPlatform(t, "freebsd_amd64")}); err == nil && len(pkg.Archives) > 0 {
		t.Errorf("the unsigned archive is served inside the origin's record: %+v", pkg.Archives)
	}
}

// refusals counts the engine's verification failures by reason.
type refusals struct {
	enginetest.NoMetrics
	mu sync.Mutex
	n  map[string]int
}

func (m *refusals) VerificationFailed(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n[reason]++
}

// An import refused by verification before any archive is read (its
// SHA256SUMS not what the signature signed) is logged and counted, with
// its reason, once, as a package fetched from the origin would be.
func TestImportRefusalLoggedAndCounted(t *testing.T) {
	t.Parallel()
	src, v, ev := sourceEvidence(t)
	var logs logbuf.Buffer
	m := &refusals{n: map[string]int{}}
	dst := harness.New(t, harness.Options{Config: harness.Config{Offline: true, Metrics: m, Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
	in := enginetest.ImportedFrom(ev, func(pl string) []byte { return src.Origin.Archive(harness.NS, harness.Type, "1.0.0", pl) })
	in.Version = v
	in.Documents[0].Content = append(bytes.Clone(in.Documents[0].Content), "0000000000000000000000000000000000000000000000000000000000000000  extra.zip\n"...)
	_, err := dst.Engine.AirGap().Import(t.Context(), in)
	var verr *verify.Error
	if !errors.As(err, &verr) {
		t.Fatalf("Import of a SHA256SUMS the signature does not cover: %v, want a verification error", err)
	}
	m.mu.Lock()
	counted := maps.Clone(m.n)
	m.mu.Unlock()
	if want := map[string]int{string(verr.Reason): 1}; !maps.Equal(counted, want) {
		t.Errorf("verification failures counted %v, want %v", counted, want)
	}
	if got := strings.Count(logs.String(), "provider package failed verification"); got != 1 {
		t.Errorf("%d log lines of the refusal, want 1:\n%s", got, logs.String())
	}
}

// An import of a package whose archive the cache holds under another
// address (the same zip of another host) adds the package, and says so:
// it is not present, though its bytes were; imported again, it is. The
// import had reported it "already present", the version left out of
// those it imported.
func TestImportOfBytesCachedUnderAnotherAddress(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	v := harness.MustVersion(t, "1.0.0")
	zipped := enginetest.InHouseZip(t, "thing")
	imported := func(host string) imports.Imported {
		return imports.Imported{Provider: addrs.Provider{Hostname: svchost.Hostname(host), Namespace: "platform", Type: "thing"}, Version: v, Unsigned: true,
			Packages: []imports.Package{{Platform: "linux_amd64", Filename: "terraform-provider-thing_1.0.0_linux_amd64.zip", Document: -1,
				Open: func(context.Context) (io.ReadCloser, int64, error) {
					return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
				}}}}
	}
	for i, step := range []struct {
		host    string
		present bool
	}{{"tf.corp.example", false}, {"tf.other.example", false}, {"tf.other.example", true}} {
		res, err := h.Engine.AirGap().Import(t.Context(), imported(step.host))
		if err != nil || len(res.Packages) != 1 || res.Packages[0].Present != step.present {
			t.Errorf("import %d, under %s: %+v, %v; want present %v", i+1, step.host, res, err, step.present)
		}
	}
}

// A version imported first on a publisher's key alone, whose anchor
// vouches for no protocols, then from an export that gives them, takes
// them in its packages' evidence (the download answer's "protocols"), as
// its version list does: they had stayed empty (null) there, the
// archives being present already.
func TestImportGivesProtocolsToPackagesHeld(t *testing.T) {
	t.Parallel()
	src, v, ev := sourceEvidence(t)
	body := func(pl string) []byte { return src.Origin.Archive(harness.NS, harness.Type, "1.0.0", pl) }
	dst := harness.New(t, harness.Options{Config: harness.Config{Offline: true}})
	bare := enginetest.ImportedFrom(ev, body)
	bare.Version = v
	bare.Protocols = nil
	for i := range bare.Packages {
		bare.Packages[i].Protocols = nil
	}
	if _, err := dst.Engine.AirGap().Import(t.Context(), bare); err != nil {
		t.Fatal(err)
	}
	full := enginetest.ImportedFrom(ev, func(string) []byte { return nil })
	full.Version = v
	if _, err := dst.Engine.AirGap().Import(t.Context(), full); err != nil {
		t.Fatal(err)
	}
	got, err := dst.Engine.Evidence(t.Context(), dst.Provider(), v, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, pe := range got.Platforms {
		if len(pe.Protocols) == 0 || !slices.Equal(pe.Protocols, ev.Platforms[i].Protocols) {
			t.Errorf("%s: protocols %q, want %q", pe.Platform, pe.Protocols, ev.Platforms[i].Protocols)
		}
	}
}
