//go:build unix

package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStaticWorkspaceFileBounded: the workspace a configuration's
// .terraform/environment names (terraform.workspace, with --client
// opentofu) is read as an operator's file is: a FIFO, or a link to a
// device (/dev/zero, which a checkout may hold), is not read, sync
// neither waiting for ever nor reading without end.
func TestStaticWorkspaceFileBounded(t *testing.T) {
	for _, kind := range []string{"fifo", "device"} {
		t.Run(kind, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{
				"main.tf": "module \"m\" {\n  source = \"hashicorp/consul/aws\"\n  version = terraform.workspace == \"default\" ? \"1.0.0\" : \"2.0.0\"\n}\n",
			})
			env := filepath.Join(dir, ".terraform", "environment")
			if err := os.MkdirAll(filepath.Dir(env), 0o755); err != nil {
				t.Fatal(err)
			}
			if kind == "fifo" {
				if err := syscall.Mkfifo(env, 0o644); err != nil {
					t.Skip(err)
				}
			} else if err := os.Symlink("/dev/zero", env); err != nil {
				t.Fatal(err)
			}
			t.Setenv("TF_WORKSPACE", "")
			done := make(chan error, 1)
			go func() {
				_, err := LoadFor(OpenTofu, nil, dir)
				done <- err
			}()
			select {
			case err := <-done:
				t.Log(err)
				if err == nil || !strings.Contains(err.Error(), "environment") {
					t.Errorf("the workspace file was taken: %v", err)
				}
			case <-time.After(5 * time.Second):
				if kind == "fifo" {
					// Let the reading end.
					if f, err := os.OpenFile(env, os.O_WRONLY, 0); err == nil {
						f.Close()
					}
				}
				t.Fatalf("sync still reads the workspace file after 5s")
			}
		})
	}
}
