package main

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeInHouse lays out an in-house build of HOST/NS/TYPE version for
// linux_amd64 under root as `terraform providers mirror` would (no
// evidence), and returns root.
func writeInHouse(t *testing.T, root, host, ns, typ, version string) string {
	t.Helper()
	dir := filepath.Join(root, host, ns, typ)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	h := &zip.FileHeader{Name: "terraform-provider-" + typ + "_v" + version, Method: zip.Deflate}
	h.SetMode(0o755)
	f, err := zw.CreateHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "#!/bin/sh\necho in-house build\nexit 1\n")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	name := "terraform-provider-" + typ + "_" + version + "_linux_amd64.zip"
	if err := os.WriteFile(filepath.Join(dir, name), zbuf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestImportUnsignedUnderOriginHost: `tfmirror import --allow-unsigned`
// of a provider under an allowed origin host adds nothing unless
// --allow-unsigned-hosts names the host, and says which flag; a host that
// is not an allowed origin cannot be named.
func TestImportUnsignedUnderOriginHost(t *testing.T) {
	in := writeInHouse(t, t.TempDir(), "registry.terraform.io", "acme", "alpha", "1.0.0")
	data := filepath.Join(t.TempDir(), "data")

	code, stdout, stderr := runCommand("import", "--data-dir", data, "--allow-unsigned", in)
	if code != 1 {
		t.Errorf("import --allow-unsigned: exit %d, want 1\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"registry.terraform.io/acme/alpha 1.0.0 refused", "registry.terraform.io is an allowed origin", "--allow-unsigned-hosts"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, stderr)
		}
	}
	if got := cachedVersions(t, data); len(got) != 0 {
		t.Errorf("the refused import cached %v", got)
	}

	code, stdout, stderr = runCommand("import", "--data-dir", data, "--allow-unsigned", "--allow-unsigned-hosts", "tf.corp.example", in)
	if code != 2 || !strings.Contains(stderr, "tf.corp.example is not among --allowed-origins") {
		t.Errorf("--allow-unsigned-hosts of a host that is no origin: exit %d, want 2\n%s%s", code, stdout, stderr)
	}

	code, stdout, stderr = runCommand("import", "--data-dir", data, "--allow-unsigned", "--allow-unsigned-hosts", "registry.terraform.io", in)
	if code != 0 || !strings.Contains(stdout, "imported 1 packages") {
		t.Fatalf("import --allow-unsigned-hosts registry.terraform.io: exit %d\n%s%s", code, stdout, stderr)
	}
	if got := cachedVersions(t, data); !slices.Equal(got, []string{"registry.terraform.io/acme/alpha 1.0.0"}) {
		t.Errorf("after the allowed import, the cache holds %v", got)
	}
}
