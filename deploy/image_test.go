package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// releasedVersion is the newest version CHANGELOG.md records as released
// ("## [2.0.0] - 2026-11-28"): what the chart and the kustomize base must
// install.
func releasedVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("CHANGELOG.md records no released version")
	}
	return string(m[1])
}

// TestReleaseImage checks that what the chart and the kustomize bases
// install is what the release publishes: the image repository is the one
// .goreleaser.yaml names (the release workflow pushes there), and the tag
// is the version the release gives the image, GoReleaser's {{ .Version }}
// (the tag without its v), of the newest release in CHANGELOG.md, which
// is the chart's appVersion and version (the release workflow refuses a
// tag that is not).
func TestReleaseImage(t *testing.T) {
	t.Parallel()
	c, err := readGoreleaser()
	if err != nil {
		t.Fatal(err)
	}
	repo := c.imageRepository()
	if repo == "" || strings.Contains(repo, "{{") || strings.Contains(repo, ":") {
		t.Fatalf(".goreleaser.yaml: image repository %q", repo)
	}
	version := releasedVersion(t)
	want := repo + ":" + version

	// Chart.yaml and values.yaml.
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	var values struct {
		Image struct{ Repository, Tag, Digest string } `json:"image"`
	}
	for file, v := range map[string]any{"Chart.yaml": &chart, "values.yaml": &values} {
		data, err := os.ReadFile(filepath.Join(chartDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if chart.AppVersion != version || chart.Version != version {
		t.Errorf("Chart.yaml: version %q, appVersion %q; want the release's %s (CHANGELOG.md)", chart.Version, chart.AppVersion, version)
	}
	if values.Image.Repository != repo || values.Image.Tag != "" || values.Image.Digest != "" {
		t.Errorf("values.yaml: image %+v; want repository %s (.goreleaser.yaml) and the appVersion as its tag", values.Image, repo)
	}

	// helm template with the defaults.
	m, _ := helmTemplate(t, "defaults", map[string]any{})
	checkImages(t, m, want)

	// The kustomize base and its overlays.
	for _, dir := range []string{"kubernetes/base", "kubernetes/shared-store", "kubernetes/policy"} {
		checkImages(t, kustomize(t, dir), want)
	}
}

// checkImages fails unless every container of m runs image want.
func checkImages(t *testing.T, m *manifests, want string) {
	t.Helper()
	n := 0
	check := func(name, image string) {
		n++
		if image != want {
			t.Errorf("%s: %s runs %s, want %s, the image the release publishes", m.where, name, image, want)
		}
	}
	for _, d := range m.deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			check(d.Name+"/"+c.Name, c.Image)
		}
	}
	for _, s := range m.statefulSets {
		for _, c := range s.Spec.Template.Spec.Containers {
			check(s.Name+"/"+c.Name, c.Image)
		}
	}
	if n == 0 {
		t.Errorf("%s: no container", m.where)
	}
}

// TestReleaseWorkflowRegistry checks that the release workflow names no
// registry of its own: it takes the one of .goreleaser.yaml.
func TestReleaseWorkflowRegistry(t *testing.T) {
	t.Parallel()
	c, err := readGoreleaser()
	if err != nil {
		t.Fatal(err)
	}
	registry := c.env()["REGISTRY"]
	data, err := os.ReadFile("../.github/workflows/release.yml")
	if err != nil {
		t.Fatal(err)
	}
	if registry == "" || strings.Contains(string(data), registry) {
		t.Errorf("release.yml names the registry %q itself; it reads it from .goreleaser.yaml", registry)
	}
	if !strings.Contains(string(data), "s/^  - REGISTRY=//p' .goreleaser.yaml") {
		t.Error("release.yml does not read the registry from .goreleaser.yaml's env")
	}
}

// TestAssetsFromTheTag keeps the install instructions on the tag: deploy/
// on main follows main (settings added since the last release), while
// the image it names is the last release's until the next is cut
// (RELEASING.md), so a user is told to take the assets of the tag they
// install. Each asset's README says so, linking the section that explains
// it; a remote kustomize base names a ref; the published chart is
// installed at a version.
func TestAssetsFromTheTag(t *testing.T) {
	t.Parallel()
	const section = "kubernetes.md#the-assets-of-the-release-you-install"
	if data, err := os.ReadFile("../docs/kubernetes.md"); err != nil || !strings.Contains(string(data), "\n### The assets of the release you install\n") {
		t.Errorf("docs/kubernetes.md has no section %q (%v)", section, err)
	}
	for _, readme := range []string{"kubernetes/base/README.md", "kubernetes/shared-store/README.md", filepath.Join(chartDir, "README.md")} {
		data, err := os.ReadFile(readme)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "on `main` follows `main`") || !strings.Contains(string(data), section) {
			t.Errorf("%s does not say that main's assets follow main, linking docs/%s", readme, section)
		}
	}
	docs, _ := filepath.Glob("../docs/*.md")
	readmes, _ := filepath.Glob("*/*/README.md")
	more, _ := filepath.Glob("*/*/*/README.md")
	remote := regexp.MustCompile(`github\.com/tfmirror/tfmirror//deploy/[^\s'"` + "`" + `]*`)
	for _, file := range slices.Concat([]string{"../README.md"}, docs, readmes, more) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// A command continued over lines with \ is one line here.
		text := strings.ReplaceAll(string(data), "\\\n", " ")
		for _, u := range remote.FindAllString(text, -1) {
			if !strings.Contains(u, "?ref=v") {
				t.Errorf("%s: %s names no tag (?ref=vX.Y.Z): main's assets follow main", file, u)
			}
		}
		for _, line := range strings.Split(text, "\n") {
			if strings.Contains(line, "oci://") && regexp.MustCompile(`\bhelm (install|upgrade|template|pull)\b`).MatchString(line) && !strings.Contains(line, "--version") {
				t.Errorf("%s: %q installs the published chart at no version", file, strings.TrimSpace(line))
			}
		}
	}
}

// TestDocsBuildNoDockerfile: the image is assembled from the release's
// binaries by cmd/tfmirror-image, and the repository has no Dockerfile, so
// no guide tells an operator to build it with docker build or a
// --build-arg, which they could not follow.
func TestDocsBuildNoDockerfile(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"../Dockerfile", "Dockerfile", "../.dockerignore"} {
		if _, err := os.Stat(f); err == nil {
			t.Skipf("%s exists: the docs may build the image with it", f)
		}
	}
	docs, _ := filepath.Glob("../docs/*.md")
	readmes, _ := filepath.Glob("*/*/README.md")
	more, _ := filepath.Glob("*/*/*/README.md")
	build := regexp.MustCompile(`\bdocker build\b|--build-arg\b|\bDockerfile\b`)
	for _, file := range slices.Concat([]string{"../README.md", "../RELEASING.md", "../SECURITY.md"}, docs, readmes, more) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if build.MatchString(line) {
				t.Errorf("%s:%d: %q: there is no Dockerfile; the release's image is assembled by deploy/cmd/tfmirror-image (docs/install.md)", file, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// TestInstallDocsSBOMAttestation: the release attests each platform's
// SBOM on that platform's image (release.yml: cosign attest ...
// "$IMAGE@$platform_digest", the digest crane takes with --platform), not
// on the index the tag names. cosign verify-attestation checks the
// attestations of the digest its reference names, the index for a tag
// (it has no --platform: sigstore/cosign#3552), and finds none there
// ("no matching attestations"). So docs/install.md verifies a platform's
// digest, taken the same way.
func TestInstallDocsSBOMAttestation(t *testing.T) {
	t.Parallel()
	read := func(file string) string {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// A command continued over lines with \ is one line here.
		return strings.ReplaceAll(string(data), "\\\n", " ")
	}
	// platformDigests are the variables text sets with crane digest
	// --platform.
	platformDigests := func(text string) []string {
		var vars []string
		for _, m := range regexp.MustCompile(`(\w+)=\$\(crane digest --platform\b`).FindAllStringSubmatch(text, -1) {
			vars = append(vars, m[1])
		}
		return vars
	}
	wf := read("../.github/workflows/release.yml")
	attested := regexp.MustCompile(`cosign attest\b[^\n]*"\$IMAGE@\$(\w+)"`).FindStringSubmatch(wf)
	if attested == nil || !slices.Contains(platformDigests(wf), attested[1]) {
		t.Fatalf("release.yml: no cosign attest of a platform's digest (crane digest --platform); this test checks docs/install.md against that: %v", attested)
	}
	docs := read("../docs/install.md")
	vars := platformDigests(docs)
	n := 0
	for _, line := range strings.Split(docs, "\n") {
		if !strings.Contains(line, "cosign verify-attestation") {
			continue
		}
		n++
		ref := regexp.MustCompile(`"?[\w.-]+/tfmirror/tfmirror[@:][^"\s]*"?`).FindString(line)
		_, digestVar, _ := strings.Cut(strings.Trim(ref, `"`), "@$")
		if !slices.Contains(vars, strings.Trim(digestVar, "{}")) {
			t.Errorf("docs/install.md: %q verifies %s, which has no attestation: the release attests each platform's image (release.yml), so name a digest taken with crane digest --platform", strings.TrimSpace(line), ref)
		}
	}
	if n == 0 {
		t.Error("docs/install.md does not show how to verify the image's SBOM attestations")
	}
}

// TestHelmChartImageTagNumber: values.schema.json takes image.tag as a
// number too, which is what a tag of digits is in a values file
// (`tag: 20261130`, a float64 to Helm) and with `--set image.tag=20261130`
// (an int64): the image is then that tag, not Go's rendering of a
// number ("%!s(int64=20261130)"), which no runtime can pull; on a claim,
// Recreate has stopped the old pod before the new one fails.
func TestHelmChartImageTagNumber(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tag  any
		want string
	}{
		{"values file", nil, "20261130"},
		{"--set", int64(20261130), "20261130"},
		{"a fraction", nil, "2.5"},
	} {
		var values map[string]any
		if tc.tag == nil {
			if err := yaml.Unmarshal([]byte("image: {tag: "+tc.want+"}"), &values); err != nil {
				t.Fatal(err)
			}
		} else {
			values = map[string]any{"image": map[string]any{"tag": tc.tag}}
		}
		m, _ := helmTemplate(t, tc.name, values)
		checkImages(t, m, "ghcr.io/tfmirror/tfmirror:"+tc.want)
	}
}
