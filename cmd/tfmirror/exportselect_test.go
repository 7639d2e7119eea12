package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/airgap"
)

// TestExportOfWhatTheCacheLacksFails: `tfmirror export` naming a provider
// and a version the cache does not hold, as a pipeline runs it, exits 1
// naming each, and writes nothing under OUT; with no selection, an empty
// cache exports an empty bundle, exit 0, as before.
func TestExportOfWhatTheCacheLacksFails(t *testing.T) {
	t.Parallel()
	dataDir := emptyCacheIn(t, t.TempDir()) // a cache with nothing in it
	parent := t.TempDir()
	out := filepath.Join(parent, "bundle.tar.gz")
	var stdout, stderr bytes.Buffer
	code := runExport([]string{"--data-dir", dataDir, "--provider", "acme/nope", "--version", "9.9.9", out}, &stdout, &stderr)
	t.Logf("export: exit %d\n%s%s", code, stdout.String(), stderr.String())
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	for _, want := range []string{"--provider registry.terraform.io/acme/nope: the cache holds no package of it", "--version 9.9.9"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("a failed export left %v", entries)
	}

	stdout.Reset()
	stderr.Reset()
	if code := runExport([]string{"--data-dir", dataDir, out}, &stdout, &stderr); code != 0 {
		t.Errorf("export of everything from an empty cache: exit %d, want 0\n%s%s", code, stdout.String(), stderr.String())
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("export of everything from an empty cache: %v", err)
	}
}

// interruptedExport is an engine whose export is interrupted (Ctrl-C)
// while it runs.
type interruptedExport struct {
	engineOps
	cancel context.CancelFunc
}

func (o interruptedExport) Export(ctx context.Context, _ admin.ExportRequest) (admin.Exported, error) {
	o.cancel()
	return admin.Exported{}, ctx.Err()
}

// TestExportInterruptedSaysSo: an interrupted export says it was
// interrupted and what it left at OUT (a tar file: nothing; a
// directory: an incomplete one, to finish by running it again), as an
// interrupted import does, not a bare "context canceled".
func TestExportInterruptedSaysSo(t *testing.T) {
	for _, tc := range []struct {
		req  admin.ExportRequest
		want string
	}{
		{admin.ExportRequest{Out: "/media/usb/b.tar.gz"}, "export interrupted: nothing was written to /media/usb/b.tar.gz"},
		{admin.ExportRequest{Out: "/media/usb/b"}, "export interrupted: the directory /media/usb/b is incomplete, without a new signed manifest; run the same tfmirror export again"},
		{admin.ExportRequest{Out: "/media/usb/l", Format: admin.FormatOCILayout}, "the directory /media/usb/l is incomplete, without push.sh (removed until an export finishes)"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		_, err := exportOp(tc.req)(ctx, interruptedExport{cancel: cancel})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("export to %s interrupted: %v, want %q", tc.req.Out, err, tc.want)
		}
	}
}

// TestAirGapCommandFailedPrintsNoSummary: an export, import or cache
// verify that fails before it did anything says what failed on stderr
// and exits 1, and prints no summary of nothing ("exported 0 packages
// ..., 0 failed" reads as a success): an export whose selection names
// what the cache lacks (a bundle and an OCI layout), an import of a
// directory without packages, and each of the three through a serve
// whose answer is an error.
func TestAirGapCommandFailedPrintsNoSummary(t *testing.T) {
	t.Parallel()
	summaries := []string{"exported ", "OCI layouts:", "imported ", "checked "}
	check := func(t *testing.T, what string, code int, stdout, stderr, want string) {
		t.Helper()
		t.Logf("%s: exit %d\nstdout:\n%sstderr:\n%s", what, code, stdout, stderr)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1", what, code)
		}
		for _, s := range summaries {
			if strings.Contains(stdout, s) {
				t.Errorf("%s: stdout %q, want no summary", what, stdout)
			}
		}
		if !strings.Contains(stderr, want) {
			t.Errorf("%s: stderr lacks %q", what, want)
		}
	}

	t.Run("on the data directory", func(t *testing.T) {
		t.Parallel()
		dataDir := emptyCacheIn(t, t.TempDir())
		parent := t.TempDir()
		code, stdout, stderr := runCommand("export", "--data-dir", dataDir, "--provider", "acme/nope", filepath.Join(parent, "bundle.tar.gz"))
		check(t, "export of a provider not cached", code, stdout, stderr, "--provider registry.terraform.io/acme/nope: the cache holds no package of it")
		code, stdout, stderr = runCommand("export", "--data-dir", dataDir, "--format", "oci-layout", "--provider", "acme/nope", filepath.Join(parent, "layout"))
		check(t, "OCI layout export of a provider not cached", code, stdout, stderr, "--provider registry.terraform.io/acme/nope")
		empty := t.TempDir()
		code, stdout, stderr = runCommand("import", "--data-dir", dataDir, empty)
		check(t, "import of a directory without packages", code, stdout, stderr, "holds no provider packages")
	})

	t.Run("through a serve", func(t *testing.T) {
		t.Parallel()
		dataDir := filepath.Join(t.TempDir(), "data")
		fakeServeSocket(t, dataDir, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch r.URL.Path {
			case "/v1/export", "/v1/import", "/v1/verify":
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, `{"error":"the cache failed"}`)
			default:
				io.WriteString(w, "{}")
			}
		})
		in := t.TempDir()
		for _, args := range [][]string{
			{"export", "--data-dir", dataDir, filepath.Join(t.TempDir(), "bundle.tar.gz")},
			{"import", "--data-dir", dataDir, in},
			{"cache", "verify", "--data-dir", dataDir},
		} {
			code, stdout, stderr := runCommand(args...)
			check(t, args[0], code, stdout, stderr, "the cache failed")
		}
	})
}

// exportedLayout is an engine whose OCI layout export answers sum.
type exportedLayout struct {
	engineOps
	sum airgap.LayoutSummary
}

func (o exportedLayout) Export(context.Context, admin.ExportRequest) (admin.Exported, error) {
	return admin.Exported{Layout: &o.sum}, nil
}

// The summary of an OCI layout export counts the versions the package
// policy held back, as a bundle export's does: it said "0 tags" and
// nothing of why.
func TestExportOCILayoutSummaryCountsHeld(t *testing.T) {
	res, err := exportOp(admin.ExportRequest{Out: "/media/usb/l", Format: admin.FormatOCILayout})(context.Background(),
		exportedLayout{sum: airgap.LayoutSummary{Held: 2, Script: "/media/usb/l/push.sh"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.summary, "left out 2 versions the package policy holds back (listed on stderr)") {
		t.Errorf("summary:\n%s\nwant the held versions counted", res.summary)
	}
}

// An OCI layout export through a running serve names its repositories by
// that serve's prefixes: --oci-provider-prefix or --oci-module-prefix
// given to the command is refused (exit status 2, before the serve is
// asked to export), as --export-key is, rather than passed over, which
// wrote the layouts, and push.sh, under names other than those asked for;
// so is --allowed-origins, the serve exporting the origins it serves.
func TestExportThroughServeRefusesOCIPrefixes(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	exported := make(chan string, 4)
	fakeServeSocket(t, dataDir, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/export" {
			exported <- r.URL.Path
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}")
	})
	for _, flag := range []string{"--oci-provider-prefix", "--oci-module-prefix", "--allowed-origins"} {
		out := filepath.Join(t.TempDir(), "layout")
		var stdout, stderr bytes.Buffer
		code := runExport([]string{"--data-dir", dataDir, "--format", admin.FormatOCILayout, flag, "mirror", out}, &stdout, &stderr)
		t.Logf("export %s: exit %d\n%s%s", flag, code, stdout.String(), stderr.String())
		if code != 2 || !strings.Contains(stderr.String(), flag+" given, but the tfmirror serving this data directory does the export") {
			t.Errorf("export %s mirror through a serve: exit %d, want 2 saying the serve's prefixes name the repositories", flag, code)
		}
		select {
		case <-exported:
			t.Errorf("export %s mirror through a serve: the serve was asked to export, with its own prefixes", flag)
		default:
		}
	}
}

// An OCI layout export run on its own takes --allowed-origins, as serve
// does: the front door's repositories are those of the allowed origins,
// and a cache filled from an in-house registry was exported without any
// of its versions unless a --config file named it (no flag said so).
func TestExportOCILayoutTakesAllowedOrigins(t *testing.T) {
	t.Parallel()
	origin := syncOrigin(t)
	host := origin.Addr // an in-house registry: no default allowed origin
	dataDir := filepath.Join(t.TempDir(), "data")
	if _, _, code := syncInProcess(t, origin, dataDir, "--allowed-origins", host, syncManifest(t, host, "")); code != 0 {
		t.Fatalf("sync: exit %d", code)
	}
	repo := filepath.Join("providers", strings.Replace(host, ":", "__", 1), "hashicorp", "random")
	export := func(args ...string) (string, int) {
		out := filepath.Join(t.TempDir(), "layout")
		var stdout, stderr bytes.Buffer
		code := runExport(append(append([]string{"--data-dir", dataDir, "--format", admin.FormatOCILayout}, args...), out), &stdout, &stderr)
		t.Logf("export %q: exit %d\n%s%s", args, code, stdout.String(), stderr.String())
		return out, code
	}
	out, code := export("--allowed-origins", host)
	if code != 0 {
		t.Fatalf("export --allowed-origins %s: exit %d, want 0", host, code)
	}
	if b, err := os.ReadFile(filepath.Join(out, repo, "index.json")); err != nil || !strings.Contains(string(b), `"3.6.0"`) {
		t.Errorf("export --allowed-origins %s: %s/index.json: %s %v, want the version synced tagged", host, repo, b, err)
	}
	if _, code := export("--allowed-origins", "bad host!"); code != 2 {
		t.Errorf("export --allowed-origins 'bad host!': exit %d, want 2", code)
	}
}
