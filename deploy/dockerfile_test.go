package deploy_test

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// Dockerfile

type instruction struct {
	cmd  string // upper case
	args string
}

func parseDockerfile() ([]instruction, error) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		return nil, err
	}
	var out []instruction
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cur += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		cur += line
		cmd, args, _ := strings.Cut(cur, " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur = ""
	}
	return out, sc.Err()
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	df, err := parseDockerfile()
	if err != nil {
		t.Fatal(err)
	}
	// The final stage is what runs.
	last := 0
	for i, in := range df {
		if in.cmd == "FROM" {
			last = i
		}
	}
	if last == 0 {
		t.Fatal("want a multi-stage build: a build stage and a runtime stage")
	}
	final := df[last:]
	env := map[string]string{}
	var user, volume, entrypoint string
	for _, in := range final {
		switch in.cmd {
		case "USER":
			user = in.args
		case "VOLUME":
			volume = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "ENV":
			words, err := shellWords(in.args)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range words {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					t.Errorf("ENV %s: use the KEY=value form", in.args)
				}
				env[k] = v
			}
		case "HEALTHCHECK":
			t.Errorf("HEALTHCHECK %s: the runtime image has no shell or HTTP client", in.args)
		case "RUN":
			t.Errorf("RUN %s in the runtime stage: it has no shell", in.args)
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if uid == "" || uid == "0" || uid == "root" {
		t.Errorf("USER %q: the image must run as a non-root user", user)
	}
	if !strings.Contains(volume, dataDir) {
		t.Errorf("VOLUME %q: want the data directory %s", volume, dataDir)
	}
	if env["TFMIRROR_DATA_DIR"] != dataDir {
		t.Errorf("ENV TFMIRROR_DATA_DIR=%q, want %s", env["TFMIRROR_DATA_DIR"], dataDir)
	}
	if !strings.HasPrefix(entrypoint, "[") {
		t.Errorf("ENTRYPOINT %s: use the exec form (there is no shell)", entrypoint)
	}
	checkEnv(t, "Dockerfile", env)
}

// TestDockerBuildCommand runs the build stage's go build for real and
// checks the binary is static (it runs on distroless/static) and reports
// the version passed in the build argument.
func TestDockerBuildCommand(t *testing.T) {
	t.Parallel()
	env, _, err := dockerBuildCommand("x")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(env, "CGO_ENABLED=0") {
		t.Errorf("build environment %v: want CGO_ENABLED=0 for a static binary", env)
	}
	bin := binary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("binary has a %v program header: it is dynamically linked", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("binary needs shared libraries %v", libs)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), testVersion) {
		t.Errorf("tfmirror version: %v %q, want it to name %s", err, out, testVersion)
	}
}
