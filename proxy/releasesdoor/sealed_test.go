package releasesdoor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/proxy/releasesdoor"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// TestSealedListsOnlyWhatItHolds: a sealed mirror that holds one platform
// of a release whose signed SHA256SUMS names several (carried in by a
// bundle of linux_amd64 alone) names that platform alone in every
// document and listing an installer picks an archive from, and every file
// they name is served: an installer choosing among them is never sent to
// a 404. The SHA256SUMS and its signatures are named as before; of
// OpenTofu's other files, only those the mirror serves (the cosign
// signature the bundle carried, not the certificate it lacked, nor a
// tarball the door never serves).
func TestSealedListsOnlyWhatItHolds(t *testing.T) {
	o, err := fakeorigin.StartReleases()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	o.Add("hashicorp", "terraform", "1.6.0", "linux_amd64", "darwin_arm64", "windows_amd64")
	o.Add("opentofu", "tofu", "1.8.0", "linux_amd64", "darwin_arm64")
	o.ListFiles("1.8.0", "tofu_1.8.0_linux_amd64.tar.gz")
	ctx := context.Background()
	online := harness.StartReleasesSide(t, o, releases.Config{})
	tofuList, _, err := online.Releases.Versions(ctx, releases.OpenTofu, "tofu")
	if err != nil || len(tofuList.Versions) != 1 {
		t.Fatalf("the origin's OpenTofu list: %+v, %v", tofuList, err)
	}
	cosignSig, err := online.Releases.Document(ctx, releases.OpenTofu, "tofu", "1.8.0", "tofu_1.8.0_SHA256SUMS.sig")
	if err != nil {
		t.Fatal(err)
	}

	sealed := harness.StartReleasesSide(t, o, releases.Config{Offline: true})
	for _, x := range []struct {
		pub              releases.Publisher
		product, version string
	}{{releases.HashiCorp, "terraform", "1.6.0"}, {releases.OpenTofu, "tofu", "1.8.0"}} {
		s, err := online.Releases.Sums(ctx, x.pub, x.product, x.version)
		if err != nil {
			t.Fatal(err)
		}
		data := o.Archive(x.product, x.version, "linux_amd64")
		in := releases.Imported{Publisher: x.pub, Product: x.product, Version: x.version, Document: s.Document, Signature: s.Signature,
			Archives: []releases.ImportedArchive{{Filename: fakeorigin.ArchiveName(x.product, x.version, "linux_amd64"),
				Open: func(context.Context) (io.ReadCloser, int64, error) {
					return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
				}}}}
		if x.pub == releases.OpenTofu {
			in.Files = tofuList.Versions[0].Files
			in.PassedThrough = map[string][]byte{"tofu_1.8.0_SHA256SUMS.sig": cosignSig}
		}
		if _, err := sealed.Releases.AirGap().Import(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	door, err := releasesdoor.New(releasesdoor.Config{PlainHTTP: true, Logger: enginetest.Logger(t)}, sealed.Served)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(door)
	t.Cleanup(srv.Close)
	r := &rig{origin: o, srv: srv, side: sealed}
	before := o.TotalHits()

	served := func(what, path string) {
		t.Helper()
		if status, body, _ := r.get(t, path); status != 200 {
			t.Errorf("%s names %s: %d %s", what, path, status, body)
		}
	}
	var builds struct {
		Builds []struct{ OS, Arch, Filename, URL string } `json:"builds"`
	}
	checkBuilds := func(what string) {
		t.Helper()
		if len(builds.Builds) != 1 || builds.Builds[0].Filename != "terraform_1.6.0_linux_amd64.zip" {
			t.Errorf("%s names builds %+v, want terraform_1.6.0_linux_amd64.zip alone", what, builds.Builds)
		}
		for _, b := range builds.Builds {
			served(what, strings.TrimPrefix(b.URL, srv.URL))
		}
	}
	var product struct {
		Versions map[string]json.RawMessage `json:"versions"`
	}
	if status, body, _ := r.get(t, "/releases/hashicorp/terraform/index.json"); status != 200 || json.Unmarshal(body, &product) != nil ||
		json.Unmarshal(product.Versions["1.6.0"], &builds) != nil {
		t.Fatalf("terraform/index.json: %d %s", status, body)
	}
	checkBuilds("terraform/index.json")
	builds.Builds = nil
	if status, body, _ := r.get(t, "/releases/hashicorp/terraform/1.6.0/index.json"); status != 200 || json.Unmarshal(body, &builds) != nil {
		t.Fatalf("terraform/1.6.0/index.json: %d %s", status, body)
	}
	checkBuilds("terraform/1.6.0/index.json")

	hrefs := regexp.MustCompile(`href="([^"]+)"`)
	for listing, want := range map[string][]string{
		"/releases/hashicorp/terraform/1.6.0/": {"terraform_1.6.0_linux_amd64.zip", "terraform_1.6.0_SHA256SUMS",
			"terraform_1.6.0_SHA256SUMS." + o.HashiCorpKeyID + ".sig", "terraform_1.6.0_SHA256SUMS.sig"},
		"/releases/opentofu/v1.8.0/": {"tofu_1.8.0_linux_amd64.zip", "tofu_1.8.0_SHA256SUMS", "tofu_1.8.0_SHA256SUMS.gpgsig"},
	} {
		status, body, _ := r.get(t, listing)
		if status != 200 {
			t.Fatalf("%s: %d %s", listing, status, body)
		}
		var names []string
		for _, m := range hrefs.FindAllStringSubmatch(string(body), -1) {
			names = append(names, strings.TrimPrefix(m[1], listing))
			served(listing, m[1])
		}
		if !slices.Equal(names, want) {
			t.Errorf("%s names %q, want %q", listing, names, want)
		}
	}

	var tofu struct {
		Versions []struct {
			ID    string   `json:"id"`
			Files []string `json:"files"`
		} `json:"versions"`
	}
	if status, body, _ := r.get(t, "/releases/opentofu/api.json"); status != 200 || json.Unmarshal(body, &tofu) != nil || len(tofu.Versions) != 1 {
		t.Fatalf("api.json: %d %s", status, body)
	}
	files := slices.Sorted(slices.Values(tofu.Versions[0].Files))
	if want := []string{"tofu_1.8.0_SHA256SUMS", "tofu_1.8.0_SHA256SUMS.gpgsig", "tofu_1.8.0_SHA256SUMS.sig", "tofu_1.8.0_linux_amd64.zip"}; !slices.Equal(files, want) {
		t.Errorf("api.json names %q, want %q", files, want)
	}
	for _, f := range files {
		served("api.json", "/releases/opentofu/v1.8.0/"+f)
	}
	if n := o.TotalHits() - before; n != 0 {
		t.Errorf("the sealed mirror made %d origin requests", n)
	}
}
