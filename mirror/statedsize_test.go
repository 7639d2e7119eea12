package mirror

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// longerBody is an origin whose archives send more bytes than the size
// it states: the stated size's worth of damaged bytes, then more.
type longerBody struct {
	Origin
	extra int
}

func (o longerBody) OpenArchive(ctx context.Context, p addrs.Provider, rawURL string) (io.ReadCloser, int64, error) {
	body, size, err := o.Origin.OpenArchive(ctx, p, rawURL)
	if err != nil || size < 0 {
		return body, size, err
	}
	data, err := io.ReadAll(body)
	body.Close()
	if err != nil {
		return nil, 0, err
	}
	data[0] ^= 0xff
	data = append(data, bytes.Repeat([]byte{0}, o.extra)...)
	return io.NopCloser(bytes.NewReader(data)), size, nil
}

// A client is told an archive's size before it has it (the network
// mirror's Content-Length is Archive.Size), and takes that many bytes
// for the whole archive. An archive whose bytes run on past the size
// stated for it is not the archive signed: no reader gets as many bytes
// as the size stated before the download failed, and nothing is cached.
func TestArchiveLongerThanStatedNeverReadWhole(t *testing.T) {
	t.Parallel()
	const holdBack = 16 << 10
	h := newHarness(t, harnessOptions{
		cfg:        Config{HoldBack: holdBack},
		origin:     fakeorigin.Options{ArchiveSize: 256 << 10},
		wrapOrigin: func(o Origin) Origin { return longerBody{Origin: o, extra: 4 * holdBack} },
	})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	// The download may fail before the archive is handed out (then the
	// client gets the error and no byte), or while it is read.
	if a, err := h.engine.OpenArchive(context.Background(), h.provider(), mustVersion(t, "1.0.0"), mustPlatform(t, "linux_amd64")); err == nil {
		if a.Size < 0 {
			t.Fatal("the test needs an origin that states the archive's size")
		}
		got, err := io.ReadAll(a)
		if err == nil {
			t.Errorf("reading an archive longer than its stated size ended without an error")
		}
		if int64(len(got)) >= a.Size {
			t.Errorf("reader got %d bytes of an archive stated as %d bytes that failed; a client would take the first %d for the archive",
				len(got), a.Size, a.Size)
		}
		a.Close()
	}
	h.waitIdle()
	if _, err := h.store.StatBlob(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64")); err == nil {
		t.Error("the archive was cached")
	}
}
