package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStaticFileStaysInTheConfiguration: with --client opentofu, file()
// in a module's source or version reads a file of the configuration
// directory sync was given only: a path out of it (../, absolute, or a
// link leading out) is refused naming its file:line. The configuration
// may be a stranger's (a pull request's checkout), and sync runs as the
// mirror's user: file("/var/lib/tfmirror/url-signing.key") as a source
// that is no registry address was read and printed in sync's list of
// the sources the clients fetch themselves.
func TestStaticFileStaysInTheConfiguration(t *testing.T) {
	const secret = "s3cret-of-the-mirror"
	parent := t.TempDir()
	secretPath := filepath.Join(parent, "secret.txt")
	if err := os.WriteFile(secretPath, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, path string }{
		{"parent", "../secret.txt"},
		{"absolute", secretPath},
		{"link", "link.txt"},
		{"link in path.module", "${path.module}/link.txt"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "config")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "..", "secret.txt"), []byte(secret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(secretPath, filepath.Join(dir, "link.txt")); err != nil {
				t.Fatal(err)
			}
			src := "module \"ok\" {\n  source = trimspace(file(\"inside.txt\"))\n}\nmodule \"m\" {\n  source = trimspace(file(\"" + tt.path + "\"))\n}\n"
			for name, body := range map[string]string{"main.tf": src, "inside.txt": "hashicorp/consul/aws\n"} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			spec, err := LoadFor(OpenTofu, nil, dir)
			if err == nil {
				t.Fatalf("file(%q) was read; sources: %q", tt.path, spec.Unmirrorable)
			}
			t.Log(err)
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the refusal holds the file's content")
			}
			if !strings.Contains(err.Error(), "main.tf:5") {
				t.Errorf("the refusal does not name main.tf:5")
			}
		})
	}
	// Within the directory, a link to a file of it is read.
	dir := t.TempDir()
	files := map[string]string{"main.tf": "module \"m\" {\n  source = trimspace(file(\"sub/../link.txt\"))\n}\n", "src.txt": "hashicorp/consul/aws\n"}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src.txt", filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFor(OpenTofu, nil, dir); err != nil {
		t.Errorf("a link within the directory: %v", err)
	}
}

// TestStaticVarFilesStayInTheConfiguration: the variables files a
// configuration directory holds (terraform.tfvars, *.auto.tfvars and
// their .json) are read when they are files of it: one that is a link
// leading out of it is refused naming it, where a link to a JSON file
// of the mirror's user (a CLI credentials file's tokens) gave a
// variable that a module source printed.
func TestStaticVarFilesStayInTheConfiguration(t *testing.T) {
	const secret = "t0ken-of-the-mirror"
	outside := filepath.Join(t.TempDir(), "credentials.tfrc.json")
	if err := os.WriteFile(outside, []byte(`{"credentials": {"app.terraform.io": {"token": "`+secret+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"terraform.tfvars.json", "x.auto.tfvars.json"} {
		t.Run(name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{
				"main.tf": "variable \"credentials\" {}\nmodule \"m\" {\n  source = \"git::https://git.example.test/${var.credentials[\"app.terraform.io\"].token}.git\"\n}\n",
			})
			if err := os.Symlink(outside, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			spec, err := LoadFor(OpenTofu, nil, dir)
			if err == nil {
				t.Fatalf("the link was read; sources: %q", spec.Unmirrorable)
			}
			t.Log(err)
			if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), name) {
				t.Errorf("the refusal does not name %s alone: %v", name, err)
			}
		})
	}
}
