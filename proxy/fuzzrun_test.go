package proxy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fuzzers are the fuzz tests that CI runs beyond their seed corpora: this
// package's (the X-Forwarded-For selection and the Host check among them), those of the origin client's response parsers, the module
// package unpacker's (nothing written outside its directory) and its
// readers of a source host's Git pack and a registry's download location, the
// archive-name parser, the engine's import check of signed names, the
// export manifest reader's (nothing accepted the trusted key did not sign), and the
// access-log encoder's comparisons with log/slog.
var fuzzers = []struct{ dir, name string }{
	{".", "FuzzParseRequestPath"},
	{".", "FuzzTranslateVersions"},
	{".", "FuzzArchiveSignature"},
	{".", "FuzzForwardedFor"},
	{".", "FuzzValidHost"},
	{"../discovery", "FuzzParseVersions"},
	{"../discovery", "FuzzParsePackage"},
	{"../discovery/modsource", "FuzzUnpack"},
	{"../discovery/modsource", "FuzzGitPack"},
	{"../discovery/modsource", "FuzzParseLocation"},
	{"../addrs", "FuzzParseArchiveName"},
	{"../mirror/imports", "FuzzSignedImport"},
	{"../airgap", "FuzzReadManifest"},
	{"../internal/jsonlog", "FuzzSameAsSlog"},
	{"../internal/jsonlog", "FuzzAppendTime"},
}

// TestFuzzersBriefly runs each fuzzer for a short while (10 s, or
// TFMIRROR_FUZZTIME) on top of its committed seed corpus, so that the one
// test command also fuzzes in CI. Fuzzing needs its own `go test -fuzz`
// process per fuzzer, which this test starts. It runs when CI or
// TFMIRROR_FUZZTIME is set; elsewhere the seed corpora still run as
// ordinary tests. A failing input is written to testdata/fuzz/FUZZER/,
// where it then runs with every go test.
func TestFuzzersBriefly(t *testing.T) {
	fuzztime := os.Getenv("TFMIRROR_FUZZTIME")
	if fuzztime == "" {
		if os.Getenv("CI") == "" {
			t.Skip("set CI or TFMIRROR_FUZZTIME (e.g. 10s) to fuzz; the seed corpora run as ordinary tests")
		}
		fuzztime = "10s"
	}
	if testing.Short() {
		t.Skip("fuzzing skipped in -short mode")
	}
	budget, err := time.ParseDuration(fuzztime)
	if err != nil {
		t.Fatalf("TFMIRROR_FUZZTIME=%q: %v", fuzztime, err)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to run the fuzzers with: %v", err)
	}
	for _, fz := range fuzzers {
		t.Run(fz.name, func(t *testing.T) {
			// Compiling with coverage instrumentation takes a while on a
			// busy machine; the fuzzing itself is bounded by -fuzztime.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			// Minimizing each new input for up to a minute (go test's
			// default) would take most of a short run where an input
			// costs milliseconds (FuzzUnpack writes a tree): a second
			// each, and the run explores.
			cmd := exec.CommandContext(ctx, gobin, "test", "-run", "^$",
				"-fuzz", "^"+fz.name+"$", "-fuzztime", fuzztime, "-fuzzminimizetime", "1s", "-parallel", "2", ".")
			cmd.Dir = fz.dir
			corpus := filepath.Join(fz.dir, "testdata", "fuzz", fz.name)
			before := corpusFiles(t, corpus)
			out, err := cmd.CombinedOutput()
			if err == nil && strings.Contains(string(out), "no fuzz tests to fuzz") {
				// go test passes a name no fuzz test of the package has.
				t.Fatalf("go test -fuzz %s in %s fuzzed nothing:\n%s", fz.name, fz.dir, out)
			}
			if err != nil {
				if len(corpusFiles(t, corpus)) == len(before) && deadlineRace(out, fz.name, budget) {
					t.Logf("%s: the fuzzer ran its %s and wrote no failing input; its exit at the deadline is the Go 1.26 fuzz coordinator's race (go.dev/issue/75804, fixed in Go 1.27):\n%s", fz.name, fuzztime, lastLines(out, 6))
					return
				}
				t.Fatalf("go test -fuzz %s in %s: %v\n%s", fz.name, fz.dir, err, out)
			}
			t.Logf("%s", lastLines(out, 3))
		})
	}
}

// deadlineRace reports whether out, the output of a failed `go test -fuzz
// NAME -fuzztime budget`, is the fuzz coordinator's race at the end of the
// budget and nothing else: NAME's one failure is a bare "context deadline
// exceeded", reported after at least budget, with no failing input, panic
// or test message. Go 1.26 reports a worker stopped by the -fuzztime
// deadline so when the deadline's cancellation has not yet reached the
// fuzzing context (go.dev/issue/75804). A real finding always writes a
// failing input and prints it, so it never matches.
func deadlineRace(out []byte, name string, budget time.Duration) bool {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	fails := 0
	race := false
	for i, line := range lines {
		switch {
		case strings.Contains(line, "Failing input written"), strings.HasPrefix(strings.TrimSpace(line), "panic:"):
			return false
		case strings.HasPrefix(strings.TrimSpace(line), "--- FAIL:"):
			fails++
			rest, ok := strings.CutPrefix(line, "--- FAIL: "+name+" (")
			if !ok || i+1 >= len(lines) || lines[i+1] != "    context deadline exceeded" {
				return false
			}
			took, err := time.ParseDuration(strings.TrimSuffix(rest, ")"))
			race = err == nil && took >= budget
		}
	}
	return fails == 1 && race
}

// corpusFiles lists the inputs in a fuzzer's corpus directory, where the
// fuzzer writes any failing input it finds.
func corpusFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// lastLines returns the last n lines of out.
func lastLines(out []byte, n int) []byte {
	end := len(out)
	for end > 0 && out[end-1] == '\n' {
		end--
	}
	i := end
	for ; i > 0; i-- {
		if out[i-1] == '\n' {
			if n--; n == 0 {
				break
			}
		}
	}
	return out[i:end]
}

// TestDeadlineRace checks that only the fuzz coordinator's race at the end
// of the budget is told apart from a fuzzer's failure.
func TestDeadlineRace(t *testing.T) {
	const name = "FuzzArchiveSignature"
	race := `fuzz: elapsed: 9s, execs: 10718 (1558/sec), new interesting: 0 (total: 69)
fuzz: elapsed: 10s, execs: 12709 (1769/sec), new interesting: 0 (total: 69)
--- FAIL: FuzzArchiveSignature (10.13s)
    context deadline exceeded
FAIL
exit status 1
FAIL	github.com/tfmirror/tfmirror/proxy	10.153s
`
	finding := `fuzz: elapsed: 2s, execs: 1659 (553/sec), new interesting: 0 (total: 69)
--- FAIL: FuzzArchiveSignature (2.41s)
    --- FAIL: FuzzArchiveSignature (0.00s)
        fuzz_test.go:262: forged query "exp=1" verifies
    
    Failing input written to testdata/fuzz/FuzzArchiveSignature/582528ddfad69eb5
    To re-run:
    go test -run=FuzzArchiveSignature/582528ddfad69eb5
FAIL
exit status 1
`
	hang := `--- FAIL: FuzzArchiveSignature (10.20s)
    context deadline exceeded
    panic: runtime error: index out of range
FAIL
`
	for _, tc := range []struct {
		what   string
		out    string
		budget time.Duration
		want   bool
	}{
		{"the coordinator's race at the deadline", race, 10 * time.Second, true},
		{"the same failure before the budget ran out", race, 30 * time.Second, false},
		{"a failing input", finding, 10 * time.Second, false},
		{"a panic", hang, 10 * time.Second, false},
		{"another fuzzer's failure", strings.ReplaceAll(race, name, "FuzzOther"), 10 * time.Second, false},
		{"a build failure", "./fuzz_test.go:12:2: undefined: x\nFAIL\tgithub.com/tfmirror/tfmirror/proxy [build failed]\n", 10 * time.Second, false},
	} {
		if got := deadlineRace([]byte(tc.out), name, tc.budget); got != tc.want {
			t.Errorf("%s: deadlineRace = %v, want %v", tc.what, got, tc.want)
		}
	}
}

// TestFuzzersExist checks that each fuzzer TestFuzzersBriefly runs is
// declared in the package of its directory: go test -fuzz given a name
// that no fuzz test of the package has warns "no fuzz tests to fuzz" and
// passes, so a fuzzer moved to another package would silently stop being
// fuzzed.
func TestFuzzersExist(t *testing.T) {
	for _, fz := range fuzzers {
		files, err := filepath.Glob(filepath.Join(fz.dir, "*_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, name := range files {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "\nfunc "+fz.name+"(f *testing.F) {") {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no fuzz test %s in %s", fz.name, fz.dir)
		}
	}
}
