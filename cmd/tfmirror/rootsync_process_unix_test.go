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

// TestRootSyncsModulesThroughAnotherUsersServeProcess: root runs `tfmirror
// sync` of a registry module on the data directory of a serve that runs
// as another user (uid 65534, as the systemd unit's and the image's
// mirrors run), which does the work through its admin socket. The serve
// unpacks the module's package into a directory the sync made in the data
// directory, for the sync to read its calls: made by root, 0700, that
// directory was root's, the serve could not use it, and the sync failed
// ("is not an existing empty directory"). The sync succeeds, and leaves
// nothing of root's in the data directory.
func TestRootSyncsModulesThroughAnotherUsersServeProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the serve as another user")
	}
	const uid, gid = 65534, 65534
	// A directory uid 65534 can enter, holding the binary it runs, the
	// origin's CA it trusts and the data directory it owns.
	base, err := os.MkdirTemp("", "tfmirror-rootsync-")
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
	origin, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	caFile := filepath.Join(base, "origin-ca.pem")
	if err := os.WriteFile(caFile, origin.CACertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	origin.AddTarball("net.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("variable \"cidr\" {}\n")}))
	origin.AddModule("acme", "net", "aws", "1.0.0", origin.TarballURL("net.tar.gz"))
	data := filepath.Join(base, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, uid, gid); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", data,
		"--allowed-origins", origin.Addr, "--allow-private-origins", "--log-format", "json")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + base, "SSL_CERT_FILE=" + caFile}
	cmd.Dir = base
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	startCmd(t, cmd, data)

	config := t.TempDir()
	if err := os.WriteFile(filepath.Join(config, "main.tf"), []byte("module \"net\" {\n  source  = \""+origin.Addr+"/acme/net/aws\"\n  version = \"1.0.0\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCommand("sync", "--data-dir", data, config)
	if code != 0 || !strings.Contains(out, "modules: 1 packages fetched") {
		t.Fatalf("root's sync through uid %d's serve: exit %d\n%s\n%s", uid, code, out, errOut)
	}
	err = filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if owner, ok := inputfile.Owner(info); ok && owner != uid {
			t.Errorf("%s is uid %d's in the data directory of uid %d", path, owner, uid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
