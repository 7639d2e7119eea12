package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSyncPrintsNoSourceCredentials: a configuration's module call of a
// source that is not a registry address, which sync lists as one the
// clients fetch themselves, is listed without the credentials its URL
// may carry (a git:: URL's user:token@, a pre-signed URL's signature):
// sync runs in CI, whose output many read.
func TestSyncPrintsNoSourceCredentials(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	dir := t.TempDir()
	main := `module "a" {
  source = "git::https://ci-bot:ghp_s3cretT0ken@git.example.test/org/a.git?ref=v1"
}
module "b" {
  source = "https://bucket.example.test/b.zip?X-Amz-Signature=s1gnatureS3cret&archive=zip"
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, _ := syncInProcess(t, origin, filepath.Join(t.TempDir(), "data"), "--dry-run", "--platforms", "linux_amd64", dir)
	printed := stdout + stderr
	for _, secret := range []string{"ghp_s3cretT0ken", "s1gnatureS3cret"} {
		if strings.Contains(printed, secret) {
			t.Errorf("sync printed the secret %q", secret)
		}
	}
	for _, want := range []string{"git::https://git.example.test/org/a.git?ref=v1", "https://bucket.example.test/b.zip"} {
		if !strings.Contains(printed, want) {
			t.Errorf("sync did not list the source %s", want)
		}
	}
}

// TestSyncRefusalNamesNoSourceCredentials: a configuration refused for a
// version argument on a module call whose source is a URL names that
// source without the credentials it carries.
func TestSyncRefusalNamesNoSourceCredentials(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	dir := t.TempDir()
	main := `module "a" {
  source  = "git::https://ci-bot:ghp_s3cretT0ken@git.example.test/org/a.git?ref=v1"
  version = "1.0.0"
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := syncInProcess(t, origin, filepath.Join(t.TempDir(), "data"), "--dry-run", "--platforms", "linux_amd64", dir)
	if code != 2 {
		t.Errorf("sync exited %d, want 2", code)
	}
	if printed := stdout + stderr; strings.Contains(printed, "ghp_s3cretT0ken") {
		t.Errorf("sync printed the secret")
	} else if !strings.Contains(printed, "main.tf:2") || !strings.Contains(printed, "git::https://git.example.test/org/a.git?ref=v1") {
		t.Errorf("the refusal does not name the call and its source")
	}
}

// TestSyncShortensALongConstraintItReports: a version constraint that
// nothing meets is named in sync's failure as far as a line holds it,
// with its length, not written whole: a stranger's configuration may
// write one of megabytes (or thousands of distinct constraints, which
// sync joins), which filled the output, a CI log.
func TestSyncShortensALongConstraintItReports(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	dir := t.TempDir()
	var c strings.Builder
	c.WriteString(">= 99.0.0")
	for i := range 100000 {
		fmt.Fprintf(&c, ", != 0.%d.%d", i/1000, i%1000)
	}
	main := "terraform {\n  required_providers {\n    random = { source = \"hashicorp/random\", version = \"" + c.String() + "\" }\n  }\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := syncInProcess(t, origin, filepath.Join(t.TempDir(), "data"), "--platforms", "linux_amd64", dir)
	if code != 1 {
		t.Errorf("sync exited %d, want 1", code)
	}
	printed := stdout + stderr
	if len(printed) > 16<<10 {
		t.Errorf("sync printed %d bytes", len(printed))
	}
	if !strings.Contains(printed, `no version matches ">= 99.0.0, != 0.0.0`) || !strings.Contains(printed, "main.tf:3") {
		t.Errorf("the failure does not name the constraint's start and where it was asked")
	}
}
