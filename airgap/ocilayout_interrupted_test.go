package airgap

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// An OCI layout export into the directory of an earlier one that stops
// half-way (interrupted, or a write that fails) leaves no push.sh: the
// earlier export's, left in place, made the directory look finished, and
// pushed the earlier tags alone, without a word about what this export
// did not write. Run again, the export finishes and writes push.sh.
func TestExportOCILayoutInterruptedLeavesNoPushScript(t *testing.T) {
	engine, p := cachedNetAndTarball(t)
	side, names := ociLayoutParts(t, engine)
	out := filepath.Join(t.TempDir(), "layout")
	script := filepath.Join(out, PushScriptName)
	if sum, err := ExportOCILayout(context.Background(), engine, servedBy(t, engine, side), names, Selection{Providers: []addrs.Provider{p}}, out, func(s string) { t.Log(s) }); err != nil || sum.Tags != 1 {
		t.Fatalf("first export: %+v, %v", sum, err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ExportOCILayout(&cancelledAfterFirstLook{Context: ctx}, engine, servedBy(t, engine, side), names, Selection{}, out, func(s string) { t.Log(s) })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("export interrupted: %v, want context.Canceled", err)
	}
	if _, err := os.Stat(script); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("push.sh after an interrupted export: %v, want none", err)
	}

	sum, err := ExportOCILayout(context.Background(), engine, servedBy(t, engine, side), names, Selection{}, out, func(s string) { t.Log(s) })
	if err != nil || sum.Tags != 2 {
		t.Fatalf("export run again: %+v, %v", sum, err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Errorf("push.sh after the export run again: %v", err)
	}
}

// A layout in the directory whose index.json is not an index (empty or
// cut short: written by an earlier export to a medium pulled out, or
// unplugged, before the file reached it) failed every later export that
// did not tag that repository again, after writing its layouts, with no
// push.sh: the directory was refused until the operator found the file.
// It is reported, naming the layout, and left out of push.sh, and the
// other layouts' lines are written.
func TestExportOCILayoutAfterTornIndex(t *testing.T) {
	engine := newEngine(t, nil)
	side, names := ociLayoutParts(t, engine)
	out := filepath.Join(t.TempDir(), "layout")
	torn := filepath.Join(out, "providers", "example.com", "acme", "torn")
	write(t, filepath.Join(torn, ocispec.ImageLayoutFile), `{"imageLayoutVersion":"1.0.0"}`)
	write(t, filepath.Join(torn, ocispec.ImageIndexFile), `{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.in`)
	good := filepath.Join(out, "providers", "example.com", "acme", "good")
	write(t, filepath.Join(good, ocispec.ImageLayoutFile), `{"imageLayoutVersion":"1.0.0"}`)
	idx := ocispec.Index{Manifests: []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageIndex,
		Digest: digest.FromString("m"), Size: 1, Annotations: map[string]string{ocispec.AnnotationRefName: "1.0.0"}}}}
	idx.SchemaVersion = 2
	data, _ := json.Marshal(idx)
	write(t, filepath.Join(good, ocispec.ImageIndexFile), string(data))

	var reports []string
	sum, err := ExportOCILayout(context.Background(), engine, servedBy(t, engine, side), names, Selection{}, out, func(s string) { reports = append(reports, s) })
	if err != nil {
		t.Fatalf("export into a directory holding a torn index.json: %+v, %v", sum, err)
	}
	script, err := os.ReadFile(filepath.Join(out, PushScriptName))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "\npush 'providers/example.com/acme/good' '1.0.0'\n") || strings.Contains(string(script), "torn") {
		t.Errorf("push.sh:\n%s\nwant the line of the good layout alone", script)
	}
	if joined := strings.Join(reports, "\n"); !strings.Contains(joined, "providers/example.com/acme/torn") || !strings.Contains(joined, "index.json") {
		t.Errorf("reports %q, want the torn layout's index.json named", reports)
	}
}
