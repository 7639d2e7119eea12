//go:build unix

package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// warnOpen is the start of the warning tfmirror logs when all users may
// write a data directory that is not its user's to change.
const warnOpen = "all users may write the data directory"

// TestEmptyDirDataDirIsTheMirrors starts tfmirror serve as the pods'
// user, as the shared-store workloads (the chart's ci values and the
// kustomize overlay) render it, on a volume the way the kubelet makes an
// emptyDir: root's, mode 0777. The rendered data directory is one
// tfmirror makes in the volume, its user's alone (0700), and no warning
// says all users may write it; pointed at the volume's root itself (the
// layout before), the same start warns, so the warning still fires where
// other users can write the data directory. It runs tfmirror as uid
// 65532, so it needs root; elsewhere it skips, saying so (the rendered
// layout itself is checked everywhere by checkWorkload).
func TestEmptyDirDataDirIsTheMirrors(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root, to make the volume root's and run tfmirror as the pods' user")
	}
	workloads := []struct {
		name string
		w    func(t *testing.T) *workload
	}{
		{"chart", func(t *testing.T) *workload {
			m, _ := helmTemplate(t, "shared store", chartValues(t, "shared-store-values.yaml"))
			return checkWorkload(t, m)
		}},
		{"kustomize", func(t *testing.T) *workload {
			return checkWorkload(t, kustomize(t, "kubernetes/shared-store"))
		}},
	}
	for _, tc := range workloads {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.w(t)
			if w.dataVolume.EmptyDir == nil {
				t.Fatalf("the data volume %+v is not an emptyDir", w.dataVolume)
			}
			uid := int(*w.pod.Spec.SecurityContext.RunAsUser)
			vol, run := podUser(t, uid)
			dir := filepath.Join(vol, strings.TrimPrefix(w.dataDir, dataDir))
			logs := run(w, dir)
			for _, l := range logs {
				if strings.Contains(l, warnOpen) {
					t.Errorf("the rendered data directory %s on the 0777 volume: %s", w.dataDir, l)
				}
			}
			fi, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o700 || int(st.Uid) != uid {
				t.Errorf("the data directory is mode %04o of uid %d, want 0700 of the pods' user %d", fi.Mode().Perm(), st.Uid, uid)
			}

			// The volume's root as the data directory: all users may
			// write it and tfmirror cannot change that; it says so.
			vol, run = podUser(t, uid)
			logs = run(w, vol)
			warned := false
			for _, l := range logs {
				warned = warned || strings.Contains(l, warnOpen)
			}
			if !warned {
				t.Errorf("a data directory all users may write, not tfmirror's to change, and no warning:\n%s", strings.Join(logs, "\n"))
			}
		})
	}
}

// podUser makes a volume as the kubelet makes an emptyDir (root's, mode
// 0777) and returns it with a function that starts tfmirror serve as uid
// with w's rendered arguments and configuration file and dataDir as its
// data directory, and returns what it logged until it served. Files the
// rendered settings name in mounted Secrets, and the shared store, are
// left out: they have nothing to do with the data directory.
func podUser(t *testing.T, uid int) (vol string, run func(w *workload, dataDir string) []string) {
	t.Helper()
	// Out of t.TempDir, whose parents only root may enter.
	top, err := os.MkdirTemp("", "tfmirror-pod")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	vol = filepath.Join(top, "volume")
	if err := os.Mkdir(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(vol, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	bin := filepath.Join(top, "tfmirror")
	copyFile(t, binary(t), bin)
	run = func(w *workload, dataDir string) []string {
		t.Helper()
		var conf map[string]any
		if err := json.Unmarshal(w.config, &conf); err != nil {
			t.Fatal(err)
		}
		for k, v := range conf {
			s, _ := json.Marshal(v)
			if strings.HasPrefix(k, "shared_store") || strings.Contains(string(s), `"/etc/tfmirror/`) {
				delete(conf, k)
			}
		}
		conf["listen"] = "127.0.0.1:0"
		conf["metrics_listen"] = "127.0.0.1:0"
		conf["offline"] = true
		data, _ := json.Marshal(conf)
		file := filepath.Join(top, "tfmirror.json")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"serve"}
		for i := 0; i < len(w.args); i++ {
			if argFlag(w.args[i]) == "config" {
				args = append(args, "--config", file)
				i++
				continue
			}
			args = append(args, w.args[i])
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + top, "TFMIRROR_DATA_DIR=" + dataDir}
		cmd.Dir = top
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			cmd.Process.Kill()
			io.Copy(io.Discard, stderr)
			cmd.Wait()
		}()
		var logs []string
		serving := false
		sc := bufio.NewScanner(stderr)
		for !serving && sc.Scan() {
			logs = append(logs, sc.Text())
			var line struct {
				Msg string `json:"msg"`
			}
			serving = json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "tfmirror is serving"
		}
		if !serving {
			t.Fatalf("tfmirror serve as uid %d on %s did not serve:\n%s", uid, dataDir, strings.Join(logs, "\n"))
		}
		return logs
	}
	return vol, run
}

// copyFile puts the executable from at to, for all users to run: a hard
// link where it can be (the built binary is 0755), a copy across file
// systems. A copy is written, so a process that forks while it is open for
// writing (these tests run in parallel) holds it open until that process
// execs, and an exec of the copy meanwhile fails with "text file busy";
// a link writes nothing.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if os.Link(from, to) == nil {
		return
	}
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}
