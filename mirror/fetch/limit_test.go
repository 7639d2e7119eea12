package fetch

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// An archive over the size bound, stated so or found so as it arrives,
// is refused with the setting that sets the bound, so that the operator
// reading the log (or the client its answer) knows what to raise.
func TestArchiveLimitNamesItsSetting(t *testing.T) {
	for name, stated := range map[string]int64{"stated": 2 << 20, "unstated": -1} {
		t.Run(name, func(t *testing.T) {
			fr, _, _ := newFetcher(t) // MaxArchiveBytes 1 MiB
			data := bytes.Repeat([]byte("x"), 2<<20)
			src := &Source{Open: func(context.Context) (io.ReadCloser, int64, error) {
				return io.NopCloser(bytes.NewReader(data)), stated, nil
			}}
			a := records.ArchiveRecord{Filename: "big.zip", SHA256: strings.Repeat("c", 64)}
			f, _, err := fr.joinFrom(addrs.Provider{Hostname: "example.com", Namespace: "ns", Type: "t"}, a, src)
			if err != nil {
				t.Fatal(err)
			}
			defer f.release()
			<-f.done
			err = f.State().Err
			if err == nil || !strings.Contains(err.Error(), "--max-archive-bytes") {
				t.Fatalf("fetch of an archive over the bound: %v, want an error naming --max-archive-bytes", err)
			}
		})
	}
}
