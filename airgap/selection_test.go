package airgap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// TestExportSelectionMatchingNothingFails: an export whose selection
// names a provider, a version or a platform that selects nothing the
// cache holds (with the rest of the selection) fails, naming each such
// selector and none that selected something, and leaves nothing under
// OUT's name nor beside it, in a directory, a tar file or an OCI layout;
// a pipeline naming what it exports sees the typo, or the sync that did
// not run, rather than an empty bundle and exit status 0. A selection
// whose every selector selects something exports as before, and so does
// an export of everything from an empty cache.
func TestExportSelectionMatchingNothingFails(t *testing.T) {
	engine, p := cachedNetAndTarball(t)
	ctx := context.Background()
	nope := addrs.Provider{Hostname: p.Hostname, Namespace: "acme", Type: "nope"}
	pol := servedBy(t, engine, nil)
	side, names := ociLayoutParts(t, engine)
	arts := servedBy(t, engine, side)
	for _, tc := range []struct {
		name      string
		sel       Selection
		want, not []string // selectors named, and not
	}{
		{"unknown provider", Selection{Providers: []addrs.Provider{nope}}, []string{"--provider " + nope.String()}, nil},
		{"one of two providers", Selection{Providers: []addrs.Provider{p, nope}}, []string{"--provider " + nope.String()}, []string{"--provider " + p.String()}},
		{"version not cached", Selection{Providers: []addrs.Provider{p}, Versions: []string{"9.9.9"}}, []string{"--version 9.9.9"}, []string{"--provider " + p.String()}},
		{"version alone", Selection{Versions: []string{"1.0.0", "9.9.9"}}, []string{"--version 9.9.9"}, []string{"--version 1.0.0"}},
		{"platform not cached", Selection{Providers: []addrs.Provider{p}, Platforms: []string{"linux_amd64", "windows_386"}}, []string{"--platforms windows_386"}, []string{"--platforms linux_amd64", "--provider"}},
	} {
		for _, kind := range []string{"dir", "tar.gz", "oci-layout"} {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				parent := t.TempDir()
				out := filepath.Join(parent, "out")
				if kind == "tar.gz" {
					out += ".tar.gz"
				}
				var reports []string
				report := func(s string) { reports = append(reports, s) }
				var err error
				if kind == "oci-layout" {
					_, err = ExportOCILayout(ctx, engine, arts, names, tc.sel, out, report)
				} else {
					_, err = Export(ctx, engine, pol, nil, tc.sel, out, newKey(t, "exporter"), report)
				}
				var unmatched *UnmatchedSelectionError
				if !errors.As(err, &unmatched) {
					t.Fatalf("export of %+v: error %v (reports %q), want an UnmatchedSelectionError", tc.sel, err, reports)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
				for _, n := range tc.not {
					if strings.Contains(err.Error(), n) {
						t.Errorf("error %q names %q, which selected something", err, n)
					}
				}
				if entries, _ := os.ReadDir(parent); len(entries) != 0 {
					t.Errorf("a failed export left %v beside OUT", entries)
				}
			})
		}
	}

	for _, sel := range []Selection{
		{Providers: []addrs.Provider{p}},
		{Providers: []addrs.Provider{p}, Versions: []string{"1.0.0"}, Platforms: []string{"linux_amd64"}},
		{Platforms: []string{"linux_amd64"}},
	} {
		out := filepath.Join(t.TempDir(), "out.tar")
		sum, err := Export(ctx, engine, pol, nil, sel, out, newKey(t, "exporter"), func(string) {})
		if err != nil || sum.Written != 1 {
			t.Errorf("export of %+v: %+v, %v; want 1 package written", sel, sum, err)
		}
	}

	empty := newEngine(t, enginetest.StartOrigin(t, fakeorigin.Options{}))
	out := filepath.Join(t.TempDir(), "out.tar")
	if sum, err := Export(ctx, empty, servedBy(t, empty, nil), nil, Selection{}, out, newKey(t, "exporter"), func(string) {}); err != nil || sum.Written != 0 {
		t.Errorf("export of everything from an empty cache: %+v, %v; want an empty bundle", sum, err)
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("export of everything from an empty cache: %v", err)
	}
}

// TestExportInterruptedLeavesNothing: an export to a tar file
// interrupted (Ctrl-C, the caller of the admin socket gone) ends with
// the interruption as its error, and leaves neither a file under OUT's
// name nor its temporary files beside it.
func TestExportInterruptedLeavesNothing(t *testing.T) {
	engine, _ := cachedNetAndTarball(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	parent := t.TempDir()
	out := filepath.Join(parent, "out.tar.gz")
	_, err := Export(&cancelledAfterFirstLook{Context: ctx}, engine, servedBy(t, engine, nil), nil, Selection{}, out, newKey(t, "exporter"), func(string) {})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("export interrupted: error %v, want context.Canceled", err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("an interrupted export left %v", entries)
	}
}

// TestExportCLISelectionMatchingNothingFails: a CLI release named by
// its address selects its cached versions; a version or platform of it
// the cache does not hold fails the export, naming it.
func TestExportCLISelectionMatchingNothingFails(t *testing.T) {
	_, a := cachedCLI(t)
	tf, err := addrs.ParseProvider(releases.Address(releases.HashiCorp, "terraform"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sel  Selection
		want string // "": exported
	}{
		{Selection{Providers: []addrs.Provider{tf}}, ""},
		{Selection{Providers: []addrs.Provider{tf}, Versions: []string{"1.6.0"}, Platforms: []string{cliPlatform}}, ""},
		{Selection{Providers: []addrs.Provider{tf}, Versions: []string{"1.5.7"}}, "--version 1.5.7"},
		{Selection{Providers: []addrs.Provider{tf}, Platforms: []string{"windows_386"}}, "--platforms windows_386"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		sum, err := Export(context.Background(), cliOf(a), servedBy(t, a.Engine, nil), cliOf(a), tc.sel, out, newKey(t, "exporter"), func(string) {})
		switch {
		case tc.want == "" && (err != nil || sum.CLIArchives != 1):
			t.Errorf("export of %+v: %+v, %v; want 1 CLI archive", tc.sel, sum, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "--provider")):
			t.Errorf("export of %+v: %v; want an error naming %s alone", tc.sel, err, tc.want)
		}
	}
}

// cancelledOnceSigned is a context whose Err is the interruption from
// the moment the export's signed manifest is in its temporary directory
// beside out: Ctrl-C pressed while an export writes its tar file.
type cancelledOnceSigned struct {
	context.Context
	parent string
}

func (c *cancelledOnceSigned) Err() error {
	if signed, _ := filepath.Glob(filepath.Join(c.parent, ".tfmirror-export-*", manifestName)); len(signed) > 0 {
		return context.Canceled
	}
	return c.Context.Err()
}

// TestExportInterruptedWhileWritingItsTar: an export interrupted once
// it writes its tar file stops there, rather than write the whole file
// first, and leaves nothing under OUT's name nor beside it.
func TestExportInterruptedWhileWritingItsTar(t *testing.T) {
	engine, _ := cachedNetAndTarball(t)
	parent := t.TempDir()
	out := filepath.Join(parent, "out.tar")
	_, err := Export(&cancelledOnceSigned{Context: context.Background(), parent: parent}, engine, servedBy(t, engine, nil), nil, Selection{}, out, newKey(t, "exporter"), func(string) {})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("export interrupted as it writes its tar: error %v, want context.Canceled", err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("an interrupted export left %v", entries)
	}
}
