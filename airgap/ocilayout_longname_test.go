package airgap

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/ocitest"
	"github.com/tfmirror/tfmirror/v2/oci"
)

// copyTree copies the regular files under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// runPush runs out's push.sh into target (REGISTRY[/PREFIX]) with the
// oras of ocitest, and returns its output and error.
func runPush(t *testing.T, out, target string, reg *ocitest.Server) (string, error) {
	t.Helper()
	oras := ocitest.Oras.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(out, PushScriptName), target)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(oras)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"SSL_CERT_FILE="+reg.CA, "DOCKER_CONFIG="+t.TempDir())
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// tagged says whether the registry holds repo's tag.
func tagged(t *testing.T, reg *ocitest.Server, repo, tag string) bool {
	t.Helper()
	req, err := http.NewRequest(http.MethodHead, "https://"+reg.Host()+"/v2/"+repo+"/manifests/"+tag, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", ocispec.MediaTypeImageIndex+", "+ocispec.MediaTypeImageManifest)
	resp, err := reg.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// A repository name longer than the 255 bytes a registry takes (a long
// origin host, a module name hex-encoded, long prefixes) cannot be
// pushed under the name the front door serves. The export leaves such a
// version out, reports it and counts it; push.sh, given a layout of such
// a name all the same (an earlier export's) or a PREFIX that makes a name
// too long, reports each tag it cannot push and pushes the others into
// a real registry, ending with status 1, instead of stopping at the
// first and leaving the rest unpushed.
func TestLongRepositoryNamesLeaveTheRestPushed(t *testing.T) {
	reg := ocitest.StartRegistry(t)
	engine, p := cachedNetAndTarball(t)
	side, _ := ociLayoutParts(t, engine)
	names, err := oci.NewNames("providers", "modules/"+strings.Repeat("m", 240))
	if err != nil {
		t.Fatal(err)
	}
	providerRepo, moduleRepo := names.Provider(p), names.Module(tarballModule)
	out := filepath.Join(t.TempDir(), "layout")
	var reports []string
	sum, err := ExportOCILayout(context.Background(), engine, servedBy(t, engine, side), names, Selection{}, out, func(s string) { reports = append(reports, s) })
	if err != nil || sum.Tags != 1 || sum.LongNames != 1 || sum.Failed != 0 {
		t.Fatalf("export: %+v, %v, %q; want the provider's tag, and the module left out for its name", sum, err, reports)
	}
	if len(reports) != 1 || !strings.Contains(reports[0], "module "+tarballModule.String()) || !strings.Contains(reports[0], "longer than the 255") {
		t.Errorf("reports %q, want the module's long name reported", reports)
	}
	if fileExists(filepath.Join(out, filepath.FromSlash(moduleRepo))) {
		t.Error("a layout was written under the module's long name")
	}

	// An earlier export's layout under a name too long, listed first.
	long := "aaa/" + strings.Repeat("a", 130) + "/" + strings.Repeat("a", 130)
	copyTree(t, filepath.Join(out, filepath.FromSlash(providerRepo)), filepath.Join(out, long))
	if _, err := ExportOCILayout(context.Background(), engine, servedBy(t, engine, side), names, Selection{}, out, func(string) {}); err != nil {
		t.Fatal(err)
	}
	output, err := runPush(t, out, reg.Host()+"/tofu", reg)
	t.Logf("push.sh:\n%s", output)
	if err == nil || !strings.Contains(output, long+":1.0.0 not pushed") || !strings.Contains(output, "1 tags not pushed") {
		t.Errorf("push.sh with a layout of a name too long: %v, want it reported and status 1", err)
	}
	if !tagged(t, reg, "tofu/"+providerRepo, "1.0.0") {
		t.Errorf("%s:1.0.0, listed after the name too long, was not pushed", providerRepo)
	}

	// A PREFIX that makes every name too long: nothing is asked of the
	// registry, and each tag is reported.
	prefix := "tofu/" + strings.Repeat("p", 255-len(providerRepo))
	output, err = runPush(t, out, reg.Host()+"/"+prefix, reg)
	if err == nil || !strings.Contains(output, providerRepo+":1.0.0 not pushed: "+prefix+"/"+providerRepo+" is longer than the 255 bytes") ||
		!strings.Contains(output, "2 tags not pushed") {
		t.Errorf("push.sh under a long prefix: %v\n%s", err, output)
	}
}

// A version whose repository's name is too long for a registry, which an
// earlier export into the directory tagged (a release that wrote such
// layouts), is untagged by the next export, as a version the package
// policy refuses is: the layouts carry, and push.sh lists, only what a
// registry can take, and push.sh ends with status 0.
func TestLongRepositoryNameUntaggedFromEarlierExport(t *testing.T) {
	reg := ocitest.StartRegistry(t)
	engine, p := cachedNetAndTarball(t)
	side, _ := ociLayoutParts(t, engine)
	short, err := oci.NewNames("providers", "modules")
	if err != nil {
		t.Fatal(err)
	}
	long, err := oci.NewNames("providers", "modules/"+strings.Repeat("m", 240))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "layout")
	if _, err := ExportOCILayout(context.Background(), engine, servedBy(t, engine, side), short, Selection{}, out, func(string) {}); err != nil {
		t.Fatal(err)
	}
	// The module's layout as an earlier release wrote it under the long
	// name.
	longRepo := long.Module(tarballModule)
	copyTree(t, filepath.Join(out, filepath.FromSlash(short.Module(tarballModule))), filepath.Join(out, filepath.FromSlash(longRepo)))
	if tags, err := layoutTagsIn(t, out, longRepo); err != nil || len(tags) != 1 {
		t.Fatalf("the earlier layout's tags: %q, %v", tags, err)
	}
	sum, err := ExportOCILayout(context.Background(), engine, servedBy(t, engine, side), long, Selection{}, out, func(string) {})
	if err != nil || sum.LongNames != 1 || sum.Failed != 0 {
		t.Fatalf("export: %+v, %v; want the module left out for its name", sum, err)
	}
	if tags, err := layoutTagsIn(t, out, longRepo); err != nil || len(tags) != 0 {
		t.Errorf("the long name's layout still tags %q (%v), which no registry takes", tags, err)
	}
	script, err := os.ReadFile(filepath.Join(out, PushScriptName))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(script), longRepo) {
		t.Errorf("push.sh lists %s", longRepo)
	}
	output, err := runPush(t, out, reg.Host()+"/tofu", reg)
	if err != nil || !tagged(t, reg, "tofu/"+long.Provider(p), "1.0.0") {
		t.Errorf("push.sh: %v\n%s", err, output)
	}
}

// layoutTagsIn is layoutTags of the layout repo in out, which it opens
// and closes again: an export into out is refused while it is open.
func layoutTagsIn(t *testing.T, out, repo string) ([]string, error) {
	t.Helper()
	dir := outFor(t, out)
	defer dir.Close()
	return layoutTags(dir, repo)
}
