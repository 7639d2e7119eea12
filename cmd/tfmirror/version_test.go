package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

func TestBuildOf(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	stamp := func(version string, settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/tfmirror/tfmirror/v2", Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	tests := []struct {
		name                string
		ldVersion, ldCommit string
		info                *debug.BuildInfo
		ok                  bool
		want                build
		str                 string
	}{
		{name: "release build", ldVersion: "2.0.0", ldCommit: rev, info: stamp("(devel)"), ok: true,
			want: build{Version: "2.0.0", Commit: rev}, str: "2.0.0 (0123456789ab)"},
		{name: "release build stamped by the same tree", ldVersion: "2.0.0", ldCommit: rev,
			info: stamp("v2.0.0", "vcs.revision", rev, "vcs.modified", "false"), ok: true,
			want: build{Version: "2.0.0", Commit: rev}, str: "2.0.0 (0123456789ab)"},
		{name: "go install at a tag", info: stamp("v2.0.0"), ok: true,
			want: build{Version: "v2.0.0"}, str: "v2.0.0"},
		{name: "go install at a pseudo-version", info: stamp("v2.0.1-0.20261128183000-0123456789ab"), ok: true,
			want: build{Version: "v2.0.1-0.20261128183000-0123456789ab"}, str: "v2.0.1-0.20261128183000-0123456789ab"},
		{name: "go build in a clean checkout", info: stamp("v0.0.0-20261128183000-0123456789ab", "vcs", "git", "vcs.revision", rev, "vcs.modified", "false"), ok: true,
			want: build{Version: "v0.0.0-20261128183000-0123456789ab", Commit: rev}, str: "v0.0.0-20261128183000-0123456789ab (0123456789ab)"},
		{name: "go build in a changed checkout", info: stamp("v0.0.0-20261128183000-0123456789ab+dirty", "vcs.revision", rev, "vcs.modified", "true"), ok: true,
			want: build{Version: "v0.0.0-20261128183000-0123456789ab+dirty", Commit: rev, Modified: true}, str: "v0.0.0-20261128183000-0123456789ab+dirty (0123456789ab, modified)"},
		{name: "go build without a version, with a stamp", info: stamp("(devel)", "vcs.revision", rev, "vcs.modified", "true"), ok: true,
			want: build{Version: "devel", Commit: rev, Modified: true}, str: "devel (0123456789ab, modified)"},
		{name: "go build -buildvcs=false", info: stamp("(devel)"), ok: true,
			want: build{Version: "devel"}, str: "devel"},
		{name: "no build information", want: build{Version: "devel"}, str: "devel"},
		{name: "ldflags commit, stamp of another tree", ldVersion: "2.0.0", ldCommit: rev,
			info: stamp("(devel)", "vcs.revision", "fedcba9876543210fedcba9876543210fedcba98", "vcs.modified", "true"), ok: true,
			want: build{Version: "2.0.0", Commit: rev}, str: "2.0.0 (0123456789ab)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := buildOf(tc.ldVersion, tc.ldCommit, tc.info, tc.ok)
			if got != tc.want {
				t.Errorf("buildOf = %+v, want %+v", got, tc.want)
			}
			if got.String() != tc.str {
				t.Errorf("String() = %q, want %q", got.String(), tc.str)
			}
		})
	}
}

// TestVersionOfBuiltBinary builds the binary as the release does (with
// -ldflags naming the version and commit) and as a developer does (a plain
// go build in the checkout, with the go command's VCS stamp), and checks
// what `tfmirror version` says of each.
func TestVersionOfBuiltBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	dir := t.TempDir()
	versionOf := func(bin string) string {
		t.Helper()
		out, err := exec.Command(bin, "version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s version: %v\n%s", bin, err, out)
		}
		return strings.TrimSpace(string(out))
	}

	const ldRev = "89abcdef0123456789abcdef0123456789abcdef"
	releasedBin := goBuildIn(t, ".", filepath.Join(dir, "released"), "-ldflags", "-s -w -X main.version=2.0.0-test -X main.commit="+ldRev)
	released := versionOf(releasedBin)
	if !strings.HasPrefix(released, "tfmirror 2.0.0-test commit "+ldRev+" ") {
		t.Errorf("with -ldflags: %q, want the version and commit they set", released)
	}
	// The running serve says the same: on the status page (HTML and
	// JSON), in tfmirror_build_info and in its start-up line.
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: []string{tfRegistry}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	p := startProcess(t, releasedBin, filepath.Join(dir, "data"), origin, originCAFile(t, origin))
	const shown = "2.0.0-test (89abcdef0123)"
	if v := p.logged("tfmirror is serving")["version"]; v != shown {
		t.Errorf("start-up log: version %v, want %q", v, shown)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct{ path, want string }{
		{"/?format=json", `"version":"` + shown + `"`},
		{"/", ", version " + shown + "</span>"},
		{"/metrics", `tfmirror_build_info{goversion="` + runtime.Version() + `",revision="` + ldRev + `",version="2.0.0-test"} 1`},
	} {
		body, _, err := p.get(ctx, c.path)
		if err != nil || !strings.Contains(string(body), c.want) {
			t.Errorf("GET %s: %v; want it to contain %s", c.path, err, c.want)
		}
	}

	// A plain go build in a git checkout: the go command stamps the
	// revision, and whether the tree had changes. It does so in a clone
	// (a directory .git), not in a git worktree (a file .git), so the
	// build runs in a clone of this checkout's commit.
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("git rev-parse HEAD: %v (CI runs in a git checkout)", err)
		}
		t.Skipf("not a git checkout (%v): the VCS stamp cannot be checked", err)
	}
	rev := strings.TrimSpace(string(head))
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "src")
	for _, args := range [][]string{
		{"clone", "--quiet", "--shared", "--no-checkout", strings.TrimSpace(string(root)), clone},
		{"-C", clone, "-c", "advice.detachedHead=false", "checkout", "--quiet", rev},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	pkg := filepath.Join(clone, "cmd", "tfmirror")
	clean := versionOf(goBuildIn(t, pkg, filepath.Join(dir, "clean")))
	if want := " commit " + rev + " go"; !strings.Contains(clean, want) || strings.HasPrefix(clean, "tfmirror dev ") {
		t.Errorf("a go build of a clean checkout at %s: %q, want it to name the commit, unmodified", rev, clean)
	}
	// A changed tracked file: the stamp says modified.
	readme := filepath.Join(clone, "README.md")
	if err := os.WriteFile(readme, []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed := versionOf(goBuildIn(t, pkg, filepath.Join(dir, "changed")))
	if want := " commit " + rev + " (modified) go"; !strings.Contains(changed, want) {
		t.Errorf("a go build of a changed checkout at %s: %q, want %q", rev, changed, want)
	}
}

// goBuildIn builds the package in dir into bin with -trimpath (so that the
// build cache serves a clone's packages too) and args.
func goBuildIn(t *testing.T, dir, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append(append([]string{"build", "-trimpath", "-o", bin}, args...), ".")...)
	cmd.Dir = dir
	// GOFLAGS: whatever the environment says (-buildvcs=false, say), the
	// stamp is asked for, as a plain go build in a checkout does.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=auto", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %v in %s: %v\n%s", args, dir, err, out)
	}
	return bin
}

// TestVersionRefusesArguments: `tfmirror version` with a flag or argument
// it does not take exits 2 and says so, printing no version; without
// any it prints the version line and exits 0.
func TestVersionRefusesArguments(t *testing.T) {
	for _, args := range [][]string{{"version", "--bogus"}, {"version", "extra"}, {"--version", "-v"}} {
		var stdout, stderr strings.Builder
		if code := run(args, &stdout, &stderr); code != 2 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "takes no flags or arguments") {
			t.Errorf("tfmirror %q: exit %d, stdout %q, stderr %q; want exit 2, nothing printed, the refusal said", args, code, stdout.String(), stderr.String())
		}
	}
	var stdout, stderr strings.Builder
	if code := run([]string{"version"}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "tfmirror ") {
		t.Errorf("tfmirror version: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// TestVersionHelp: `tfmirror version -h` (or --help) prints the
// command's usage on stdout and exits 0, as every other command's -h
// does; it was refused as a flag the command does not take (exit 2).
func TestVersionHelp(t *testing.T) {
	for _, h := range []string{"-h", "--help", "-help"} {
		var stdout, stderr strings.Builder
		if code := run([]string{"version", h}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "Usage: tfmirror version") || stderr.Len() != 0 {
			t.Errorf("tfmirror version %s: exit %d, stdout %q, stderr %q; want exit 0 and the usage on stdout", h, code, stdout.String(), stderr.String())
		}
	}
}

// TestFlagAfterArgumentsNamed: a flag given after a command's arguments
// (read as one more argument, as Go's flag parsing stops at the first)
// is named in the refusal, with where flags go, and the command does
// nothing (exit 2).
func TestFlagAfterArgumentsNamed(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "tfmirror.hcl")
	if err := os.WriteFile(conf, []byte("listen = \"127.0.0.1:0\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"config", "check", conf, "--skip-files"},
		{"export", "--data-dir", dir, filepath.Join(dir, "out"), "--provider", "hashicorp/random"},
		{"import", "--data-dir", dir, filepath.Join(dir, "in"), "--allow-unsigned"},
		{"policy", "explain", "--data-dir", dir, "hashicorp/random", "--config", conf},
	} {
		code, stdout, stderr := runCommand(args...)
		if code != 2 || !strings.Contains(stderr, "give flags before the arguments") || !strings.Contains(stderr, `"`+args[len(args)-2]+`"`) && !strings.Contains(stderr, `"`+args[len(args)-1]+`"`) {
			t.Errorf("tfmirror %q: exit %d\nstdout: %s\nstderr: %s\nwant exit 2 naming the flag given after the arguments", args, code, stdout, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Error("the export refused wrote its OUT")
	}
}
