package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	dataDir     = "/var/lib/tfmirror"
	testVersion = "0.0.0-deploytest"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
)

// ---------------------------------------------------------------------------
// The binary, built once with the release's own build command.

var (
	binDir   string
	binPath  string
	buildErr error
	built    = make(chan struct{})
)

// TestMain starts the build of the binary at once, so that it runs while
// the tests that do not need it (rendering, linting) do.
func TestMain(m *testing.M) {
	var err error
	binDir, err = os.MkdirTemp("", "tfmirror-deploy-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go func() {
		defer close(built)
		binPath, buildErr = build(binDir)
	}()
	code := m.Run()
	<-built // the go command writes into binDir
	os.RemoveAll(binDir)
	os.Exit(code)
}

// build builds ./cmd/tfmirror in dir with the go build command of the
// release (.goreleaser.yaml: its environment, flags and ldflags, the
// version testVersion and the commit testCommit) and returns the binary's
// path.
func build(dir string) (string, error) {
	bin := filepath.Join(dir, "tfmirror")
	env, args, err := releaseBuildCommand(bin)
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = ".." // the main module
	// GOWORK=off: the main module's own dependency versions, whatever
	// the environment says.
	cmd.Env = append(os.Environ(), append(env, "GOWORK=off")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// binary waits for the build TestMain started and returns the binary.
func binary(t *testing.T) string {
	t.Helper()
	<-built
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

var (
	flagsOnce sync.Once
	flagNames map[string]bool
	flagsErr  error
)

// serveFlags returns the flag names `tfmirror serve -h` lists.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	bin := binary(t)
	flagsOnce.Do(func() {
		var out bytes.Buffer
		cmd := exec.Command(bin, "serve", "-h")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			flagsErr = fmt.Errorf("serve -h: %v\n%s", err, out.Bytes())
			return
		}
		flagNames = map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(out.String(), -1) {
			flagNames[m[1]] = true
		}
		if !flagNames["data-dir"] || !flagNames["listen"] {
			flagsErr = fmt.Errorf("serve -h lists no --data-dir or --listen:\n%s", out.Bytes())
		}
	})
	if flagsErr != nil {
		t.Fatal(flagsErr)
	}
	return flagNames
}

// envFlag returns the flag a TFMIRROR_* variable sets, or "".
func envFlag(name string) string {
	flag, ok := strings.CutPrefix(name, "TFMIRROR_")
	if !ok {
		return ""
	}
	return strings.ReplaceAll(strings.ToLower(flag), "_", "-")
}

// argFlag returns the flag name of a command-line argument (-f, --f,
// --f=v), or "" for a value.
func argFlag(arg string) string {
	name, ok := strings.CutPrefix(arg, "-")
	if !ok || name == "" {
		return ""
	}
	name = strings.TrimPrefix(name, "-")
	name, _, _ = strings.Cut(name, "=")
	return name
}

// checkEnv is checkServe without arguments.
func checkEnv(t *testing.T, where string, env map[string]string) {
	t.Helper()
	checkServe(t, where, nil, env, nil)
}

// checkServe fails for every TFMIRROR_* name in env and every flag in args
// that is not a flag of `tfmirror serve`, and then has the binary parse
// and validate the values, and the files an argument names by a path in
// files (the configuration file) with their content there.
func checkServe(t *testing.T, where string, args []string, env map[string]string, files map[string][]byte) {
	t.Helper()
	flags := serveFlags(t)
	for name := range env {
		if flag := envFlag(name); flag != "" && !flags[flag] {
			t.Errorf("%s: %s is not a flag of tfmirror serve (no --%s)", where, name, flag)
		}
	}
	for _, a := range args {
		if flag := argFlag(a); flag != "" && !flags[flag] {
			t.Errorf("%s: argument %s is not a flag of tfmirror serve", where, a)
		}
	}
	// Values: the binary parses and validates the environment and
	// arguments before it starts; a missing certificate then stops it
	// (exit 1) before it listens. A bad value exits 2 with "tfmirror
	// serve:". The command line wins over the environment, and later
	// arguments over earlier ones, so paths and addresses are replaced by
	// harmless ones (and TLS forced on, to stop there) while every other
	// value is the deployed one.
	bin := binary(t) // the build first: the timeout is the run's
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tmp := t.TempDir()
	cmdArgs := []string{"serve"}
	for _, a := range args {
		if content, ok := files[a]; ok && a != "" {
			local := filepath.Join(tmp, filepath.Base(a))
			if err := os.WriteFile(local, content, 0o600); err != nil {
				t.Fatal(err)
			}
			a = local
		}
		cmdArgs = append(cmdArgs, a)
	}
	cmdArgs = append(cmdArgs,
		"--data-dir", tmp, "--listen", "127.0.0.1:0", "--metrics-listen", "", "--insecure-http=false",
		"--tls-cert", filepath.Join(tmp, "missing.pem"), "--tls-key", filepath.Join(tmp, "missing-key.pem"))
	cmd := exec.CommandContext(ctx, bin, cmdArgs...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		if strings.HasPrefix(k, "TFMIRROR_") {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "loading TLS certificate") {
		t.Errorf("%s: the values were not accepted by tfmirror serve (%v):\n%s", where, err, out)
	}
}

// configCheck runs the binary's `tfmirror config check --skip-files` on
// content, saved under name, with an empty environment, and returns what
// it printed; it fails unless the file is accepted. The files it names
// (the mounted Secrets') are the workload's, not here.
func configCheck(t *testing.T, where, name string, content []byte) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, content, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := binary(t) // the build first: the timeout is the run's
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "config", "check", "--skip-files", file)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: tfmirror config check refuses the file (%v):\n%s\n%s", where, err, stderr.Bytes(), content)
	}
	return stdout.String()
}
