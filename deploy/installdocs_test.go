package deploy_test

import (
	"os"
	"regexp"
	"testing"
)

// installVersion finds the release versions the install instructions
// name: VERSION=, go install's tfmirror@v, the image's tag, the chart's
// --version, and what tfmirror version prints.
var installVersion = regexp.MustCompile(`VERSION=(\d+\.\d+\.\d+)|tfmirror/v\d+/cmd/tfmirror@v(\d+\.\d+\.\d+)|tfmirror:(\d+\.\d+\.\d+)|--version (\d+\.\d+\.\d+)|tfmirror (\d+\.\d+\.\d+) commit`)

// TestInstallDocsNameTheRelease: the README and docs/install.md tell
// users to install the newest release CHANGELOG.md records, as the
// chart and the kustomize base install it (TestReleaseImage): a release
// cut without them would have the instructions install the one before.
func TestInstallDocsNameTheRelease(t *testing.T) {
	t.Parallel()
	version := releasedVersion(t)
	for _, file := range []string{"../README.md", "../docs/install.md"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		found := installVersion.FindAllSubmatch(data, -1)
		if len(found) == 0 {
			t.Errorf("%s names no release to install (VERSION=, @v, the image's tag, --version)", file)
		}
		for _, m := range found {
			for _, g := range m[1:] {
				if g != nil && string(g) != version {
					t.Errorf("%s: %q names %s; the newest release in CHANGELOG.md is %s", file, m[0], g, version)
				}
			}
		}
	}
}
