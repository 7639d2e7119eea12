package deploy_test

import (
	"bytes"
	"debug/elf"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/tfmirror/tfmirror/deploy/internal/image"
)

// ---------------------------------------------------------------------------
// The release's configuration (../.goreleaser.yaml), as the tests read it.

type goreleaserConfig struct {
	Env    []string `json:"env"`
	Builds []struct {
		ID      string   `json:"id"`
		Main    string   `json:"main"`
		Binary  string   `json:"binary"`
		Env     []string `json:"env"`
		Goos    []string `json:"goos"`
		Goarch  []string `json:"goarch"`
		Flags   []string `json:"flags"`
		Ldflags []string `json:"ldflags"`
		ModTime string   `json:"mod_timestamp"`
	} `json:"builds"`
	Archives []struct {
		NameTemplate    string   `json:"name_template"`
		Formats         []string `json:"formats"`
		FormatOverrides []struct {
			Goos    string   `json:"goos"`
			Formats []string `json:"formats"`
		} `json:"format_overrides"`
	} `json:"archives"`
	Checksum struct {
		NameTemplate string `json:"name_template"`
	} `json:"checksum"`
}

func readGoreleaser() (*goreleaserConfig, error) {
	data, err := os.ReadFile("../.goreleaser.yaml")
	if err != nil {
		return nil, err
	}
	var c goreleaserConfig
	if err := yaml.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf(".goreleaser.yaml: %w", err)
	}
	if len(c.Builds) != 1 {
		return nil, fmt.Errorf(".goreleaser.yaml: %d builds, want the one of cmd/tfmirror", len(c.Builds))
	}
	return &c, nil
}

// env is the configuration's env: entries.
func (c *goreleaserConfig) env() map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v
	}
	return env
}

// imageRepository is the repository the release pushes the image to:
// REGISTRY/tfmirror (release.yml's "Names" step).
func (c *goreleaserConfig) imageRepository() string {
	if r := c.env()["REGISTRY"]; r != "" {
		return r + "/tfmirror"
	}
	return ""
}

// releaseBuildCommand returns the release's go build (its environment and
// arguments, the ldflags with testVersion and testCommit), writing to out.
func releaseBuildCommand(out string) (env, args []string, err error) {
	c, err := readGoreleaser()
	if err != nil {
		return nil, nil, err
	}
	b := c.Builds[0]
	ld := strings.Join(b.Ldflags, " ")
	for tmpl, v := range map[string]string{"Version": testVersion, "FullCommit": testCommit} {
		ld = regexp.MustCompile(`\{\{\s*\.`+tmpl+`\s*\}\}`).ReplaceAllString(ld, v)
	}
	if strings.Contains(ld, "{{") {
		return nil, nil, fmt.Errorf("ldflags %q: a template the test does not know", ld)
	}
	args = append([]string{"build"}, b.Flags...)
	args = append(args, "-ldflags", ld, "-o", out, "./"+strings.TrimPrefix(b.Main, "./"))
	return b.Env, args, nil
}

// TestReleaseBuildCommand checks the release's build: the platforms, a
// static binary (it runs on distroless/static and scratch), reproducible
// flags, and the version and commit from the pipeline. The binary is built
// with it (TestMain), and the other tests run it.
func TestReleaseBuildCommand(t *testing.T) {
	t.Parallel()
	c, err := readGoreleaser()
	if err != nil {
		t.Fatal(err)
	}
	b := c.Builds[0]
	for _, goos := range []string{"linux", "darwin", "windows", "freebsd"} {
		if !slices.Contains(b.Goos, goos) {
			t.Errorf("goos %v: no %s", b.Goos, goos)
		}
	}
	if !slices.Equal(b.Goarch, []string{"amd64", "arm64"}) {
		t.Errorf("goarch %v, want amd64 and arm64", b.Goarch)
	}
	if !slices.Contains(b.Env, "CGO_ENABLED=0") {
		t.Errorf("build environment %v: want CGO_ENABLED=0 for a static binary", b.Env)
	}
	// Reproducible: no build machine paths, no build ID, file times
	// from the commit.
	ld := strings.Join(b.Ldflags, " ")
	if !slices.Contains(b.Flags, "-trimpath") || !strings.Contains(ld, "-buildid=") || !strings.Contains(b.ModTime, ".CommitTimestamp") {
		t.Errorf("flags %v, ldflags %q, mod_timestamp %q: want -trimpath, -buildid= and the commit's time", b.Flags, ld, b.ModTime)
	}
	if c.Checksum.NameTemplate != "SHA256SUMS" {
		t.Errorf("checksum file %q, want SHA256SUMS", c.Checksum.NameTemplate)
	}
	bin := binary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("binary has a %v program header: it is dynamically linked", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("binary needs shared libraries %v", libs)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "tfmirror "+testVersion+" commit "+testCommit+" ") {
		t.Errorf("tfmirror version: %v %q, want it to name %s and %s", err, out, testVersion, testCommit)
	}
}

// TestReleaseTargetsTypeCheck type-checks the main module, its tests
// included, for each system the release builds for besides the one the
// tests run on (go vet, which compiles every package and test file for
// GOOS without linking): a test file that names what only a file of
// another system's build declares (a helper in a unix-only file, a
// syscall function Windows lacks) breaks that system's build of the
// tests, which nothing else here would show. (deploy/, a module of its
// own, ships nothing: its tests run where the release is made.)
func TestReleaseTargetsTypeCheck(t *testing.T) {
	t.Parallel()
	c, err := readGoreleaser()
	if err != nil {
		t.Fatal(err)
	}
	for _, goos := range c.Builds[0].Goos {
		if goos == runtime.GOOS {
			continue // the tests themselves build it
		}
		cmd := exec.Command("go", "vet", "./...")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), append(c.Builds[0].Env, "GOOS="+goos, "GOARCH=amd64", "GOWORK=off")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOOS=%s go vet ./...: %v\n%s", goos, err, out)
		}
	}
}

// TestImageRuntime checks the image's configuration (package image) as
// the Kubernetes manifests and the chart rely on it: a non-root user, the
// data directory as a volume and in TFMIRROR_DATA_DIR, the binary as the
// entry point in exec form with serve as the command, and variables that
// are flags of tfmirror serve with values it accepts.
func TestImageRuntime(t *testing.T) {
	t.Parallel()
	rt := image.Runtime()
	uid, _, _ := strings.Cut(rt.User, ":")
	if uid == "" || uid == "0" || uid == "root" {
		t.Errorf("user %q: the image must run as a non-root user", rt.User)
	}
	if _, ok := rt.Volumes[dataDir]; !ok || image.DataDir != dataDir {
		t.Errorf("volumes %v: want the data directory %s", rt.Volumes, dataDir)
	}
	if !slices.Equal(rt.Entrypoint, []string{"/usr/local/bin/tfmirror"}) || !slices.Equal(rt.Cmd, []string{"serve"}) {
		t.Errorf("entry point %q, command %q: want /usr/local/bin/tfmirror serve", rt.Entrypoint, rt.Cmd)
	}
	env := map[string]string{}
	for _, e := range rt.Env {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v
	}
	if env["TFMIRROR_DATA_DIR"] != dataDir {
		t.Errorf("TFMIRROR_DATA_DIR=%q, want %s", env["TFMIRROR_DATA_DIR"], dataDir)
	}
	checkEnv(t, "image", env)
}

// TestWorkflowsGo checks that every workflow sets up the newest patch
// release of go.mod's Go: go.mod's go line (1.26.0) is the oldest release
// the module accepts, and setup-go's go-version-file takes it as that
// exact release, whose standard library lacks every later security fix
// the published binaries would then miss. The one job that tests with the
// next Go release (test-next-go, in ci.yml) sets up the next minor
// release's newest patch instead.
func TestWorkflowsGo(t *testing.T) {
	t.Parallel()
	for _, mod := range []string{"../go.mod", "go.mod"} {
		data, err := os.ReadFile(mod)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^go (\d+\.\d+)(?:\.\d+)?$`).FindSubmatch(data)
		if m == nil {
			t.Fatalf("%s: no go line", mod)
		}
		want := string(m[1]) + ".x"
		var major, minor int
		fmt.Sscanf(string(m[1]), "%d.%d", &major, &minor)
		next := fmt.Sprintf("%d.%d.x", major, minor+1)
		for _, wf := range []string{"ci.yml", "release.yml"} {
			data, err := os.ReadFile("../.github/workflows/" + wf)
			if err != nil {
				t.Fatal(err)
			}
			var w struct {
				Jobs map[string]struct {
					Steps []struct {
						Uses string         `json:"uses"`
						With map[string]any `json:"with"`
					} `json:"steps"`
				} `json:"jobs"`
			}
			if err := yaml.Unmarshal(data, &w); err != nil {
				t.Fatalf("%s: %v", wf, err)
			}
			n := 0
			for name, j := range w.Jobs {
				for _, s := range j.Steps {
					if !strings.HasPrefix(s.Uses, "actions/setup-go@") {
						continue
					}
					n++
					v := want
					if wf == "ci.yml" && name == "test-next-go" {
						v = next
					}
					if s.With["go-version"] != v || s.With["check-latest"] != true || s.With["go-version-file"] != nil {
						t.Errorf("%s: job %s sets up Go with %v; want go-version %q (%s's go line) and check-latest: true", wf, name, s.With, v, mod)
					}
				}
			}
			if n == 0 {
				t.Errorf("%s sets up no Go", wf)
			}
		}
	}
}

// TestInstallDocsArchiveNames checks the download commands of
// docs/install.md and the README against the archives the release makes:
// a command that fetches tfmirror_${VERSION}_${OS}_${ARCH}.tar.gz names
// (in its OS= line) no system whose archive is of another format
// (.goreleaser.yaml's format_overrides: a .zip for windows), where curl -f
// would fail with 404 on a name the release does not publish; and each
// file names that other format's archive for those who need it.
func TestInstallDocsArchiveNames(t *testing.T) {
	t.Parallel()
	c, err := readGoreleaser()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Archives) != 1 || len(c.Archives[0].Formats) != 1 || c.Archives[0].NameTemplate != "{{ .ProjectName }}_{{ .Version }}_{{ .Os }}_{{ .Arch }}" {
		t.Fatalf(".goreleaser.yaml: archives %+v, not as this test reads them", c.Archives)
	}
	format := map[string]string{}
	for _, goos := range c.Builds[0].Goos {
		format[goos] = c.Archives[0].Formats[0]
	}
	for _, o := range c.Archives[0].FormatOverrides {
		format[o.Goos] = o.Formats[0]
	}
	download := regexp.MustCompile(`tfmirror_\$\{VERSION\}_\$\{OS\}_\$\{ARCH\}\.(tar\.gz|zip)\b`)
	for _, file := range []string{"../docs/install.md", "../README.md"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(text, -1) {
			exts := map[string]bool{}
			for _, m := range download.FindAllStringSubmatch(block[1], -1) {
				exts[m[1]] = true
			}
			osLine := regexp.MustCompile(`(?m)^.*\bOS=\w+.*$`).FindString(block[1])
			if len(exts) == 0 || osLine == "" {
				continue
			}
			for _, word := range regexp.MustCompile(`\w+`).FindAllString(osLine, -1) {
				if f, ok := format[word]; ok && !exts[f] {
					t.Errorf("%s: %q offers %s, whose archive is a .%s, to a command that fetches %v", file, strings.TrimSpace(osLine), word, f, slices.Sorted(maps.Keys(exts)))
				}
			}
		}
		if !download.MatchString(text) {
			continue
		}
		for goos, f := range format {
			if f != c.Archives[0].Formats[0] && !strings.Contains(text, "tfmirror_${VERSION}_"+goos+"_${ARCH}."+f) {
				t.Errorf("%s names no %s archive, tfmirror_${VERSION}_%s_${ARCH}.%s (.goreleaser.yaml's format_overrides)", file, goos, goos, f)
			}
		}
	}
}

// TestSBOMIndependentOfTool runs the SBOM command of .goreleaser.yaml (for
// linux/amd64) with two builds of cyclonedx-gomod that differ in their
// bytes, as the release workflow's (built on its runner) and a user's
// rebuilding a release (docs/install.md) do, and checks that they write
// the same document: SHA256SUMS lists the SBOMs, so an SBOM that records
// its tool's own hashes (cyclonedx-gomod puts them in metadata.tools)
// makes a rebuild's SHA256SUMS differ from the published one however
// reproducible the archives are.
func TestSBOMIndependentOfTool(t *testing.T) {
	cyclonedx := os.Getenv("TFMIRROR_CYCLONEDX_GOMOD")
	if cyclonedx == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("TFMIRROR_CYCLONEDX_GOMOD is not set (.ci/run installs it)")
		}
		t.Skip("TFMIRROR_CYCLONEDX_GOMOD not set (.ci/run installs it)")
	}
	t.Parallel()
	data, err := os.ReadFile("../.goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Sboms []struct {
			Cmd       string   `json:"cmd"`
			Documents []string `json:"documents"`
			Env       []string `json:"env"`
			Args      []string `json:"args"`
		} `json:"sboms"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil || len(c.Sboms) != 1 || len(c.Sboms[0].Documents) != 1 {
		t.Fatalf(".goreleaser.yaml: sboms %+v (%v): want one, of one document", c.Sboms, err)
	}
	s := c.Sboms[0]
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tool, err := os.ReadFile(cyclonedx)
	if err != nil {
		t.Fatal(err)
	}
	// GoReleaser's templates and variables, as it sets them for the
	// linux/amd64 archive; the command runs in dist/, a directory of the
	// module's root.
	expand := func(v string) string {
		v = regexp.MustCompile(`\{\{\s*envOrDefault "\w+" ""\s*\}\}`).ReplaceAllString(v, "")
		v = strings.NewReplacer("{{ .Os }}", "linux", "{{ .Arch }}", "amd64", "{{ .ArtifactName }}", "tfmirror_linux_amd64.tar.gz").Replace(v)
		return os.Expand(v, func(k string) string {
			if k == "document" {
				return "tfmirror_linux_amd64.tar.gz.cdx.json"
			}
			return "$" + k
		})
	}
	run := func(name string, extra []byte) []byte {
		dir := filepath.Join(t.TempDir(), name)
		bin, dist := filepath.Join(dir, "bin"), filepath.Join(root, "dist-sbomtest-"+name)
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "cyclonedx-gomod"), append(slices.Clip(tool), extra...), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(dist, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dist) })
		var args []string
		for _, a := range s.Args {
			args = append(args, expand(a))
		}
		cmd := exec.Command(s.Cmd, args...)
		if s.Cmd == "cyclonedx-gomod" {
			// exec.Command looked it up in the test's PATH.
			cmd.Path, cmd.Err = filepath.Join(bin, s.Cmd), nil
		}
		cmd.Dir = dist
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "GOWORK=off", "document="+expand("$document"))
		for _, e := range s.Env {
			if e = expand(e); !strings.HasSuffix(e, "=") {
				cmd.Env = append(cmd.Env, e)
			}
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %q: %v\n%s", s.Cmd, args, err, out)
		}
		doc, err := os.ReadFile(filepath.Join(dist, expand(s.Documents[0])))
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	a, b := run("a", nil), run("b", []byte("another build"))
	if !bytes.Equal(a, b) {
		t.Errorf("the SBOM differs with another build of cyclonedx-gomod (%d and %d bytes): a rebuild's SHA256SUMS would not be the release's", len(a), len(b))
	}
	if !bytes.Contains(a, []byte(`"github.com/gorilla/mux"`)) {
		t.Errorf("the SBOM does not list github.com/gorilla/mux:\n%.2000s", a)
	}
}
