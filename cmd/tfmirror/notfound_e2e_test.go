package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// A CI fleet with a typo in one required_providers: terraform init
// through the mirror fails each time with the same error, the error the
// origin's own 404 gives through a mirror that remembers nothing
// (--not-found-ttl 0), while the origin is asked for the provider's
// versions once; the answers given from memory are counted, and the
// status page's origin row shows the entry held.
func TestTerraformInitTypoNotFoundRemembered(t *testing.T) {
	t.Parallel()
	providers := map[string]string{"randon": "hashicorp/randon@3.6.0"} // typo of random
	e := newE2E(t, fakeorigin.Options{})
	e.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	plain := newE2E(t, fakeorigin.Options{}, "--not-found-ttl", "0")
	plain.origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})

	const runs = 3
	outputs := make([]string, 0, runs)
	for range runs {
		out, err := e.terraform(writeConfig(t, providers), "init", "-no-color")
		if err == nil {
			t.Fatalf("terraform init of a provider the origin lacks succeeded:\n%s", out)
		}
		outputs = append(outputs, strings.ReplaceAll(out, e.url, "MIRROR/"))
	}
	if n := e.origin.Hits(fakeorigin.Versions); n != 1 {
		t.Errorf("the origin was asked for the version list %d times in %d inits, want 1", n, runs)
	}
	var plainOut string
	for i := range runs {
		out, err := plain.terraform(writeConfig(t, providers), "init", "-no-color")
		if err == nil {
			t.Fatalf("terraform init of a provider the origin lacks succeeded:\n%s", out)
		}
		if i == 0 {
			plainOut = strings.ReplaceAll(out, plain.url, "MIRROR/")
		}
	}
	if n := plain.origin.Hits(fakeorigin.Versions); n != runs {
		t.Errorf("with --not-found-ttl 0 the origin was asked %d times in %d inits, want %d", n, runs, runs)
	}
	t.Logf("terraform init:\n%s", outputs[0])
	if !strings.Contains(outputs[0], "hashicorp/randon") {
		t.Errorf("terraform's error does not name the provider:\n%s", outputs[0])
	}
	for i, out := range outputs {
		if out != plainOut {
			t.Errorf("init %d shows:\n%s\nwithout the memory, terraform shows:\n%s", i+1, out, plainOut)
		}
	}

	client := trustingClient(t, e.caFile)
	get := func(path string) string {
		t.Helper()
		resp, err := client.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /%s: %d %v", path, resp.StatusCode, err)
		}
		return string(body)
	}
	metrics := get("metrics")
	for _, want := range []string{
		`tfmirror_origin_not_found_cached_total{origin="registry.terraform.io"} ` + strconv.Itoa(runs-1),
		`tfmirror_origin_not_found_entries{origin="registry.terraform.io"} 1`,
	} {
		if !strings.Contains(metrics, "\n"+want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	if status := get("?format=json"); !strings.Contains(status, `"host":"registry.terraform.io"`) || !strings.Contains(status, `"not_found_remembered":1`) {
		t.Errorf("the status page's origin row does not show the entry held:\n%s", status)
	}
}

// The same through the registry protocols (the host block the status page
// gives): a provider and a registry module that the origin lacks, each
// asked of the origin once however many inits, with the error terraform
// shows without the memory.
func TestTerraformHostBlockTypoNotFoundRemembered(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	plain := newE2E(t, fakeorigin.Options{}, "--not-found-ttl", "0")
	mirrored, unremembered := throughMirror(t, e, ""), throughMirror(t, plain, "")
	for _, tc := range []struct {
		name, mainTF string
		kind         fakeorigin.Kind
	}{
		{"provider", "terraform {\n  required_providers {\n    randon = {\n      source  = \"hashicorp/randon\"\n      version = \"3.6.0\"\n    }\n  }\n}\n", fakeorigin.Versions},
		{"module", "module \"vpc\" {\n  source  = \"acme/vpcc/aws\"\n  version = \"1.0.0\"\n}\n", fakeorigin.ModuleVersions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			init := func(r registryRun) string {
				t.Helper()
				dir := t.TempDir()
				if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(tc.mainTF), 0o644); err != nil {
					t.Fatal(err)
				}
				out, err := r.e.terraformWith(dir, r.conf, r.caFile, "init", "-no-color")
				if err == nil {
					t.Fatalf("terraform init of a %s the origin lacks succeeded:\n%s", tc.name, out)
				}
				return strings.ReplaceAll(out, r.e.url, "MIRROR/")
			}
			const runs = 3
			want := init(unremembered)
			t.Logf("terraform init without the memory:\n%s", want)
			for i := range runs {
				if got := init(mirrored); got != want {
					t.Errorf("init %d shows:\n%s\nwithout the memory, terraform shows:\n%s", i+1, got, want)
				}
			}
			if n := e.origin.Hits(tc.kind); n != 1 {
				t.Errorf("the origin was asked (%s) %d times in %d inits, want 1", tc.kind, n, runs)
			}
			for range runs - 1 {
				init(unremembered)
			}
			if n := plain.origin.Hits(tc.kind); n != runs {
				t.Errorf("with --not-found-ttl 0 the origin was asked (%s) %d times in %d inits, want %d", tc.kind, n, runs, runs)
			}
		})
	}
}

// Every door reaches the origin through the same memory: a made-up
// provider asked for through the network mirror, the registry protocol
// and the OCI door, and a made-up module through the registry protocol,
// all answer 404, and the origin is asked once for each name.
func TestEveryDoorNotFoundRemembered(t *testing.T) {
	t.Parallel()
	e := newE2E(t, fakeorigin.Options{})
	client := trustingClient(t, e.caFile)
	names, err := oci.NewNames("providers", "modules")
	if err != nil {
		t.Fatal(err)
	}
	typo := addrs.Provider{Hostname: tfRegistry, Namespace: "hashicorp", Type: "randon"}
	paths := []string{
		tfRegistry + "/hashicorp/randon/index.json",
		strings.TrimPrefix(proxy.RegistryPath(tfRegistry), "/") + "hashicorp/randon/versions",
		"v2/" + names.Provider(typo) + "/tags/list",
		strings.TrimPrefix(proxy.RegistryPath(tfRegistry), "/") + "hashicorp/randon/3.6.0/download/linux/amd64",
		"registry/" + tfRegistry + "/v1/modules/acme/vpcc/aws/versions",
	}
	for round := range 3 {
		for _, path := range paths {
			resp, err := client.Get(e.url + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("round %d: GET /%s: %d, want 404", round, path, resp.StatusCode)
			}
		}
	}
	if n := e.origin.Hits(fakeorigin.Versions); n != 1 {
		t.Errorf("the origin was asked for the provider's version list %d times, want 1", n)
	}
	if n := e.origin.Hits(fakeorigin.ModuleVersions); n != 1 {
		t.Errorf("the origin was asked for the module's versions %d times, want 1", n)
	}
}
