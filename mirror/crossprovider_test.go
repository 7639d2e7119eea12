package mirror

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/fetch"
)

// Anyone can publish and sign a provider in a namespace of their own, and
// its signed SHA256SUMS may name any sha256, that of another provider's
// archive included, with a download URL of its own. A download of that
// stranger's package must not feed the clients of the other provider:
// a client of hashicorp/random that asks while the stranger's download of
// "the same" archive runs (here: tampered, from the stranger's URL) gets
// hashicorp/random's archive, from hashicorp/random's origin.
func TestStrangersDownloadOfTheSameSHA256FeedsNoOtherProvider(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{origin: fakeorigin.Options{ArchiveSize: 256 << 10}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	want := h.origin.Archive(ns, typ, "1.0.0", "linux_amd64")
	const strangerNS, strangerType = "stranger", "lookalike"
	h.origin.AddProvider(strangerNS, strangerType, []string{"1.0.0"}, platforms)
	// The stranger signs random's sha256 for its own file, and its
	// download URL sends other bytes.
	h.origin.SetArchiveBytes(strangerNS, strangerType, "1.0.0", "linux_amd64", want)
	h.origin.TamperArchive(strangerNS, strangerType, "1.0.0", "linux_amd64", true)
	stranger := addrs.Provider{Hostname: originHost, Namespace: strangerNS, Type: strangerType}
	v, pl := mustVersion(t, "1.0.0"), mustPlatform(t, "linux_amd64")
	// Both versions' metadata verified first: only the archives race.
	if _, err := h.engine.Package(context.Background(), stranger, v, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := h.packages("1.0.0"); err != nil {
		t.Fatal(err)
	}

	joined := make(chan struct{}, 2)
	h.engine.archives.SetHooks(fetch.Hooks{Join: func(string, *fetch.Download) { joined <- struct{}{} }})
	release := h.origin.GateArchives()
	defer release()
	strangerDone := make(chan struct{})
	go func() {
		defer close(strangerDone)
		a, err := h.engine.OpenArchive(context.Background(), stranger, v, pl)
		if err != nil {
			return
		}
		defer a.Close()
		io.Copy(io.Discard, a) //nolint:errcheck // the stranger's client is not under test
	}()
	<-joined
	h.origin.WaitArchiveStarted()
	got := make(chan archive, 1)
	go func() { got <- h.read(context.Background(), "1.0.0", "linux_amd64") }()
	<-joined
	release()
	r := <-got
	<-strangerDone
	if r.err != nil || !bytes.Equal(r.body, want) {
		t.Errorf("client of %s: err %v after %d of %d bytes; want its archive, whatever a stranger's download of the same sha256 did",
			h.provider(), r.err, len(r.body), len(want))
	}
	if n := h.origin.ArchiveHits(ns, typ, "1.0.0", "linux_amd64"); n == 0 {
		t.Errorf("%s's archive was never asked of its own download URL", h.provider())
	}
}
