package imports_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// A record of an earlier release (schema 1, without evidence) that an
// import would replace keeps the platforms the import does not carry: on
// a sealed mirror they cannot be fetched again, and the origin's path
// (fetchPackage) keeps them too, refusing rather than let one vanish. An
// import of every platform it has replaces it, with the evidence.
func TestImportKeepsPlatformsOfAnEarlierRecord(t *testing.T) {
	t.Parallel()
	src, v, ev := sourceEvidence(t)
	body := func(pl string) []byte { return src.Origin.Archive(harness.NS, harness.Type, "1.0.0", pl) }
	dst := harness.New(t, harness.Options{Config: harness.Config{Offline: true}})
	p := dst.Provider()

	// The earlier release cached linux_amd64 and darwin_arm64.
	old := []string{"darwin_arm64", "linux_amd64"}
	archives := ""
	for i, pl := range old {
		zip := body(pl)
		sha := src.Origin.SHA256(harness.NS, harness.Type, "1.0.0", pl)
		h1, err := verify.H1(bytes.NewReader(zip), int64(len(zip)))
		if err != nil {
			t.Fatal(err)
		}
		w, err := dst.Store.NewBlobWriter(sha)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(zip) //nolint:errcheck
		if _, err := w.Commit(h1); err != nil {
			t.Fatal(err)
		}
		w.Close()
		if i > 0 {
			archives += ","
		}
		archives += fmt.Sprintf(`%q:{"filename":"terraform-provider-random_1.0.0_%s.zip","sha256":%q}`, pl, pl, sha)
	}
	list := `{"schema":1,"versions":[{"version":"1.0.0","platforms":["darwin_arm64","linux_amd64"]}]}`
	rec := `{"schema":1,"version":"1.0.0","sums":{},"archives":{` + archives + `},"verified_at":"2025-06-01T12:00:00Z"}`
	if err := dst.Store.PutMeta(records.VersionsKey(p), json.RawMessage(list)); err != nil {
		t.Fatal(err)
	}
	if err := dst.Store.PutMeta(records.PackageKey(p, v), json.RawMessage(rec)); err != nil {
		t.Fatal(err)
	}
	if a := dst.Read(t.Context(), "1.0.0", "darwin_arm64"); a.Err != nil {
		t.Fatalf("before the import, darwin_arm64: %v", a.Err)
	}

	// An import of 1.0.0 for linux_amd64 only.
	linux := ev.Platforms[slicesIndex(ev.Platforms, "linux_amd64")]
	one := *ev
	one.Platforms = []records.PlatformEvidence{linux}
	in := enginetest.ImportedFrom(&one, body)
	in.Version = v
	_, err := dst.Engine.AirGap().Import(t.Context(), in)
	t.Logf("import of linux_amd64 alone: %v", err)
	for _, pl := range old {
		if a := dst.Read(t.Context(), "1.0.0", pl); a.Err != nil || !bytes.Equal(a.Body, body(pl)) {
			t.Errorf("after the import, 1.0.0 %s: %v; the earlier release's package, which a sealed mirror cannot fetch again, is no longer served", pl, a.Err)
		}
	}
	if _, err := dst.Engine.Package(t.Context(), p, v, []addrs.Platform{harness.MustPlatform(t, "darwin_arm64")}); err != nil {
		t.Errorf("after the import, the package metadata of darwin_arm64: %v", err)
	}

	// Every platform the earlier record has: taken, with the evidence.
	two := *ev
	two.Platforms = []records.PlatformEvidence{ev.Platforms[slicesIndex(ev.Platforms, "darwin_arm64")], linux}
	in = enginetest.ImportedFrom(&two, body)
	in.Version = v
	if _, err := dst.Engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatalf("Import of every platform: %v", err)
	}
	got, err := dst.Engine.Evidence(t.Context(), p, v, nil)
	if err != nil || len(got.Platforms) != 2 {
		t.Errorf("evidence after the import of every platform: %+v, %v", got, err)
	}
}

func slicesIndex(pes []records.PlatformEvidence, pl string) int {
	for i, pe := range pes {
		if pe.Platform == pl {
			return i
		}
	}
	panic(pl)
}
