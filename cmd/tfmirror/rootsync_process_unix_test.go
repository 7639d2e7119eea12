//go:build linux

package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// otherUserUID is the user the serves of these tests run as, as the
// systemd unit's and the image's mirrors run as a user of their own.
const otherUserUID, otherUserGID = 65534, 65534

// startOtherUsersServe runs `tfmirror serve` as otherUserUID on a data
// directory that user owns, in front of origin, and returns the data
// directory. It skips the test unless it runs as root.
func startOtherUsersServe(t *testing.T, origin *fakeorigin.Origin) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the serve as another user")
	}
	// A directory the user can enter, holding the binary it runs, the
	// origin's CA it trusts and the data directory it owns.
	base, err := os.MkdirTemp("", "tfmirror-otheruser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	built, err := os.ReadFile(buildBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "tfmirror")
	if err := os.WriteFile(bin, built, 0o755); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(base, "origin-ca.pem")
	if err := os.WriteFile(caFile, origin.CACertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(base, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, otherUserUID, otherUserGID); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", data,
		"--allowed-origins", origin.Addr, "--allow-private-origins", "--log-format", "json")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + base, "SSL_CERT_FILE=" + caFile}
	cmd.Dir = base
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUserUID, Gid: otherUserGID}}
	startCmd(t, cmd, data)
	return data
}

// allOtherUsers fails t for each file of data that is not otherUserUID's.
func allOtherUsers(t *testing.T, data string) {
	t.Helper()
	err := filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if owner, ok := inputfile.Owner(info); ok && owner != otherUserUID {
			t.Errorf("%s is uid %d's in the data directory of uid %d", path, owner, otherUserUID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRootSyncsModulesThroughAnotherUsersServeProcess: root runs `tfmirror
// sync` of a registry module on the data directory of a serve that runs
// as another user, which does the work through its admin socket. The
// serve unpacks the module's package into a directory the sync made in
// the data directory, for the sync to read its calls: made by root, 0700,
// that directory was root's, the serve could not use it, and the sync
// failed ("is not an existing empty directory"). The sync succeeds, and
// leaves nothing of root's in the data directory.
func TestRootSyncsModulesThroughAnotherUsersServeProcess(t *testing.T) {
	t.Parallel()
	origin, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	origin.AddTarball("net.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("variable \"cidr\" {}\n")}))
	origin.AddModule("acme", "net", "aws", "1.0.0", origin.TarballURL("net.tar.gz"))
	data := startOtherUsersServe(t, origin)

	config := t.TempDir()
	if err := os.WriteFile(filepath.Join(config, "main.tf"), []byte("module \"net\" {\n  source  = \""+origin.Addr+"/acme/net/aws\"\n  version = \"1.0.0\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCommand("sync", "--data-dir", data, config)
	if code != 0 || !strings.Contains(out, "modules: 1 packages fetched") {
		t.Fatalf("root's sync through uid %d's serve: exit %d\n%s\n%s", otherUserUID, code, out, errOut)
	}
	allOtherUsers(t, data)
}

// TestRootExportKeyThroughAnotherUsersServeProcess: root runs `tfmirror
// export-key` on the data directory of a serve that runs as another user
// (the connected side's step before an export, docs/air-gap.md). It was
// refused (the data directory is another user's), and with --export-key
// naming the key file, refused again (a file of another user's): the
// serve now answers with the key it signs with, made by it, its user's.
func TestRootExportKeyThroughAnotherUsersServeProcess(t *testing.T) {
	t.Parallel()
	origin, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	data := startOtherUsersServe(t, origin)
	code, out, errOut := runCommand("export-key", "--data-dir", data)
	if code != 0 || !strings.HasPrefix(out, "-----BEGIN PGP PUBLIC KEY BLOCK-----") || !strings.Contains(errOut, "read by the running tfmirror") {
		t.Fatalf("root's export-key through uid %d's serve: exit %d\n%s\n%s", otherUserUID, code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(data, "export-key.asc")); err != nil {
		t.Errorf("the serve made no export key: %v", err)
	}
	allOtherUsers(t, data)
	// The same key again: the one the serve keeps.
	if code, again, _ := runCommand("export-key", "--data-dir", data); code != 0 || again != out {
		t.Errorf("a second export-key printed another key (exit %d)", code)
	}
}
