package originguard

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// countingOrigin counts the calls that reach it and answers each.
type countingOrigin struct{ calls int }

func (o *countingOrigin) Versions(context.Context, addrs.Provider) (discovery.VersionList, error) {
	o.calls++
	return discovery.VersionList{}, nil
}

func (o *countingOrigin) Package(context.Context, addrs.Provider, string, addrs.Platform) (*discovery.Package, error) {
	o.calls++
	return &discovery.Package{}, nil
}

func (o *countingOrigin) FetchSums(context.Context, addrs.Provider, *discovery.Package, int64, int64) ([]byte, []byte, error) {
	o.calls++
	return []byte("sums"), []byte("sig"), nil
}

func (o *countingOrigin) OpenArchive(context.Context, addrs.Provider, string) (io.ReadCloser, int64, error) {
	o.calls++
	return io.NopCloser(strings.NewReader("")), 0, nil
}

func (o *countingOrigin) ArchiveSize(context.Context, addrs.Provider, string) (int64, error) {
	o.calls++
	return 0, nil
}

// originCalls makes every call of the Origin interface for p.
func originCalls(o Origin, p addrs.Provider) map[string]error {
	ctx := context.Background()
	out := map[string]error{}
	_, out["Versions"] = o.Versions(ctx, p)
	_, out["Package"] = o.Package(ctx, p, "1.0.0", addrs.Platform{OS: "linux", Arch: "amd64"})
	_, _, out["FetchSums"] = o.FetchSums(ctx, p, &discovery.Package{}, 0, 0)
	body, _, err := o.OpenArchive(ctx, p, "https://example.com/a.zip")
	if body != nil {
		body.Close()
	}
	out["OpenArchive"] = err
	_, out["ArchiveSize"] = o.ArchiveSize(ctx, p, "https://example.com/a.zip")
	return out
}

// The guard lets every call for an allowed origin through, and none for a
// local-only host: each is not found, without the origin being asked.
// Offline, every call fails with records.ErrOffline.
func TestLocalGuard(t *testing.T) {
	origin, inHouse := svchost.Hostname("registry.example"), svchost.Hostname("in-house.example")
	store := memHostStore{}
	h, err := NewHosts([]svchost.Hostname{origin}, store)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Record(inHouse); err != nil {
		t.Fatal(err)
	}
	next := &countingOrigin{}
	g := Local(next, h)

	for name, err := range originCalls(g, addrs.Provider{Hostname: origin, Namespace: "hashicorp", Type: "random"}) {
		if err != nil {
			t.Errorf("%s of an allowed origin: %v", name, err)
		}
	}
	if next.calls != 5 {
		t.Fatalf("the origin was asked %d times for an allowed origin's five calls", next.calls)
	}
	for name, err := range originCalls(g, addrs.Provider{Hostname: inHouse, Namespace: "corp", Type: "thing"}) {
		if !errors.Is(err, discovery.ErrNotFound) {
			t.Errorf("%s of a local-only host: %v, want discovery.ErrNotFound", name, err)
		}
	}
	if next.calls != 5 {
		t.Fatalf("the origin was asked %d times in all; a local-only host must never be", next.calls)
	}
	for name, err := range originCalls(Offline(), addrs.Provider{Hostname: origin, Namespace: "hashicorp", Type: "random"}) {
		if !errors.Is(err, records.ErrOffline) {
			t.Errorf("%s offline: %v, want records.ErrOffline", name, err)
		}
	}
}
