package ocidoor

// The OCI distribution-spec conformance program (ocitest.Conformance,
// installed by .ci/run) against the front door, on content the mirror
// serves: its read-only mode, with push and every delete off, given the
// tags, manifest digests and blob digests of a provider's and a module's
// repository (OCI_RO_DATA_*, what the older suite called OCI_TAG_NAME,
// OCI_MANIFEST_DIGEST and OCI_BLOB_DIGEST).
//
// What it runs then (every workflow of the pull and content-discovery
// kinds that needs no pushed content): the ping, the tag list and an
// empty referrers list of the repository, HEAD and GET of each tag and
// manifest digest, HEAD and GET of each blob, and a referrers list of a
// digest. What it skips, because it cannot apply to a read-only registry
// (each counted as disabled in its results): every push workflow (blob
// uploads, monolithic and chunked, cross-repository mounts, manifest
// pushes, the generated images, indexes, artifacts and subjects), every
// delete (tags, manifests, blobs), and the manifest error cases, which
// push invalid manifests. Tag-list paging (n, last) is not among its
// read-only cases: TestTagPaging and TestModuleTagPaging check it.

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/ocitest"
)

// runConformance runs the conformance program against repo of the rig
// with the read-only data given, and returns its report (stdout). Its
// results.yaml writer fails in read-only mode (a nil entry for the
// blob workflows it did not run), after the report is written: the
// verdict is read from the report (checkReport), not the exit status.
func runConformance(t *testing.T, r *rig, repo string, tags, manifests, blobs []string) string {
	t.Helper()
	bin := ocitest.Conformance.Binary(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.http.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"SSL_CERT_FILE="+ca, // the rig's own certificate
		"OCI_RESULTS_DIR="+filepath.Join(dir, "results"),
		"OCI_REGISTRY="+r.host(),
		"OCI_TLS=enabled",
		"OCI_REPO1="+repo,
		"OCI_REPO2="+repo,
		"OCI_API_PUSH=false",
		"OCI_API_BLOBS_DELETE=false",
		"OCI_API_MANIFESTS_DELETE=false",
		"OCI_API_TAGS_DELETE=false",
		"OCI_API_TAGS_LIST=true",
		"OCI_API_REFERRER=true",
		"OCI_RO_DATA_TAGS="+strings.Join(tags, " "),
		"OCI_RO_DATA_MANIFESTS="+strings.Join(manifests, " "),
		"OCI_RO_DATA_BLOBS="+strings.Join(blobs, " "),
		"OCI_RO_DATA_REFERRERS="+manifests[0],
		"OCI_DATA_SHA512=false",
		"OCI_LOG=warn",
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("conformance did not end: %v", err)
	}
	t.Logf("conformance of %s (exit: %v):\n%s", repo, err, stdout.String())
	if t.Failed() || !strings.Contains(stdout.String(), "API conformance:") {
		t.Fatalf("conformance wrote no report:\n%s", stderr.String())
	}
	return stdout.String()
}

// pullAPIs are the conformance program's pull and content-discovery
// APIs, as its report names them: each must pass.
var pullAPIs = []string{"Ping", "Tag listing", "Manifest get by tag", "Manifest get by digest", "Manifest head by tag",
	"Manifest head by digest", "Blob get", "Blob head", "Referrers"}

// checkReport reads the conformance program's report: the whole run
// passed with no failure, every pull and content-discovery API passed,
// and every other API is one a read-only registry cannot have (disabled:
// pushes, mounts, deletes) or that the read-only mode does not run
// (Blob get range).
func checkReport(t *testing.T, report string) {
	t.Helper()
	if !strings.Contains(report, "OCI Conformance Result: Pass") {
		t.Errorf("the run did not pass")
	}
	apis := map[string]string{}
	section := ""
	for line := range strings.SplitSeq(report, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed != "" && !strings.HasPrefix(line, " ") {
			section = trimmed
			continue
		}
		name, status, ok := strings.Cut(trimmed, ":")
		if !ok {
			continue
		}
		name, status = strings.TrimRight(name, "."), strings.TrimSpace(status)
		switch section {
		case "API conformance:":
			apis[name] = status
		case "OCI Conformance Result: Pass", "OCI Conformance Result: FAIL":
			if (name == "FAIL" || name == "Error") && status != "0" {
				t.Errorf("%s: %s", name, status)
			}
		}
	}
	for _, api := range pullAPIs {
		if apis[api] != "Pass" {
			t.Errorf("API %s: %q, want Pass", api, apis[api])
		}
	}
	for api, status := range apis {
		switch {
		case slices.Contains(pullAPIs, api):
		case api == "Blob get range" && status == "Unknown":
		case status != "Disabled":
			t.Errorf("API %s: %s, want Disabled (a read-only registry has no push, mount or delete)", api, status)
		}
	}
	if len(apis) < len(pullAPIs) {
		t.Errorf("the report lists %d APIs", len(apis))
	}
}

// getBody fetches path of the rig and returns the body.
func getBody(t *testing.T, r *rig, path string) []byte {
	t.Helper()
	resp := r.do("GET", path)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s %s", path, resp.Status, b)
	}
	return b
}

// The pull and content-discovery workflows pass against a provider's
// repository (its tag an image index, each platform's manifest, the zips
// and the empty config) and a module's (its tag an image manifest, the
// zip and the empty config).
func TestConformance(t *testing.T) {
	r := newRig(t, rigOptions{})
	r.origin.AddProvider("acme", "net", []string{"1.0.0", "1.1.0"}, twoPlatforms)
	addTarballModule(r, map[string][]byte{"main.tf": []byte("# net\n")}, "1.0.0", "1.1.0")

	provider := "providers/" + originHost + "/acme/net"
	index := getBody(t, r, "/v2/"+provider+"/manifests/1.1.0")
	var idx ocispec.Index
	if err := json.Unmarshal(index, &idx); err != nil {
		t.Fatal(err)
	}
	manifests := []string{sha256Digest(index)}
	blobs := []string{ocispec.DescriptorEmptyJSON.Digest.String()}
	for _, d := range idx.Manifests {
		manifests = append(manifests, d.Digest.String())
		var m ocispec.Manifest
		if err := json.Unmarshal(getBody(t, r, "/v2/"+provider+"/manifests/"+d.Digest.String()), &m); err != nil {
			t.Fatal(err)
		}
		blobs = append(blobs, m.Layers[0].Digest.String())
	}
	checkReport(t, runConformance(t, r, provider, []string{"1.0.0", "1.1.0"}, manifests, blobs))

	module := "modules/" + originHost + "/acme/net/aws"
	man := getBody(t, r, "/v2/"+module+"/manifests/1.1.0")
	var m ocispec.Manifest
	if err := json.Unmarshal(man, &m); err != nil {
		t.Fatal(err)
	}
	checkReport(t, runConformance(t, r, module, []string{"1.0.0", "1.1.0"},
		[]string{sha256Digest(man)}, []string{ocispec.DescriptorEmptyJSON.Digest.String(), m.Layers[0].Digest.String()}))
}
