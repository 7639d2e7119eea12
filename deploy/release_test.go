package deploy_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/tfmirror/tfmirror/deploy/internal/image"
)

// TestRelease runs the release as a snapshot for linux/amd64, without
// publishing or signing (GoReleaser, the pinned version .ci/run installs),
// twice, from two clones of this checkout's commit, and checks what a user
// would download: the archive's binary runs and names the snapshot version
// and the commit; the SBOM lists the main dependencies with their
// versions from go.mod; SHA256SUMS matches the files; the image, written
// as an OCI image layout by the command the release workflow runs (on an
// empty base here: distroless cannot be pulled offline), runs the same
// binary, as a non-root user, from the expected entry point; and the
// second build gives the same bytes and the same image digest.
//
// TFMIRROR_GORELEASER and TFMIRROR_CYCLONEDX_GOMOD name the tools; without
// them the test skips, and in CI (CI set) fails.
func TestRelease(t *testing.T) {
	goreleaser, cyclonedx := os.Getenv("TFMIRROR_GORELEASER"), os.Getenv("TFMIRROR_CYCLONEDX_GOMOD")
	if goreleaser == "" || cyclonedx == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("TFMIRROR_GORELEASER and TFMIRROR_CYCLONEDX_GOMOD are not set (.ci/run installs them)")
		}
		t.Skip("TFMIRROR_GORELEASER or TFMIRROR_CYCLONEDX_GOMOD not set (.ci/run installs them)")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	run := func(dir string, env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	run(root, nil, goreleaser, "check")
	rev := strings.TrimSpace(run(root, nil, "git", "rev-parse", "HEAD"))
	created := strings.TrimSpace(run(root, nil, "git", "log", "-1", "--format=%ct"))
	config, err := os.ReadFile(filepath.Join(root, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// One platform: the configuration with only linux/amd64, kept outside
	// the clone (an untracked file would mark the build modified).
	one := strings.Replace(string(config), "goos: [linux, darwin, windows, freebsd]", "goos: [linux]", 1)
	one = strings.Replace(one, "goarch: [amd64, arm64]", "goarch: [amd64]", 1)
	if one == string(config) || strings.Count(one, "[linux]") != 1 {
		t.Fatal(".goreleaser.yaml: the goos and goarch lines are not as this test narrows them")
	}
	oneConfig := filepath.Join(tmp, "goreleaser-linux-amd64.yaml")
	if err := os.WriteFile(oneConfig, []byte(one), 0o644); err != nil {
		t.Fatal(err)
	}
	path := "PATH=" + filepath.Dir(cyclonedx) + string(os.PathListSeparator) + os.Getenv("PATH")

	// snapshot builds the commit in a clone named name and returns its
	// dist directory and the image layout made from it.
	snapshot := func(name string) (dist, img string) {
		clone := filepath.Join(tmp, name)
		// Not --shared: cyclonedx-gomod reads the repository with go-git,
		// which does not follow alternates.
		run(tmp, nil, "git", "clone", "--quiet", "--no-checkout", root, clone)
		run(clone, nil, "git", "-c", "advice.detachedHead=false", "checkout", "--quiet", rev)
		run(clone, []string{path}, goreleaser, "release", "--snapshot", "--clean", "--skip=sign", "--config", oneConfig)
		dist, img = filepath.Join(clone, "dist"), filepath.Join(tmp, name+"-image")
		// The release workflow's command, on an empty base.
		run(".", []string{"GOWORK=off"}, "go", "run", "./cmd/tfmirror-image", "-base", "scratch", "-dist", dist, "-out", img, "-created", created)
		return dist, img
	}
	distA, imgA := snapshot("a")

	var meta struct{ Version, Commit string }
	readJSON(t, filepath.Join(distA, "metadata.json"), &meta)
	if !strings.Contains(meta.Version, "-snapshot-"+rev[:7]) || meta.Commit != rev {
		t.Errorf("metadata.json: version %q, commit %q; want a snapshot version of %s", meta.Version, meta.Commit, rev)
	}
	archive := "tfmirror_" + meta.Version + "_linux_amd64.tar.gz"
	sbom := archive + ".cdx.json"

	// SHA256SUMS: every file it lists, as it lists it; the archive and its
	// SBOM among them.
	sums := readSums(t, filepath.Join(distA, "SHA256SUMS"))
	for name, sum := range sums {
		if got := sha256File(t, filepath.Join(distA, name)); got != sum {
			t.Errorf("SHA256SUMS: %s %s, the file's is %s", name, sum, got)
		}
	}
	for _, want := range []string{archive, sbom} {
		if _, ok := sums[want]; !ok {
			t.Errorf("SHA256SUMS does not list %s: %v", want, sums)
		}
	}

	// The archive's binary.
	bin := untar(t, filepath.Join(distA, archive), "tfmirror", filepath.Join(tmp, "archive-tfmirror"))
	// The Go version follows the commit at once: a "(modified)" between
	// them would say the release was built from a tree other than rev's.
	wantLine := "tfmirror " + meta.Version + " commit " + rev + " go"
	if out := run(tmp, nil, bin, "version"); !strings.HasPrefix(out, wantLine) {
		t.Errorf("the archive's tfmirror version: %q, want %q...", out, wantLine)
	}

	// The SBOM: the main dependencies at the versions of go.mod.
	var doc struct {
		BOMFormat  string `json:"bomFormat"`
		Components []struct {
			Name, Version, Purl string
		} `json:"components"`
	}
	readJSON(t, filepath.Join(distA, sbom), &doc)
	required := goModRequires(t, root)
	for _, mod := range []string{"github.com/dgraph-io/badger/v4", "github.com/gorilla/mux", "github.com/hashicorp/terraform-svchost", "github.com/prometheus/client_golang"} {
		want, ok := required[mod]
		if !ok {
			t.Errorf("go.mod does not require %s", mod)
			continue
		}
		found := false
		for _, c := range doc.Components {
			if c.Name == mod || strings.HasPrefix(c.Purl, "pkg:golang/"+mod+"@") {
				found = true
				if c.Version != want {
					t.Errorf("SBOM: %s %s, go.mod requires %s", mod, c.Version, want)
				}
			}
		}
		if !found {
			t.Errorf("SBOM %s (%s, %d components) does not list %s", sbom, doc.BOMFormat, len(doc.Components), mod)
		}
	}

	// The image: its configuration, and the binary in its layer.
	img := layoutImage(t, imgA, meta.Version)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	rt := image.Runtime()
	if uid, _, _ := strings.Cut(cf.Config.User, ":"); uid == "" || uid == "0" || uid == "root" || cf.Config.User != rt.User {
		t.Errorf("image user %q, want %s (not root)", cf.Config.User, rt.User)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{image.Binary}) || !slices.Equal(cf.Config.Cmd, []string{"serve"}) {
		t.Errorf("image entry point %q, command %q; want %s serve", cf.Config.Entrypoint, cf.Config.Cmd, image.Binary)
	}
	if _, ok := cf.Config.Volumes[dataDir]; !ok || cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("image volumes %v, platform %s/%s; want %s on linux/amd64", cf.Config.Volumes, cf.OS, cf.Architecture, dataDir)
	}
	if cf.Config.Labels["org.opencontainers.image.revision"] != rev || cf.Config.Labels["org.opencontainers.image.version"] != meta.Version {
		t.Errorf("image labels %v: want the revision %s and version %s", cf.Config.Labels, rev, meta.Version)
	}
	imageBin, dataOwner := fromLayers(t, img, filepath.Join(tmp, "image-tfmirror"))
	if out := run(tmp, nil, imageBin, "version"); !strings.HasPrefix(out, wantLine) {
		t.Errorf("the image's tfmirror version: %q, want %q...", out, wantLine)
	}
	if sha256File(t, imageBin) != sha256File(t, bin) {
		t.Error("the image's binary is not the archive's")
	}
	if dataOwner != image.UID {
		t.Errorf("%s belongs to uid %d in the image, want %d (a fresh volume takes its owner)", dataDir, dataOwner, image.UID)
	}

	// The second build of the commit: the same bytes, the same image.
	distB, imgB := snapshot("b")
	for _, name := range append(slices.Sorted(maps.Keys(sums)), "SHA256SUMS") {
		if a, b := sha256File(t, filepath.Join(distA, name)), sha256File(t, filepath.Join(distB, name)); a != b {
			t.Errorf("%s: sha256 %s, then %s: the build is not reproducible", name, a, b)
		}
	}
	if a, b := indexDigest(t, imgA), indexDigest(t, imgB); a != b {
		t.Errorf("image digest %s, then %s: the image is not reproducible", a, b)
	}
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func sha256File(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// readSums reads a SHA256SUMS file as sha256sum -c does: "HASH  NAME".
func readSums(t *testing.T, file string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 || name == "" || strings.Contains(name, "/") {
			t.Fatalf("SHA256SUMS: line %q", sc.Text())
		}
		sums[name] = sum
	}
	if len(sums) == 0 {
		t.Fatal("SHA256SUMS is empty")
	}
	return sums
}

// goModRequires returns the main module's requirements by module path.
func goModRequires(t *testing.T, root string) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "mod", "edit", "-json", filepath.Join(root, "go.mod")).Output()
	if err != nil {
		t.Fatal(err)
	}
	var mod struct {
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	req := map[string]string{}
	for _, r := range mod.Require {
		req[r.Path] = r.Version
	}
	return req
}

// untar writes the file name of a .tar.gz to out, executable.
func untar(t *testing.T, archive, name, out string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s has no %s", archive, name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == name {
			writeExecutable(t, out, io.LimitReader(tr, 1<<30))
			return out
		}
	}
}

func writeExecutable(t *testing.T, file string, r io.Reader) {
	t.Helper()
	w, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(w, r); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// layoutImage opens the layout's one index, tagged ref, and returns its
// linux/amd64 image.
func layoutImage(t *testing.T, dir, ref string) v1.Image {
	t.Helper()
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != ref {
		t.Fatalf("the layout's index.json: %+v, want one index tagged %s", im.Manifests, ref)
	}
	idx, err := top.ImageIndex(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	platforms, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range platforms.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == "amd64" {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("the image index has no linux/amd64 image: %+v", platforms.Manifests)
	return nil
}

func indexDigest(t *testing.T, dir string) string {
	t.Helper()
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("the layout's index.json: %v %+v", err, im)
	}
	return im.Manifests[0].Digest.String()
}

// fromLayers unpacks the binary from the image's layers to out, and
// returns it with the owner of the data directory.
func fromLayers(t *testing.T, img v1.Image, out string) (string, int) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	owner, found := -1, false
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			switch strings.TrimSuffix(h.Name, "/") {
			case strings.TrimPrefix(image.Binary, "/"):
				writeExecutable(t, out, io.LimitReader(tr, 1<<30))
				found = true
			case strings.TrimPrefix(dataDir, "/"):
				owner = h.Uid
			}
		}
		rc.Close()
	}
	if !found {
		t.Fatalf("no %s in the image's layers", image.Binary)
	}
	return out, owner
}
