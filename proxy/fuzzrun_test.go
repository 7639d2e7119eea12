package proxy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// fuzzers are the fuzz tests that CI runs beyond their seed corpora: this
// package's, those of the origin client's response parsers, and the
// access-log encoder's comparisons with log/slog.
var fuzzers = []struct{ dir, name string }{
	{".", "FuzzParseRequestPath"},
	{".", "FuzzTranslateVersions"},
	{".", "FuzzArchiveSignature"},
	{"../discovery", "FuzzParseVersions"},
	{"../discovery", "FuzzParsePackage"},
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
	if _, err := time.ParseDuration(fuzztime); err != nil {
		t.Fatalf("TFMIRROR_FUZZTIME=%q: %v", fuzztime, err)
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go command to run the fuzzers with: %v", err)
		}
	}
	for _, fz := range fuzzers {
		t.Run(fz.name, func(t *testing.T) {
			// Compiling with coverage instrumentation takes a while on a
			// busy machine; the fuzzing itself is bounded by -fuzztime.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, gobin, "test", "-run", "^$",
				"-fuzz", "^"+fz.name+"$", "-fuzztime", fuzztime, "-parallel", "2", ".")
			cmd.Dir = fz.dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("go test -fuzz %s in %s: %v\n%s", fz.name, fz.dir, err, out)
			}
			t.Logf("%s", lastLines(out, 3))
		})
	}
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
