package mirror

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"testing"

	"github.com/tfmirror/tfmirror/v2/mirror/fetch"
)

// ImportBlob commits a file read from a bundle on a sealed engine once
// its sha256 and its check pass, and keeps nothing of one that fails
// either; a file the cache holds is present without being read.
func TestImportBlob(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{cfg: Config{Offline: true}})
	data := []byte("a CLI release archive")
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	reads := 0
	blob := func(body []byte, check func(context.Context, io.ReaderAt, int64) error) Blob {
		return Blob{SHA256: sha, Filename: "tool_1.0.0_linux_amd64.zip", Label: "tool 1.0.0", Check: check,
			Open: func(context.Context) (io.ReadCloser, int64, error) {
				reads++
				return io.NopCloser(bytes.NewReader(body)), int64(len(body)), nil
			}}
	}
	ctx := context.Background()
	imp := h.engine.AirGap().BeginImport()
	defer imp.End()
	if _, _, err := h.engine.AirGap().ImportBlob(ctx, imp, blob([]byte("other bytes of a CLI archive"), nil)); err == nil {
		t.Fatal("bytes of another sha256 were imported")
	}
	refuse := errors.New("not a zip holding the program")
	if _, _, err := h.engine.AirGap().ImportBlob(ctx, imp, blob(data, func(context.Context, io.ReaderAt, int64) error { return refuse })); !errors.Is(err, refuse) {
		t.Fatalf("a file its check refuses: %v", err)
	}
	if h.engine.HasBlob(sha) {
		t.Fatal("a refused file was kept")
	}
	size, present, err := h.engine.AirGap().ImportBlob(ctx, imp, blob(data, nil))
	if err != nil || present || size != int64(len(data)) || !h.engine.HasBlob(sha) {
		t.Fatalf("import: %d %v %v", size, present, err)
	}
	reads = 0
	if _, present, err := h.engine.AirGap().ImportBlob(ctx, imp, blob(data, nil)); err != nil || !present || reads != 0 {
		t.Fatalf("import again: %v %v, %d reads", present, err, reads)
	}
	if _, _, err := h.engine.AirGap().ImportBlob(ctx, imp, Blob{SHA256: "nope"}); !errors.Is(err, fetch.ErrBlob) {
		t.Fatalf("a blob without sha256: %v", err)
	}
}
