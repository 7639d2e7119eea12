package main

// End-to-end tests with the real tfenv, a shell script that is not
// packaged for Debian, npm or Go: they run only when TFMIRROR_TFENV names
// its bin/tfenv (a checkout of tfutils/tfenv), and skip otherwise, in CI
// too. proxy/releasesdoor.TestTfenvAndTfswitchLayout checks the requests
// it makes and the answers it reads without it.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// tfenvBinary is the tfenv TFMIRROR_TFENV names; without one the test
// skips.
func tfenvBinary(t *testing.T) string {
	t.Helper()
	path := toolFromEnv(t, "TFMIRROR_TFENV", "tfenv's bin/tfenv to run the tfenv end-to-end tests")
	for _, tool := range []string{"bash", "curl", "unzip", "gpgv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("tfenv needs %s: %v", tool, err)
		}
	}
	return path
}

// TestTfenvInstallsTerraformThroughTheMirror: tfenv, with TFENV_REMOTE on
// the CLI releases door, lists the versions from its HTML listing and
// installs one, checking the SHA256SUMS signature with gpgv against a
// keyring holding only the publisher's key (use-gpgv), as it does against
// releases.hashicorp.com, and again with the origin down, from what the
// mirror holds; it refuses a version when the keyring holds another key.
func TestTfenvInstallsTerraformThroughTheMirror(t *testing.T) {
	tfenv := tfenvBinary(t)
	// Signed with a key whose short ID is HashiCorp's, as tfenv names
	// the signature file by it.
	c := newCLIOriginWith(t, fakeorigin.ReleasesOptions{HashiCorpShortID: true})
	c.start(t, filepath.Join(t.TempDir(), "data"))

	var home string // the last run's
	run := func(key string, args ...string) (string, error) {
		t.Helper()
		home = t.TempDir()
		config, gnupg := filepath.Join(home, "tfenv"), filepath.Join(home, "gnupg")
		for _, dir := range []string{config, gnupg} {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(config, "use-gpgv"), []byte("trust-tfenv: no\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		block, err := armor.Decode(strings.NewReader(key))
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(gnupg, "trustedkeys.gpg"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.ReadFrom(block.Body); err != nil {
			t.Fatal(err)
		}
		f.Close()
		cmd := exec.CommandContext(t.Context(), tfenv, args...)
		cmd.Dir = home
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GNUPGHOME=" + gnupg,
			"TFENV_CONFIG_DIR=" + config, "TFENV_REMOTE=" + c.url + "/releases/hashicorp",
			"TFENV_ARCH=" + strings.SplitN(platform, "_", 2)[1], "CURL_CA_BUNDLE=" + c.caFile}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := run(c.origin.HashiCorpKey, "list-remote")
	if err != nil || !strings.Contains(out, "1.6.0") || !strings.Contains(out, "1.5.7") {
		t.Fatalf("tfenv list-remote: %v\n%s", err, out)
	}
	if out, err := run(c.origin.HashiCorpKey, "install", "1.6.0"); err != nil || !strings.Contains(out, "Installation of terraform v1.6.0 successful") {
		t.Fatalf("tfenv install 1.6.0: %v\n%s", err, out)
	}
	c.checkInstalled(t, filepath.Join(home, "tfenv", "versions", "1.6.0", "terraform"), "hashicorp", "terraform", "1.6.0", "Terraform v1.6.0")
	// The origin down: listed and installed from what the mirror holds.
	c.origin.SetDown(true)
	if out, err := run(c.origin.HashiCorpKey, "install", "1.6.0"); err != nil || !strings.Contains(out, "Installation of terraform v1.6.0 successful") {
		t.Fatalf("tfenv install 1.6.0, the origin down: %v\n%s", err, out)
	}
	c.origin.SetDown(false)
	if out, err := run(c.origin.OpenTofuKey, "install", "1.5.7"); err == nil || !strings.Contains(out, "PGP signature rejected") {
		t.Fatalf("tfenv install 1.5.7 with another publisher's key: %v, want the signature rejected\n%s", err, out)
	}
}
