package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/airgap"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
)

// A signature vouches for the names it signed, whatever key vouched for
// the bundle: with the origin's key pinned for its namespace, a bundle
// that gives a signed release of hashicorp/random 3.5.0 as another
// version, its darwin_arm64 package as linux_amd64, or hashicorp/null's
// release as random's, is refused, naming the file at fault and what it
// is given as; so is one whose evidence was edited after the exporting
// mirror signed its manifest, and a relabeled one that a trusted export
// key signed. Nothing of it is cached or served. Each is imported as
// `tfmirror import` does and through a serve's admin socket.
func TestRelabeledBundlesAreRefused(t *testing.T) {
	from := newHarness(t, harnessOptions{origin: fakeorigin.Options{ReleaseManifest: true}})
	plats := []string{"darwin_arm64", "linux_amd64"}
	from.origin.AddProvider("hashicorp", "random", []string{"3.5.0"}, plats)
	from.origin.AddProvider("hashicorp", "null", []string{"3.5.0"}, plats)
	src := from.newAPI(t, nil, nil, Options{})
	for _, typ := range []string{"random", "null"} {
		for _, pl := range plats {
			if _, err := src.Ensure(context.Background(), provider(t, typ), "3.5.0", pl); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := mirror.WaitIdle(context.Background(), from.engine); err != nil {
		t.Fatal(err)
	}
	exporter, err := airgap.GenerateExportKey("exporter")
	if err != nil {
		t.Fatal(err)
	}
	export := filepath.Join(t.TempDir(), "export")
	if _, err := airgap.Export(context.Background(), from.engine, from.packages(t), nil, airgap.Selection{}, export, exporter, func(line string) { t.Error(line) }); err != nil {
		t.Fatal(err)
	}
	publisher, err := airgap.ReadPublicKeys(strings.NewReader(from.origin.ArmoredPublicKey()))
	if err != nil {
		t.Fatal(err)
	}
	pinned := airgap.Trust{PublisherKeys: map[airgap.Namespace]openpgp.EntityList{
		{Host: svchost.Hostname(originHost), Name: "hashicorp"}: publisher}}
	var public bytes.Buffer
	if err := exporter.WritePublic(&public); err != nil {
		t.Fatal(err)
	}
	exporterKeys, err := airgap.ReadPublicKeys(&public)
	if err != nil {
		t.Fatal(err)
	}
	trustExporter := airgap.Trust{ExportKeys: exporterKeys}
	relabeler := newSigningEntity(t)
	trustRelabeler := airgap.Trust{ExportKeys: openpgp.EntityList{relabeler}}

	sums := func(typ, pl string) string { return from.origin.SHA256("hashicorp", typ, "3.5.0", pl) }
	darwinName, linuxName := addrs.ArchiveName("random", "3.5.0", "darwin_arm64"), addrs.ArchiveName("random", "3.5.0", "linux_amd64")
	tests := []struct {
		name  string
		trust airgap.Trust
		make  func(t *testing.T) string // the bundle
		// claims is the provider type and version the bundle gives;
		// file the file the refusal must name, and msg what it must say.
		claims, version, file, msg string
	}{
		{name: "another version", trust: pinned, claims: "random", version: "9.9.9",
			make: func(t *testing.T) string {
				return relabel(t, export, "random", "random", "9.9.9", map[string]string{"darwin_arm64": "darwin_arm64", "linux_amd64": "linux_amd64"}, nil)
			},
			file: "terraform-provider-random_9.9.9_SHA256SUMS", msg: "SHA256SUMS is of terraform-provider-random 3.5.0 (it lists " + darwinName + "), not of version 9.9.9"},
		{name: "another platform", trust: pinned, claims: "random", version: "3.5.0",
			make: func(t *testing.T) string {
				return relabel(t, export, "random", "random", "3.5.0", map[string]string{"darwin_arm64": "linux_amd64"}, nil)
			},
			file: linuxName, msg: darwinName + " is given as the package of linux_amd64; the signed name of that package is " + linuxName},
		{name: "another platform, its os and arch edited", trust: pinned, claims: "random", version: "3.5.0",
			make: func(t *testing.T) string {
				return relabel(t, export, "random", "random", "3.5.0", map[string]string{"darwin_arm64": "linux_amd64"}, func(pkg map[string]any) {
					pkg["os"], pkg["arch"] = "linux", "amd64"
				})
			},
			file: linuxName, msg: darwinName + " is given as the package of linux_amd64"},
		{name: "another platform, its names and checksums edited", trust: pinned, claims: "random", version: "3.5.0",
			make: func(t *testing.T) string {
				return relabel(t, export, "random", "random", "3.5.0", map[string]string{"darwin_arm64": "linux_amd64"}, func(pkg map[string]any) {
					pkg["filename"], pkg["os"], pkg["arch"] = linuxName, "linux", "amd64"
					pkg["shasum"], pkg["sha256"] = sums("random", "linux_amd64"), sums("random", "linux_amd64")
				})
			},
			file: linuxName, msg: "sha256 " + sums("random", "darwin_arm64")},
		{name: "another type of the namespace", trust: pinned, claims: "random", version: "3.5.0",
			make: func(t *testing.T) string {
				return relabel(t, export, "null", "random", "3.5.0", map[string]string{"darwin_arm64": "darwin_arm64", "linux_amd64": "linux_amd64"}, nil)
			},
			file: "terraform-provider-random_3.5.0_SHA256SUMS", msg: "SHA256SUMS lists terraform-provider-null_3.5.0_darwin_arm64.zip, which is no file of a release of terraform-provider-random"},
		{name: "evidence edited after the export key signed the manifest", trust: trustExporter, claims: "random", version: "3.5.0",
			make: func(t *testing.T) string {
				dir := filepath.Join(t.TempDir(), "edited")
				copyDir(t, export, dir)
				path := filepath.Join(dir, originHost, "hashicorp", "random", "terraform-provider-random_3.5.0_evidence.json")
				editJSON(t, path, func(ev map[string]any) {
					pkgs := ev["packages"].(map[string]any)
					pkgs["linux_amd64"] = pkgs["darwin_arm64"]
				})
				return dir
			},
			file: "terraform-provider-random_3.5.0_evidence.json", msg: "differs from the manifest"},
		{name: "a relabel that a trusted export key signed", trust: trustRelabeler, claims: "random", version: "9.9.9",
			make: func(t *testing.T) string {
				dir := relabel(t, export, "random", "random", "9.9.9", map[string]string{"darwin_arm64": "darwin_arm64", "linux_amd64": "linux_amd64"}, nil)
				signManifest(t, dir, relabeler)
				return dir
			},
			file: "terraform-provider-random_9.9.9_SHA256SUMS", msg: "not of version 9.9.9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bundle := tc.make(t)
			for _, via := range []string{"tfmirror import", "admin socket"} {
				t.Run(via, func(t *testing.T) {
					to := newHarness(t, harnessOptions{engine: mirror.Config{Offline: true}})
					var failures []string
					switch via {
					case "tfmirror import":
						sum, err := airgap.Import(context.Background(), to.engine, bundle, airgap.ImportOptions{Trust: tc.trust, ScratchDir: t.TempDir()},
							func(line string) { failures = append(failures, line) })
						if err != nil || sum.Failed == 0 {
							t.Fatalf("import: %+v, %v; want a version refused", sum, err)
						}
					case "admin socket":
						_, post := socket(t, to.newAPI(t, nil, nil, Options{ScratchDir: t.TempDir(), Trust: tc.trust}))
						body, _ := json.Marshal(ImportRequest{In: bundle})
						status, answer := post("/v1/import", string(body))
						var imp Imported
						if status != 200 || json.Unmarshal(answer, &imp) != nil || imp.Failed == 0 {
							t.Fatalf("import: %d %s; want a version refused", status, answer)
						}
						failures = imp.Failures
					}
					p := provider(t, tc.claims)
					refused := p.String() + " " + tc.version + " refused"
					i := slices.IndexFunc(failures, func(line string) bool { return strings.Contains(line, refused) })
					if i < 0 {
						t.Fatalf("refusals %q, want %q", failures, refused)
					}
					if !strings.Contains(failures[i], tc.file) || !strings.Contains(failures[i], tc.msg) {
						t.Errorf("refusal %q\nwant it to name %s and say %q", failures[i], tc.file, tc.msg)
					}
					v, err := addrs.ParseSemver(tc.version)
					if err != nil {
						t.Fatal(err)
					}
					if arc, err := to.engine.OpenArchive(context.Background(), p, v, addrs.Platform{OS: "linux", Arch: "amd64"}); err == nil {
						arc.Close()
						t.Errorf("%s %s linux_amd64 is served", p, tc.version)
					}
					if list, _, err := to.engine.Versions(context.Background(), p); err == nil {
						if _, ok := list.Find(v); ok {
							t.Errorf("%s %s is listed", p, tc.version)
						}
					}
					to.engine.ListCachedAfter("", "", func(cv mirror.CachedVersion) error {
						if cv.Provider == p.String() && cv.Version == v.String() {
							t.Errorf("%s %s is cached", p, tc.version)
						}
						return nil
					})
				})
			}
		})
	}
}

func provider(t *testing.T, typ string) addrs.Provider {
	t.Helper()
	p, err := addrs.ParseProvider(originHost + "/hashicorp/" + typ)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// relabel writes a bundle, without manifest, of the signed files of
// hashicorp/fromType 3.5.0 in export given as toType at version:
// SHA256SUMS and signature byte for byte under the new names, the
// archives of the platforms in plats (from: to) under the new platforms'
// names, and the evidence file saying the new provider and version, with
// edit applied to each package it gives.
func relabel(t *testing.T, export, fromType, toType, version string, plats map[string]string, edit func(pkg map[string]any)) string {
	t.Helper()
	bundle := filepath.Join(t.TempDir(), "relabeled")
	src := filepath.Join(export, originHost, "hashicorp", fromType)
	dst := filepath.Join(bundle, originHost, "hashicorp", toType)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	data, err := os.ReadFile(filepath.Join(src, "terraform-provider-"+fromType+"_3.5.0_evidence.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatal(err)
	}
	for _, d := range ev["documents"].([]any) {
		doc := d.(map[string]any)
		name := "terraform-provider-" + toType + "_" + version + "_SHA256SUMS"
		copyFile(t, filepath.Join(src, doc["file"].(string)), filepath.Join(dst, name))
		copyFile(t, filepath.Join(src, doc["signature_file"].(string)), filepath.Join(dst, name+".sig"))
		doc["file"], doc["signature_file"] = name, name+".sig"
	}
	ev["provider"], ev["version"] = originHost+"/hashicorp/"+toType, version
	pkgs := map[string]any{}
	for fromPl, toPl := range plats {
		pkg := ev["packages"].(map[string]any)[fromPl].(map[string]any)
		if edit != nil {
			edit(pkg)
		}
		pkgs[toPl] = pkg
		copyFile(t, filepath.Join(src, addrs.ArchiveName(fromType, "3.5.0", fromPl)), filepath.Join(dst, addrs.ArchiveName(toType, version, toPl)))
	}
	ev["packages"] = pkgs
	out, _ := json.Marshal(ev)
	if err := os.WriteFile(filepath.Join(dst, "terraform-provider-"+toType+"_"+version+"_evidence.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	return bundle
}

// signManifest writes the manifest of every file in dir, signed by key,
// as an exporting mirror does.
func signManifest(t *testing.T, dir string, key *openpgp.Entity) {
	t.Helper()
	type entry struct {
		Path   string `json:"path"`
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	}
	var files []entry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		sum := sha256.Sum256(data)
		files = append(files, entry{filepath.ToSlash(rel), int64(len(data)), hex.EncodeToString(sum[:])})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(map[string]any{"format": 1, "signer": hex.EncodeToString(key.PrimaryKey.Fingerprint), "files": files})
	var sig bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&sig, key, bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tfmirror-manifest.json": data, "tfmirror-manifest.json.sig": sig.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func newSigningEntity(t *testing.T) *openpgp.Entity {
	t.Helper()
	e, err := openpgp.NewEntity("relabeler", "test only", "relabeler@example.test", nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func editJSON(t *testing.T, path string, edit func(map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	edit(v)
	out, _ := json.Marshal(v)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		copyFile(t, path, filepath.Join(to, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
