package releases_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// noOrigin is an origin that answers nothing.
type noOrigin struct{}

func (noOrigin) FetchFile(context.Context, addrs.Provider, string, int64) ([]byte, error) {
	return nil, errors.New("no origin")
}

func (noOrigin) OpenArchive(context.Context, addrs.Provider, string) (io.ReadCloser, int64, error) {
	return nil, 0, errors.New("no origin")
}

// archiveOf is an ImportedArchive reading data.
func archiveOf(name string, data []byte) releases.ImportedArchive {
	return releases.ImportedArchive{Filename: name, Open: func(context.Context) (io.ReadCloser, int64, error) {
		return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
	}}
}

// TestAirGapHeldAndImport: Held lists the versions with a verified
// SHA256SUMS and a cached archive, with the archives cached; another side
// on the same cache whose keys did not sign them lists them as failing,
// naming the setting of the keys. An
// import on a sealed side takes a version verified with its keys, which it
// then lists and serves at once, and refuses one whose signature is by
// another key, an archive named twice, one its SHA256SUMS does not sign,
// or a changed one, keeping nothing.
func TestAirGapHeldAndImport(t *testing.T) {
	o := startOrigin(t)
	a := newRig(t, o, "", false)
	ctx := context.Background()
	if _, _, err := a.read(releases.HashiCorp, "terraform", "1.6.0", tfZip); err != nil {
		t.Fatal(err)
	}
	a.waitIdle()
	var held []releases.HeldVersion
	if err := a.rel.AirGap().Held(func(h releases.HeldVersion) error { held = append(held, h); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 || held[0].Sums.Version != "1.6.0" || len(held[0].Cached) != 1 || held[0].Cached[0].Filename != tfZip {
		t.Fatalf("held: %+v", held)
	}
	rotated, err := releases.New(releases.Config{HashiCorpURL: o.HashiCorpURL, HashiCorpKeys: []string{o.OpenTofuKey}, OpenTofuKeys: []string{o.OpenTofuKey}},
		noOrigin{}, a.engine, a.store)
	if err != nil {
		t.Fatal(err)
	}
	defer rotated.Close()
	var rheld []releases.HeldVersion
	if err := rotated.AirGap().Held(func(h releases.HeldVersion) error { rheld = append(rheld, h); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(rheld) != 1 || rheld[0].Sums != nil || rheld[0].Err == nil || rheld[0].Version != "1.6.0" || !strings.Contains(rheld[0].Err.Error(), "--releases-hashicorp-keys") {
		t.Fatalf("held under other keys: %+v", rheld)
	}

	sums := o.Sums("hashicorp", "terraform", "1.6.0")
	sig, err := a.rel.Document(ctx, releases.HashiCorp, "terraform", "1.6.0", "terraform_1.6.0_SHA256SUMS.sig")
	if err != nil {
		t.Fatal(err)
	}
	zip := o.Archive("terraform", "1.6.0", "linux_amd64")
	changed := bytes.Clone(zip)
	changed[len(changed)/2] ^= 1
	in := func(sig []byte, archives ...releases.ImportedArchive) releases.Imported {
		return releases.Imported{Publisher: releases.HashiCorp, Product: "terraform", Version: "1.6.0", Document: sums, Signature: sig, Archives: archives}
	}
	other, err := openpgp.NewEntity("someone else", "", "other@example.invalid", nil)
	if err != nil {
		t.Fatal(err)
	}
	var otherSig bytes.Buffer
	if err := openpgp.DetachSign(&otherSig, other, bytes.NewReader(sums), nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		in   releases.Imported
		want string
	}{
		{"signature by another key", in(otherSig.Bytes(), archiveOf(tfZip, zip)), "does not verify with the hashicorp keys"},
		{"named twice", in(sig, archiveOf(tfZip, zip), archiveOf(tfZip, zip)), "is given twice"},
		{"not signed", in(sig, archiveOf("terraform_1.6.0_linux_arm64.zip", zip)), "is not an archive its signed"},
		{"changed", in(sig, archiveOf(tfZip, changed)), "its signed SHA256SUMS says"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newRig(t, o, "", true)
			if _, err := b.rel.AirGap().Import(ctx, tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("import: %v, want %q", err, tc.want)
			}
			if b.engine.HasBlob(fakeorigin.ArchiveSHA256("terraform", "1.6.0", "linux_amd64")) {
				t.Error("the archive was kept")
			}
			// A bundle's file is no origin's answer.
			if told := b.metrics.toldOrigins(); len(told) != 0 {
				t.Errorf("Config.OriginRefused told %v of an import", told)
			}
			if _, err := b.rel.Sums(ctx, releases.HashiCorp, "terraform", "1.6.0"); err == nil {
				t.Error("the SHA256SUMS was kept")
			}
		})
	}

	b := newRig(t, o, "", true)
	res, err := b.rel.AirGap().Import(ctx, in(sig, archiveOf(tfZip, zip)))
	if err != nil || res.Archives != 1 || res.Bytes != int64(len(zip)) || res.SignedAt.IsZero() {
		t.Fatalf("import: %+v, %v", res, err)
	}
	list, _, err := b.rel.Versions(ctx, releases.HashiCorp, "terraform")
	// The build imported alone: the other one its SHA256SUMS signs is
	// not held, and not named.
	if err != nil || len(list.Versions) != 1 || list.Versions[0].Version != "1.6.0" || len(list.Versions[0].Builds) != 1 || list.Versions[0].Builds[0].Filename != tfZip {
		t.Fatalf("the sealed side lists %+v, %v; want 1.6.0 with %s alone", list, err, tfZip)
	}
	got, _, err := b.read(releases.HashiCorp, "terraform", "1.6.0", tfZip)
	if err != nil || !bytes.Equal(got, zip) {
		t.Fatalf("served: %v", err)
	}
	if res, err := b.rel.AirGap().Import(ctx, in(sig, archiveOf(tfZip, zip))); err != nil || res.Present != 1 {
		t.Fatalf("import again: %+v, %v", res, err)
	}
}

// TestAirGapImportTakesOnlyTheVersionsNames: a bundle that gives a
// version another release's SHA256SUMS and signature (the publisher's,
// for 1.5.7, given as 1.6.0) is refused, keeping nothing; one whose
// OpenTofu file names are no plain file names of the version is taken,
// and the sealed list names only the plain ones.
func TestAirGapImportTakesOnlyTheVersionsNames(t *testing.T) {
	o := startOrigin(t)
	a := newRig(t, o, "", false)
	ctx := context.Background()
	old, err := a.rel.Sums(ctx, releases.HashiCorp, "terraform", "1.5.7")
	if err != nil {
		t.Fatal(err)
	}
	b := newRig(t, o, "", true)
	replayed := releases.Imported{Publisher: releases.HashiCorp, Product: "terraform", Version: "1.6.0", Document: old.Document,
		Signature: old.Signature, Archives: []releases.ImportedArchive{archiveOf("terraform_1.5.7_linux_amd64.zip", o.Archive("terraform", "1.5.7", "linux_amd64"))}}
	if _, err := b.rel.AirGap().Import(ctx, replayed); err == nil || !strings.Contains(err.Error(), "names no file of terraform 1.6.0") {
		t.Fatalf("import of 1.5.7's SHA256SUMS as 1.6.0: %v", err)
	}
	if _, err := b.rel.HeldSums(releases.HashiCorp, "terraform", "1.6.0"); err == nil {
		t.Error("the SHA256SUMS was kept")
	}

	tofu, err := a.rel.Sums(ctx, releases.OpenTofu, releases.TofuProduct, "1.8.0")
	if err != nil {
		t.Fatal(err)
	}
	in := releases.Imported{Publisher: releases.OpenTofu, Product: releases.TofuProduct, Version: "1.8.0", Document: tofu.Document,
		Signature: tofu.Signature, Archives: []releases.ImportedArchive{archiveOf(tofuZip, o.Archive("tofu", "1.8.0", "linux_amd64"))},
		Files: []string{tofuZip, "tofu_1.8.0_linux_amd64.zip?x=1", "tofu_1.8.0_..%2Fapi.json", "tofu_1.8.0_<b>"}}
	if _, err := b.rel.AirGap().Import(ctx, in); err != nil {
		t.Fatal(err)
	}
	list, _, err := b.rel.Versions(ctx, releases.OpenTofu, releases.TofuProduct)
	if err != nil || len(list.Versions) != 1 || !slices.Equal(list.Versions[0].Files, []string{tofuZip}) {
		t.Fatalf("the sealed side lists %+v, %v; want %s alone", list, err, tofuZip)
	}
}

// TestAirGapImportRefusesAPassedThroughFileOfAnotherShape: a bundle whose
// OpenTofu cosign signature or certificate is not what cosign writes (an
// error page kept by a proxy, say) is refused, naming the file and
// keeping nothing; the real files are taken and served byte for byte.
func TestAirGapImportRefusesAPassedThroughFileOfAnotherShape(t *testing.T) {
	const sigName, pemName = "tofu_1.8.0_SHA256SUMS.sig", "tofu_1.8.0_SHA256SUMS.pem"
	o := startOrigin(t)
	a := newRig(t, o, "", false)
	ctx := context.Background()
	tofu, err := a.rel.Sums(ctx, releases.OpenTofu, releases.TofuProduct, "1.8.0")
	if err != nil {
		t.Fatal(err)
	}
	real := map[string][]byte{sigName: o.CosignFile("tofu", "1.8.0", sigName), pemName: o.CosignFile("tofu", "1.8.0", pemName)}
	in := func(passed map[string][]byte) releases.Imported {
		return releases.Imported{Publisher: releases.OpenTofu, Product: releases.TofuProduct, Version: "1.8.0", Document: tofu.Document,
			Signature: tofu.Signature, Archives: []releases.ImportedArchive{archiveOf(tofuZip, o.Archive("tofu", "1.8.0", "linux_amd64"))},
			Files: []string{tofuZip}, PassedThrough: passed}
	}
	for _, name := range []string{sigName, pemName} {
		t.Run(name, func(t *testing.T) {
			b := newRig(t, o, "", true)
			bad := map[string][]byte{sigName: real[sigName], pemName: real[pemName]}
			bad[name] = []byte("<!DOCTYPE html>\n<html><body>Blocked by policy</body></html>\n")
			_, err := b.rel.AirGap().Import(ctx, in(bad))
			if err == nil || !strings.Contains(err.Error(), name+": is not a cosign file") {
				t.Fatalf("import with an HTML page as %s: %v", name, err)
			}
			if _, err := b.rel.HeldSums(releases.OpenTofu, releases.TofuProduct, "1.8.0"); err == nil {
				t.Error("the SHA256SUMS was kept")
			}
			if _, err := b.rel.Document(ctx, releases.OpenTofu, releases.TofuProduct, "1.8.0", name); err == nil {
				t.Errorf("%s is served", name)
			}
		})
	}
	b := newRig(t, o, "", true)
	if _, err := b.rel.AirGap().Import(ctx, in(real)); err != nil {
		t.Fatal(err)
	}
	for name, want := range real {
		if got, err := b.rel.Document(ctx, releases.OpenTofu, releases.TofuProduct, "1.8.0", name); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s after the import: %q, %v", name, got, err)
		}
	}
}
