package airgap

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// cliEng is an engine with its CLI releases side (CLISide), as
// tfmirror wires it.
type cliEng struct {
	*mirror.Engine
	rel    *releases.Releases
	served *served.Releases // rel behind the package policy, as the door reaches it
}

func (e cliEng) CLIReleases() CLIReleases { return e.rel.AirGap() }

func (e cliEng) ServedCLI() ServedCLI { return e.served }

// cliOf is the engine of a with its CLI releases side, as tfmirror wires it.
func cliOf(a *harness.ReleasesSide) cliEng {
	return cliEng{Engine: a.Engine, rel: a.Releases, served: a.Served}
}

const (
	cliPlatform = "linux_amd64"
	tfRelDir    = "releases/hashicorp/terraform/1.6.0"
	tofuRelDir  = "releases/opentofu/tofu/1.8.0"
)

var (
	tfZipName   = fakeorigin.ArchiveName("terraform", "1.6.0", cliPlatform)
	tofuZipName = fakeorigin.ArchiveName("tofu", "1.8.0", cliPlatform)
)

// exportedCLI has a connected mirror pull terraform 1.6.0 and tofu 1.8.0
// (one platform each) through from the stand-in origins (cachedCLI), and
// exports its cache to a directory.
func exportedCLI(t *testing.T) (o *fakeorigin.Releases, out string, key *ExportKey) {
	t.Helper()
	o, a := cachedCLI(t)
	out, key = filepath.Join(t.TempDir(), "out"), newKey(t, "exporter")
	var reports []string
	sum, err := Export(context.Background(), cliOf(a), servedBy(t, a.Engine, nil), cliOf(a), Selection{}, out, key, func(s string) { reports = append(reports, s) })
	if err != nil || sum.Failed != 0 || sum.CLIArchives != 2 || len(reports) != 0 {
		t.Fatalf("export: %+v, %v, %q", sum, err, reports)
	}
	return o, out, key
}

// cachedCLI is a connected mirror that pulled terraform 1.6.0 and tofu
// 1.8.0 (one platform each) through from the stand-in origins.
func cachedCLI(t *testing.T) (*fakeorigin.Releases, *harness.ReleasesSide) {
	t.Helper()
	o, err := fakeorigin.StartReleases()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	o.Add("hashicorp", "terraform", "1.6.0", cliPlatform, "darwin_arm64")
	o.Add("opentofu", "tofu", "1.8.0", cliPlatform, "darwin_arm64")
	a := harness.StartReleasesSide(t, o, releases.Config{})
	ctx := context.Background()
	for _, f := range []struct {
		pub              releases.Publisher
		product, version string
		name             string
	}{
		{releases.HashiCorp, "terraform", "1.6.0", tfZipName},
		{releases.OpenTofu, "tofu", "1.8.0", tofuZipName},
	} {
		if _, _, err := a.Releases.Versions(ctx, f.pub, f.product); err != nil {
			t.Fatal(err)
		}
		arc, err := a.Releases.OpenArchive(ctx, f.pub, f.product, f.version, f.name)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, arc)
		arc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	// OpenTofu's cosign files, which the door passes through.
	for _, name := range []string{"tofu_1.8.0_SHA256SUMS.sig", "tofu_1.8.0_SHA256SUMS.pem"} {
		if _, err := a.Releases.Document(ctx, releases.OpenTofu, "tofu", "1.8.0", name); err != nil {
			t.Fatal(err)
		}
	}
	enginetest.WaitIdle(t, func(ctx context.Context) error { return mirror.WaitIdle(ctx, a.Engine) })
	return o, a
}

// sealedCLI is a sealed mirror with a CLI releases side that trusts o's
// publisher keys, and no origin it could reach; products are the
// HashiCorp products it serves (default terraform).
func sealedCLI(t *testing.T, o *fakeorigin.Releases, products ...string) cliEng {
	t.Helper()
	side := harness.StartReleasesSide(t, o, releases.Config{HashiCorpProducts: products, Offline: true})
	return cliEng{side.Engine, side.Releases, side.Served}
}

func importCLI(t *testing.T, engine Engine, side CLISide, in string, key *ExportKey) (ImportSummary, []string) {
	t.Helper()
	var reports []string
	sum, err := Import(context.Background(), engine, in, ImportOptions{Trust: Trust{ExportKeys: publicOf(t, key)}, ScratchDir: t.TempDir(), CLI: side},
		func(s string) { reports = append(reports, s) })
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	return sum, reports
}

// resign signs, with key, a manifest of every file now in out: what a
// compromised exporting mirror could make.
func resign(t *testing.T, out string, key *ExportKey) {
	t.Helper()
	ef := &exportFiles{out: out, dir: outFor(t, out), files: map[string]manifestFile{}, prior: map[string]manifestFile{}}
	err := filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		if n := d.Name(); n == manifestName || n == manifestSigName {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		ef.addData(path, data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writeManifest(key, ef); err != nil {
		t.Fatal(err)
	}
}

func sha256Of(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// TestExportImportCLIReleases: an export carries each cached CLI version
// (its SHA256SUMS, signature, the cached archives and its record), listed
// in the manifest's releases section; a sealed mirror that imports it
// lists and serves those versions byte for byte as the origin had them,
// without asking the origin; a second import finds them present.
func TestExportImportCLIReleases(t *testing.T) {
	o, out, key := exportedCLI(t)
	m, err := readManifest(out, publicOf(t, key))
	if err != nil {
		t.Fatal(err)
	}
	if m.Releases == nil || m.Releases.Format != releasesFormat || len(m.Releases.Versions) != 2 {
		t.Fatalf("releases section: %+v", m.Releases)
	}
	for _, rel := range []string{
		tfRelDir + "/" + tfZipName, tfRelDir + "/terraform_1.6.0_SHA256SUMS", tfRelDir + "/terraform_1.6.0_SHA256SUMS.sig", tfRelDir + "/release.json",
		tofuRelDir + "/" + tofuZipName, tofuRelDir + "/tofu_1.8.0_SHA256SUMS", tofuRelDir + "/tofu_1.8.0_SHA256SUMS.gpgsig", tofuRelDir + "/release.json",
	} {
		if !strings.Contains(strings.Join(paths(m), "\n"), rel) {
			t.Errorf("the manifest lacks %s", rel)
		}
	}
	if _, err := os.Stat(filepath.Join(out, tfRelDir, fakeorigin.ArchiveName("terraform", "1.6.0", "darwin_arm64"))); err == nil {
		t.Error("an archive the cache does not hold was exported")
	}
	o.SetDown(true)
	before := o.TotalHits()

	b := sealedCLI(t, o)
	sum, reports := importCLI(t, b, b, out, key)
	if sum.Failed != 0 || sum.CLIArchives != 2 || sum.CLIHeld != 0 || len(reports) != 0 {
		t.Fatalf("import: %+v %q", sum, reports)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		pub              releases.Publisher
		product, version string
		name             string
	}{
		{releases.HashiCorp, "terraform", "1.6.0", tfZipName},
		{releases.OpenTofu, "tofu", "1.8.0", tofuZipName},
	} {
		list, _, err := b.rel.Versions(ctx, tc.pub, tc.product)
		if err != nil || len(list.Versions) != 1 || list.Versions[0].Version != tc.version {
			t.Fatalf("%s: the sealed mirror lists %+v, %v", tc.product, list, err)
		}
		doc, err := b.rel.Document(ctx, tc.pub, tc.product, tc.version, releases.SumsName(tc.pub, tc.product, tc.version))
		if err != nil || !bytes.Equal(doc, o.Sums(string(tc.pub), tc.product, tc.version)) {
			t.Fatalf("%s: SHA256SUMS %q, %v", tc.product, doc, err)
		}
		arc, err := b.rel.OpenArchive(ctx, tc.pub, tc.product, tc.version, tc.name)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, err := io.ReadAll(arc)
		arc.Close()
		if err != nil || !bytes.Equal(got, o.Archive(tc.product, tc.version, cliPlatform)) {
			t.Fatalf("%s: not the origin's bytes (%v)", tc.name, err)
		}
	}
	if list, _, _ := b.rel.Versions(ctx, releases.OpenTofu, "tofu"); len(list.Versions[0].Files) == 0 {
		t.Error("OpenTofu's list entry came without its files")
	}
	for _, name := range []string{"tofu_1.8.0_SHA256SUMS.sig", "tofu_1.8.0_SHA256SUMS.pem"} {
		exported, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(tofuRelDir), name))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := b.rel.Document(ctx, releases.OpenTofu, "tofu", "1.8.0", name); err != nil || !bytes.Equal(got, exported) {
			t.Errorf("%s passed through on the sealed side: %q, %v", name, got, err)
		}
	}
	if n := o.TotalHits() - before; n != 0 {
		t.Errorf("the sealed mirror asked the origin %d times", n)
	}
	sum, reports = importCLI(t, b, b, out, key)
	if sum.Failed != 0 || sum.CLIArchives != 0 || sum.CLIPresent != 2 {
		t.Fatalf("import again: %+v %q", sum, reports)
	}
}

// TestExportSelectsCLIReleases: --provider naming the address the policy
// names a CLI by selects it (and only it); naming a provider leaves CLIs
// out, as it does modules; --platforms selects archives.
func TestExportSelectsCLIReleases(t *testing.T) {
	tf, err := addrs.ParseProvider(releases.Address(releases.HashiCorp, "terraform"))
	if err != nil {
		t.Fatal(err)
	}
	aws, _ := addrs.ParseProvider("hashicorp/aws")
	for _, tc := range []struct {
		sel  Selection
		want bool
	}{
		{Selection{}, true},
		{Selection{Providers: []addrs.Provider{tf}}, true},
		{Selection{Providers: []addrs.Provider{tf}, Versions: []string{"1.6.0"}}, true},
		{Selection{Providers: []addrs.Provider{tf}, Versions: []string{"1.5.7"}}, false},
		{Selection{Providers: []addrs.Provider{aws}}, false},
		{Selection{Versions: []string{"1.6.0"}}, false},
	} {
		if got := tc.sel.wantsCLI(releases.HashiCorp, "terraform", "1.6.0"); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.sel, got, tc.want)
		}
	}
}

// TestImportCLIReleasesRefused: a CLI version is refused whole, nothing
// of it kept (no archive in the cache, no SHA256SUMS, not listed), when an
// archive was changed, when its SHA256SUMS was changed (even under a
// manifest the exporting key signed again), when its signature is by a
// key other than the publisher's configured in the importing mirror,
// when its record names a file outside its directory or an archive its
// SHA256SUMS does not sign, when its files are links, and when no trusted
// export key signed the manifest.
func TestImportCLIReleasesRefused(t *testing.T) {
	other, err := openpgp.NewEntity("someone else", "", "other@example.invalid", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	tfZip := filepath.FromSlash(tfRelDir + "/" + tfZipName)
	tfSums := filepath.FromSlash(tfRelDir + "/terraform_1.6.0_SHA256SUMS")
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, out string, key *ExportKey)
		want   string
	}{
		{"tampered archive", func(t *testing.T, out string, key *ExportKey) {
			data, _ := os.ReadFile(filepath.Join(out, tfZip))
			data[len(data)/2] ^= 1
			write(t, filepath.Join(out, tfZip), string(data))
		}, "its signed SHA256SUMS says"},
		{"tampered archive, manifest signed again", func(t *testing.T, out string, key *ExportKey) {
			data, _ := os.ReadFile(filepath.Join(out, tfZip))
			data[len(data)/2] ^= 1
			write(t, filepath.Join(out, tfZip), string(data))
			resign(t, out, key)
		}, "the signed terraform_1.6.0_SHA256SUMS"},
		{"tampered SHA256SUMS, manifest signed again", func(t *testing.T, out string, key *ExportKey) {
			zip, _ := os.ReadFile(filepath.Join(out, tfZip))
			zip[len(zip)/2] ^= 1
			write(t, filepath.Join(out, tfZip), string(zip))
			sums, _ := os.ReadFile(filepath.Join(out, tfSums))
			fixed := strings.Replace(string(sums), fakeorigin.ArchiveSHA256("terraform", "1.6.0", cliPlatform), sha256Of(zip), 1)
			write(t, filepath.Join(out, tfSums), fixed)
			resign(t, out, key)
		}, "does not verify with the hashicorp keys this mirror trusts"},
		{"signature by another key", func(t *testing.T, out string, key *ExportKey) {
			sums, _ := os.ReadFile(filepath.Join(out, tfSums))
			var sig bytes.Buffer
			if err := openpgp.DetachSign(&sig, other, bytes.NewReader(sums), nil); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(out, tfSums+".sig"), sig.String())
			resign(t, out, key)
		}, "does not verify with the hashicorp keys this mirror trusts"},
		{"record names a file outside", func(t *testing.T, out string, key *ExportKey) {
			rec := filepath.Join(out, filepath.FromSlash(tfRelDir), releaseFileName)
			var rf releaseFile
			data, _ := os.ReadFile(rec)
			if err := json.Unmarshal(data, &rf); err != nil {
				t.Fatal(err)
			}
			rf.Archives = []string{"../../../../" + manifestName}
			data, _ = json.Marshal(rf)
			write(t, rec, string(data))
			resign(t, out, key)
		}, "which is not in its directory"},
		{"record names an archive its SHA256SUMS does not", func(t *testing.T, out string, key *ExportKey) {
			rec := filepath.Join(out, filepath.FromSlash(tfRelDir), releaseFileName)
			var rf releaseFile
			data, _ := os.ReadFile(rec)
			if err := json.Unmarshal(data, &rf); err != nil {
				t.Fatal(err)
			}
			extra := "terraform_1.6.0_freebsd_amd64.zip"
			zip, _ := os.ReadFile(filepath.Join(out, tfZip))
			write(t, filepath.Join(out, filepath.FromSlash(tfRelDir), extra), string(zip))
			rf.Archives = append(rf.Archives, extra)
			data, _ = json.Marshal(rf)
			write(t, rec, string(data))
			resign(t, out, key)
		}, "is not an archive its signed terraform_1.6.0_SHA256SUMS lists"},
		{"archive is a link", func(t *testing.T, out string, key *ExportKey) {
			outside := filepath.Join(t.TempDir(), tfZipName)
			data, _ := os.ReadFile(filepath.Join(out, tfZip))
			write(t, outside, string(data))
			os.Remove(filepath.Join(out, tfZip))
			if err := os.Symlink(outside, filepath.Join(out, tfZip)); err != nil {
				t.Fatal(err)
			}
		}, "a symbolic link"},
		{"version directory is a link", func(t *testing.T, out string, key *ExportKey) {
			elsewhere := filepath.Join(t.TempDir(), "1.6.0")
			if err := os.Rename(filepath.Join(out, filepath.FromSlash(tfRelDir)), elsewhere); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, filepath.Join(out, filepath.FromSlash(tfRelDir))); err != nil {
				t.Fatal(err)
			}
		}, "is not a directory"},
		{"manifest signed by an untrusted key", func(t *testing.T, out string, key *ExportKey) {
			resign(t, out, newKey(t, "stranger"))
		}, "no trusted key vouches for it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, out, key := exportedCLI(t)
			tc.change(t, out, key)
			o.SetDown(true)
			b := sealedCLI(t, o)
			sum, reports := importCLI(t, b, b, out, key)
			joined := strings.Join(reports, "\n")
			if sum.Failed == 0 || !strings.Contains(joined, "terraform 1.6.0 refused") || !strings.Contains(joined, tc.want) {
				t.Fatalf("import: %+v\n%s\nwant a refusal of terraform 1.6.0 saying %q", sum, joined, tc.want)
			}
			for _, pl := range []string{cliPlatform, "darwin_arm64"} {
				if b.HasBlob(fakeorigin.ArchiveSHA256("terraform", "1.6.0", pl)) {
					t.Errorf("the refused version's %s archive is in the cache", pl)
				}
			}
			ctx := context.Background()
			if _, err := b.rel.Sums(ctx, releases.HashiCorp, "terraform", "1.6.0"); err == nil {
				t.Error("the refused version's SHA256SUMS is kept")
			}
			if list, _, err := b.rel.Versions(ctx, releases.HashiCorp, "terraform"); err == nil && len(list.Versions) != 0 {
				t.Errorf("the refused version is listed: %+v", list)
			}
		})
	}
}

// TestImportCLIReleasesUnderThePolicy: an import is a transfer, as for
// providers: a version the importing mirror's policy denies is stored,
// counted and reported as held, and refused to clients until the policy
// allows it; and a product the mirror does not serve is refused.
func TestImportCLIReleasesUnderThePolicy(t *testing.T) {
	o, out, key := exportedCLI(t)
	b := sealedCLI(t, o)
	b.SetPolicy(enginetest.DecodePolicy(t, `
deny_version "releases.hashicorp.com/hashicorp/terraform" {
  versions = ["1.6.0"]
  reason   = "use 1.5.7"
}
`))
	sum, reports := importCLI(t, b, b, out, key)
	if sum.Failed != 0 || sum.CLIHeld != 1 || sum.CLIArchives != 2 || len(reports) != 1 || !strings.Contains(reports[0], "use 1.5.7") {
		t.Fatalf("import: %+v %q", sum, reports)
	}
	ctx := context.Background()
	var pe *gate.PolicyError
	if _, err := b.served.Sums(ctx, releases.HashiCorp, "terraform", "1.6.0"); !errors.As(err, &pe) || pe.Verdict.Rule != policy.RuleDenyVersion {
		t.Fatalf("the denied version is served: %v", err)
	}
	b.SetPolicy(nil)
	if _, err := b.served.Sums(ctx, releases.HashiCorp, "terraform", "1.6.0"); err != nil {
		t.Fatalf("the policy lifted, the version is not served: %v", err)
	}

	// A mirror that serves no terraform (its products: packer) refuses it.
	c := sealedCLI(t, o, "packer")
	sum, reports = importCLI(t, c, c, out, key)
	if sum.Failed != 1 || sum.CLIArchives != 1 || !strings.Contains(strings.Join(reports, "\n"), "not served by this mirror") {
		t.Fatalf("import into a mirror without terraform: %+v %q", sum, reports)
	}
}

// TestImportCLIReleasesSection: the manifest's releases section decides
// which CLI versions an import looks for: one it lists that is missing is
// refused, as is every one under a section of a format this release does
// not read (the providers and modules of such a bundle still import), and
// every one when the engine has no CLI releases side.
func TestImportCLIReleasesSection(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		o, out, key := exportedCLI(t)
		if err := os.RemoveAll(filepath.Join(out, filepath.FromSlash(tofuRelDir))); err != nil {
			t.Fatal(err)
		}
		b := sealedCLI(t, o)
		sum, reports := importCLI(t, b, b, out, key)
		if sum.Failed != 1 || sum.CLIArchives != 1 || !strings.Contains(strings.Join(reports, "\n"), "tofu 1.8.0 refused: "+filepath.Join(out, filepath.FromSlash(tofuRelDir))+" is listed in the manifest") {
			t.Fatalf("import: %+v %q", sum, reports)
		}
	})
	t.Run("no CLI releases side", func(t *testing.T) {
		_, out, key := exportedCLI(t)
		sum, reports := importCLI(t, newEngine(t, nil), nil, out, key)
		if sum.Failed != 2 || !strings.Contains(strings.Join(reports, "\n"), "no CLI releases side") {
			t.Fatalf("import: %+v %q", sum, reports)
		}
	})
	// signedManifest signs, with key, out's manifest changed by change.
	signedManifest := func(t *testing.T, out string, key *ExportKey, change func(*manifest)) {
		data, err := os.ReadFile(filepath.Join(out, manifestName))
		if err != nil {
			t.Fatal(err)
		}
		var m manifest
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		change(&m)
		data, _ = json.MarshalIndent(m, "", "  ")
		sig, err := key.sign(data)
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(out, manifestName), string(data))
		write(t, filepath.Join(out, manifestSigName), string(sig))
	}
	t.Run("newer format", func(t *testing.T) {
		o, out, key := exportedCLI(t)
		signedManifest(t, out, key, func(m *manifest) { m.Releases.Format = releasesFormat + 1 })
		b := sealedCLI(t, o)
		sum, reports := importCLI(t, b, b, out, key)
		if sum.Failed != 2 || sum.CLIArchives != 0 || !strings.Contains(strings.Join(reports, "\n"), "has format 2, and this tfmirror reads 1") {
			t.Fatalf("import: %+v %q", sum, reports)
		}
	})
	t.Run("entry outside", func(t *testing.T) {
		o, out, key := exportedCLI(t)
		signedManifest(t, out, key, func(m *manifest) {
			m.Releases.Versions = append(m.Releases.Versions, manifestRelease{Publisher: "hashicorp", Product: "terraform", Version: "../../../etc"})
		})
		b := sealedCLI(t, o)
		sum, reports := importCLI(t, b, b, out, key)
		if sum.Failed != 2 || sum.CLIArchives != 0 || !strings.Contains(strings.Join(reports, "\n"), "its releases section has a malformed entry") {
			t.Fatalf("import: %+v %q", sum, reports)
		}
	})
}

// TestExportCLIReleasesUnderThePolicy: what the policy refuses at the time
// of the export is left out and listed, as for providers; a selection by
// address and platform writes only what it names.
func TestExportCLIReleasesUnderThePolicy(t *testing.T) {
	_, a := cachedCLI(t)
	a.Engine.SetPolicy(enginetest.DecodePolicy(t, `deny = [{ pattern = "get.opentofu.org/opentofu/tofu", reason = "terraform only" }]`))
	out := filepath.Join(t.TempDir(), "out")
	var reports []string
	sum, err := Export(context.Background(), cliOf(a), servedBy(t, a.Engine, nil), cliOf(a), Selection{}, out, newKey(t, "exporter"), func(s string) { reports = append(reports, s) })
	if err != nil || sum.Held != 1 || sum.CLIArchives != 1 || len(reports) != 1 || !strings.Contains(reports[0], "terraform only") {
		t.Fatalf("export: %+v, %v, %q", sum, err, reports)
	}
	if _, err := os.Stat(filepath.Join(out, filepath.FromSlash(tofuRelDir))); err == nil {
		t.Error("the denied product was exported")
	}
	if !slices.Contains(sum.Versions, "releases.hashicorp.com/hashicorp/terraform 1.6.0") {
		t.Errorf("versions for the audit log: %q", sum.Versions)
	}

	a.Engine.SetPolicy(nil)
	tf, _ := addrs.ParseProvider(releases.Address(releases.HashiCorp, "terraform"))
	out = filepath.Join(t.TempDir(), "out")
	sum, err = Export(context.Background(), cliOf(a), servedBy(t, a.Engine, nil), cliOf(a), Selection{Providers: []addrs.Provider{tf}, Platforms: []string{"darwin_arm64"}},
		out, newKey(t, "exporter"), func(s string) { reports = append(reports, s) })
	if unmatched := (*UnmatchedSelectionError)(nil); !errors.As(err, &unmatched) || sum.CLIArchives != 0 || fileExists(out) {
		t.Fatalf("export of a platform not cached: %+v, %v; want it refused, nothing written", sum, err)
	}
	sum, err = Export(context.Background(), cliOf(a), servedBy(t, a.Engine, nil), cliOf(a), Selection{Providers: []addrs.Provider{tf}},
		out, newKey(t, "exporter"), func(s string) { reports = append(reports, s) })
	if err != nil || sum.CLIArchives != 1 {
		t.Fatalf("export of terraform: %+v, %v", sum, err)
	}
	if _, err := os.Stat(filepath.Join(out, filepath.FromSlash(tofuRelDir))); err == nil {
		t.Error("tofu was exported though only terraform was selected")
	}
}

// TestIncrementalExportKeepsCLIArchives: exporting again into the same
// directory, with the same key, for fewer platforms keeps covering the
// archives an earlier export wrote there, so that the bundle still
// imports whole.
func TestIncrementalExportKeepsCLIArchives(t *testing.T) {
	o, a := cachedCLI(t)
	ctx := context.Background()
	arc, err := a.Releases.OpenArchive(ctx, releases.HashiCorp, "terraform", "1.6.0", fakeorigin.ArchiveName("terraform", "1.6.0", "darwin_arm64"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, arc) //nolint:errcheck
	arc.Close()
	enginetest.WaitIdle(t, func(ctx context.Context) error { return mirror.WaitIdle(ctx, a.Engine) })
	out, key := filepath.Join(t.TempDir(), "out"), newKey(t, "exporter")
	var reports []string
	report := func(s string) { reports = append(reports, s) }
	if sum, err := Export(ctx, cliOf(a), servedBy(t, a.Engine, nil), cliOf(a), Selection{}, out, key, report); err != nil || sum.CLIArchives != 3 {
		t.Fatalf("export: %+v %v %q", sum, err, reports)
	}
	sum, err := Export(ctx, cliOf(a), servedBy(t, a.Engine, nil), cliOf(a), Selection{Platforms: []string{"darwin_arm64"}}, out, key, report)
	if err != nil || sum.CLIArchives != 0 || sum.CLIPresent != 1 || sum.Unlisted != 0 || len(reports) != 0 {
		t.Fatalf("export again for one platform: %+v %v %q", sum, err, reports)
	}
	o.SetDown(true)
	sealed := sealedCLI(t, o)
	isum, ireports := importCLI(t, sealed, sealed, out, key)
	if isum.Failed != 0 || isum.CLIArchives != 3 {
		t.Fatalf("import: %+v %q", isum, ireports)
	}
}

// TestImportCLIReleaseReadsOnlyListedFiles: a CLI release's record
// (release.json), which the manifest vouches for only once its files are
// read, names files; an import reads none that the signed manifest does
// not list. Before, a signed bundle whose record was changed to pass
// through 2,000 files of 64 KiB (a few kilobytes gzip-compressed) had an
// import hold 128 MiB of them before it found the record was not the one
// signed.
func TestImportCLIReleaseReadsOnlyListedFiles(t *testing.T) {
	o, out, key := exportedCLI(t)
	dir := filepath.Join(out, filepath.FromSlash(tofuRelDir))
	rec := filepath.Join(dir, releaseFileName)
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	var rf releaseFile
	if err := json.Unmarshal(data, &rf); err != nil {
		t.Fatal(err)
	}
	filler := strings.Repeat("x", maxPassedThroughBytes)
	for i := range 2000 {
		name := fmt.Sprintf("p%d.sig", i)
		write(t, filepath.Join(dir, name), filler)
		rf.PassedThrough = append(rf.PassedThrough, name)
	}
	data, _ = json.Marshal(rf)
	write(t, rec, string(data))
	engine := sealedCLI(t, o)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	sum, reports := importCLI(t, engine, engine, out, key)
	runtime.ReadMemStats(&after)
	if sum.CLIArchives != 1 || sum.Failed != 1 || !strings.Contains(strings.Join(reports, "\n"), "p0.sig") {
		t.Errorf("import: %+v, %q; want the tofu release refused for the file its manifest does not list", sum, reports)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("the import allocated %d MiB, reading files the manifest does not list", alloc>>20)
	}
}
