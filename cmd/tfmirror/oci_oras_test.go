package main

// The oras CLI against the OCI distribution front door of a mirror wired
// as `tfmirror serve` wires it. oras is found in $TFMIRROR_ORAS, else
// .ci/bin/oras in the module (where .ci/run installs it), else on PATH;
// without it the test skips, except in CI, where that is a failure.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

func orasBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TFMIRROR_ORAS"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("TFMIRROR_ORAS: %v", err)
		}
		return p
	}
	if dir, err := os.Getwd(); err == nil {
		for ; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				if p := filepath.Join(dir, ".ci", "bin", "oras"); fileExists(p) {
					return p
				}
				break
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	if p, err := exec.LookPath("oras"); err == nil {
		return p
	}
	const how = "oras not found: run .ci/run, or GOBIN=$PWD/.ci/bin go install oras.land/oras/cmd/oras@v1.3.6 (ocitest.Oras), or set TFMIRROR_ORAS"
	if os.Getenv("CI") != "" {
		t.Fatal(how)
	}
	t.Skip(how)
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// oras runs the oras CLI in dir with the mirror's CA trusted, HOME in dir
// (no stored credentials) and nothing else of the environment but PATH.
func (e *e2e) oras(dir string, args ...string) (string, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, orasBinary(e.t), append(args, "--ca-file", e.caFile)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	if err != nil {
		err = errors.New(err.Error() + ": " + stderr.String())
	}
	return out.String(), err
}

func TestORASCLIAgainstOCIFrontDoor(t *testing.T) {
	t.Parallel()
	orasBinary(t)
	e := newClientE2E(t, "", fakeorigin.Options{SeparateDownloadHost: true})
	pls := []string{"linux_amd64", "darwin_arm64", "windows_amd64"}
	e.origin.AddProvider("hashicorp", "random", []string{"3.5.0", "3.6.0", "3.6.1+ent"}, pls)
	host := strings.TrimSuffix(strings.TrimPrefix(e.url, "https://"), "/")
	repo := host + "/providers/" + tfRegistry + "/hashicorp/random"
	dir := t.TempDir()

	out, err := e.oras(dir, "repo", "tags", repo)
	if err != nil {
		t.Fatalf("oras repo tags: %v", err)
	}
	if got := strings.Fields(out); !slices.Equal(got, []string{"3.5.0", "3.6.0", "3.6.1_ent"}) {
		t.Errorf("oras repo tags: %q", out)
	}

	out, err = e.oras(dir, "manifest", "fetch", repo+":3.6.0")
	if err != nil {
		t.Fatalf("oras manifest fetch: %v", err)
	}
	var index struct {
		MediaType, ArtifactType string
		Manifests               []struct {
			Digest   string
			Platform struct{ OS, Architecture string }
		}
	}
	if err := json.Unmarshal([]byte(out), &index); err != nil || index.ArtifactType != "application/vnd.opentofu.provider" || len(index.Manifests) != len(pls) {
		t.Fatalf("index %s: %v", out, err)
	}

	pulled := filepath.Join(dir, "pulled")
	if _, err := e.oras(dir, "pull", "--platform", "linux/amd64", "-o", pulled, repo+":3.6.0"); err != nil {
		t.Fatalf("oras pull: %v", err)
	}
	name := "terraform-provider-random_3.6.0_linux_amd64.zip"
	got, err := os.ReadFile(filepath.Join(pulled, name))
	if err != nil || !bytes.Equal(got, e.origin.Archive("hashicorp", "random", "3.6.0", "linux_amd64")) {
		t.Errorf("oras pull did not save the origin's zip as %s: %v", name, err)
	}
	if n := e.origin.ArchiveHits("hashicorp", "random", "3.6.0", "linux_amd64"); n != 1 {
		t.Errorf("%d origin downloads, want 1", n)
	}

	// An unknown repository is NAME_UNKNOWN to oras too.
	if out, err := e.oras(dir, "repo", "tags", host+"/providers/"+tfRegistry+"/hashicorp/nothing"); err == nil || !strings.Contains(err.Error(), "name unknown") {
		t.Errorf("tags of an unknown repository: %q, %v", out, err)
	}
}

// The origin states a wrong package_size for one platform's archive: the
// index names a manifest made with it, which no client could pull. The
// first oras pull of that platform fails at the manifest, before any
// blob, with the mirror's message saying both sizes and to pull the tag
// again; the next pull, at once, saves the origin's zip, downloaded from
// the origin once.
func TestORASPullOfAWrongStatedSize(t *testing.T) {
	t.Parallel()
	orasBinary(t)
	e := newClientE2E(t, "", fakeorigin.Options{SeparateDownloadHost: true, PackageHashes: true})
	e.origin.AddProvider("acme", "widget", []string{"1.0.0"}, []string{"linux_amd64", "darwin_arm64"})
	zip := e.origin.Archive("acme", "widget", "1.0.0", "linux_amd64")
	e.origin.SetStatedSize("acme", "widget", "1.0.0", "linux_amd64", int64(len(zip))+5)
	host := strings.TrimSuffix(strings.TrimPrefix(e.url, "https://"), "/")
	repo := host + "/providers/" + tfRegistry + "/acme/widget"
	dir := t.TempDir()
	pulled := filepath.Join(dir, "pulled")

	_, err := e.oras(dir, "pull", "--platform", "linux/amd64", "-o", pulled, repo+":1.0.0")
	if err == nil {
		t.Fatal("the first oras pull of a manifest made with a wrong stated size succeeded")
	}
	// oras words a registry's error response one of two ways, with its
	// status code ("response status code 410: manifest unknown: ...") or
	// without ("Error response from registry: manifest unknown: ..."), as
	// the digests it meets fall: what both keep is checked.
	for _, want := range []string{"manifest unknown", fmt.Sprintf("%d bytes", len(zip)+5), "pull the tag again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the first oras pull failed with %v, which does not say %q", err, want)
		}
	}
	if _, err := e.oras(dir, "pull", "--platform", "linux/amd64", "-o", pulled, repo+":1.0.0"); err != nil {
		t.Fatalf("the next oras pull: %v", err)
	}
	name := "terraform-provider-widget_1.0.0_linux_amd64.zip"
	if got, err := os.ReadFile(filepath.Join(pulled, name)); err != nil || !bytes.Equal(got, zip) {
		t.Errorf("oras pull did not save the origin's zip as %s: %v", name, err)
	}
	if n, m := e.origin.ArchiveHits("acme", "widget", "1.0.0", "linux_amd64"), e.origin.ArchiveHits("acme", "widget", "1.0.0", "darwin_arm64"); n != 1 || m != 0 {
		t.Errorf("origin downloads: linux_amd64 %d, darwin_arm64 %d; want 1 and 0", n, m)
	}
}

// The status page shows the oci_mirror block for this mirror, ready to
// paste.
func TestStatusPageShowsOCIMirrorBlock(t *testing.T) {
	t.Parallel()
	e := newClientE2E(t, "", fakeorigin.Options{})
	resp, err := trustingClient(t, e.caFile).Get(e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page bytes.Buffer
	page.ReadFrom(resp.Body)
	host := strings.TrimSuffix(strings.TrimPrefix(e.url, "https://"), "/")
	want := "repository_template = &#34;" + host + "/providers/${hostname}/${namespace}/${type}&#34;"
	if !strings.Contains(page.String(), "oci_mirror {") || !strings.Contains(page.String(), want) {
		t.Errorf("the status page lacks the oci_mirror block %s", want)
	}
}
