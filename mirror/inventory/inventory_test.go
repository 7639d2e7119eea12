package inventory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/inventory"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// notifications records what a Notifier is told, in order.
type notifications struct {
	mu     sync.Mutex
	events []string
}

func (n *notifications) add(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.events = append(n.events, fmt.Sprintf(format, args...))
}

func (n *notifications) Used(key string) { n.add("used %s", key) }
func (n *notifications) Serving(kind, addr string, v versions.Version, sha string) {
	n.add("serving %s %s %s %s", kind, addr, v, sha)
}
func (n *notifications) ImportBegun()         { n.add("import begun") }
func (n *notifications) Importing(sha string) { n.add("importing %s", sha) }
func (n *notifications) ImportEnded()         { n.add("import ended") }

func (n *notifications) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.events
	n.events = nil
	return out
}

// The engine tells its Notifier what it serves (the version's record key,
// and the archive before it is fetched) and imports (each archive before
// it is committed, then that the import ended); an engine has one.
func TestNotifierToldOfServesAndImports(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{ScratchDir: t.TempDir()}})
	n := &notifications{}
	if err := h.Engine.Inventory().Notify(n); err != nil {
		t.Fatal(err)
	}
	if err := h.Engine.Inventory().Notify(&notifications{}); err == nil {
		t.Error("a second Notifier was taken")
	}
	h.Origin.AddProvider(harness.NS, harness.Type, []string{"1.0.0"}, []string{"linux_amd64"})
	h.ReadAll("1.0.0")
	p := h.Provider()
	sha := h.Origin.SHA256(harness.NS, harness.Type, "1.0.0", "linux_amd64")
	if got, want := n.take(), []string{
		"used package/" + p.String() + "/1.0.0",
		"serving provider " + p.String() + " 1.0.0 " + sha,
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("an archive read: told %q, want %q", got, want)
	}

	local := addrs.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	in, isha := harness.UnsignedImport(t, local, "2.0.0")
	if _, err := h.Engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	if got, want := n.take(), []string{"import begun", "importing " + isha, "import ended"}; !reflect.DeepEqual(got, want) {
		t.Errorf("an import: told %q, want %q", got, want)
	}

	h.Origin.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# m\n")}))
	h.Origin.AddModule("acme", "tarball", "aws", "0.1.0", h.Origin.TarballURL("m.tar.gz"))
	pkg, err := h.Engine.Modules().OpenModule(context.Background(), harness.TarballModule, enginetest.MustModuleVersion(t, "0.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	pkg.Close()
	if got, want := n.take(), []string{"used module/" + harness.TarballModule.String() + "/0.1.0",
		"serving module " + harness.TarballModule.String() + " 0.1.0 " + pkg.SHA256}; !reflect.DeepEqual(got, want) {
		// The first fetch names the sha256 once it is known.
		t.Errorf("a module fetched: told %q, want %q", got, want)
	}
	pkg, err = h.Engine.Modules().OpenModule(context.Background(), harness.TarballModule, enginetest.MustModuleVersion(t, "0.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	pkg.Close()
	if got, want := n.take(), []string{"used module/" + harness.TarballModule.String() + "/0.1.0",
		"serving module " + harness.TarballModule.String() + " 0.1.0 " + pkg.SHA256}; !reflect.DeepEqual(got, want) {
		t.Errorf("a cached module: told %q, want %q", got, want)
	}
}

// ScanVersions lists every version with a record, with its archives and
// whether it can be fetched again; RemoveVersion takes one out of its
// version list and its record away.
func TestScanAndRemoveVersions(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	h.Origin.AddProvider(harness.NS, harness.Type, []string{"1.0.0"}, []string{"linux_amd64"})
	h.ReadAll("1.0.0")
	local := addrs.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	var shas []string
	for _, v := range []string{"1.0.0", "2.0.0"} {
		in, sha := harness.UnsignedImport(t, local, v)
		if _, err := h.Engine.AirGap().Import(t.Context(), in); err != nil {
			t.Fatal(err)
		}
		shas = append(shas, sha)
	}
	scan := func() []string {
		t.Helper()
		var got []string
		if err := h.Engine.Inventory().ScanVersions(func(v inventory.Record) {
			got = append(got, fmt.Sprintf("%s %s %s %v %v", v.Kind, v.Address, v.Raw, v.Archives, v.Refetch))
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		return got
	}
	want := []string{
		fmt.Sprintf("provider %s 1.0.0 [%s] true", h.Provider(), h.Origin.SHA256(harness.NS, harness.Type, "1.0.0", "linux_amd64")),
		fmt.Sprintf("provider %s 1.0.0 [%s] false", local, shas[0]),
		fmt.Sprintf("provider %s 2.0.0 [%s] false", local, shas[1]),
	}
	slices.Sort(want)
	if got := scan(); !reflect.DeepEqual(got, want) {
		t.Errorf("scanned\n%q\nwant\n%q", got, want)
	}
	if err := h.Engine.Inventory().RemoveVersion("provider", local.String(), "1.0.0"); err != nil {
		t.Fatal(err)
	}
	list, _, err := h.Engine.Versions(t.Context(), local)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Versions) != 1 || list.Versions[0].Version != "2.0.0" {
		t.Errorf("after RemoveVersion, versions %+v, want 2.0.0", list.Versions)
	}
	gone := fmt.Sprintf("provider %s 1.0.0 [%s] false", local, shas[0])
	if got, want := scan(), slices.DeleteFunc(want, func(s string) bool { return s == gone }); !reflect.DeepEqual(got, want) {
		t.Errorf("after RemoveVersion, scanned\n%q\nwant\n%q", got, want)
	}
}

// Whether an archive can be fetched again is decided per archive: in a
// record of the origin's, one without a download URL (a package an
// import added) cannot; in an imported record, none can, those the
// origin added since included.
func TestVersionOfRecordDecidesPerArchive(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	const fetched, imported = "1111111111111111111111111111111111111111111111111111111111111111",
		"2222222222222222222222222222222222222222222222222222222222222222"
	key := "package/" + h.Provider().String() + "/1.0.0"
	for _, tc := range []struct {
		provenance  string
		refetch     bool
		unfetchable []string
	}{
		{provenance: "", refetch: true, unfetchable: []string{imported}},
		{provenance: "imported", refetch: false},
	} {
		raw := fmt.Sprintf(`{"schema":%d,"version":"1.0.0","sums":{},"provenance":%q,"archives":{
			"linux_amd64":{"filename":"a.zip","url":"https://releases.example/a.zip","sha256":%q},
			"darwin_arm64":{"filename":"b.zip","url":"","sha256":%q}}}`, records.Schema, tc.provenance, fetched, imported)
		r, ok := h.Engine.Inventory().VersionOfRecord(key, json.RawMessage(raw))
		if !ok {
			t.Fatalf("%q: not a record of a version", tc.provenance)
		}
		if r.Refetch != tc.refetch || !slices.Equal(r.Unfetchable, tc.unfetchable) {
			t.Errorf("%q: Refetch %v, Unfetchable %v; want %v, %v", tc.provenance, r.Refetch, r.Unfetchable, tc.refetch, tc.unfetchable)
		}
		if r.Refetchable(imported) {
			t.Errorf("%q: the archive without a download URL can be fetched again", tc.provenance)
		}
		if r.Refetchable(fetched) != tc.refetch {
			t.Errorf("%q: Refetchable of the origin's archive is %v, want %v", tc.provenance, r.Refetchable(fetched), tc.refetch)
		}
	}
}

// A provider of an IDN host (with a port, too) is keyed in the normal
// form, punycode: its versions are scanned and removed as any other's.
func TestScanAndRemoveVersionsOfIDNHost(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	for _, host := range []string{"xn--bcher-kva.example", "xn--bcher-kva.example:8443"} {
		p := addrs.Provider{Hostname: svchost.Hostname(host), Namespace: "platform", Type: "thing"}
		for _, v := range []string{"1.0.0", "2.0.0"} {
			in, _ := harness.UnsignedImport(t, p, v)
			if _, err := h.Engine.AirGap().Import(t.Context(), in); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		if err := h.Engine.Inventory().ScanVersions(func(r inventory.Record) {
			if r.Address == p.String() {
				got = append(got, r.Raw)
			}
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, []string{"1.0.0", "2.0.0"}) {
			t.Errorf("%s: scanned versions %q, want 1.0.0 and 2.0.0", p, got)
		}
		if err := h.Engine.Inventory().RemoveVersion("provider", p.String(), "1.0.0"); err != nil {
			t.Fatalf("%s: RemoveVersion: %v", p, err)
		}
		if err := h.Engine.Inventory().DropSetAside(p.String(), "2.0.0"); err != nil {
			t.Fatalf("%s: DropSetAside: %v", p, err)
		}
		list, _, err := h.Engine.Versions(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Versions) != 1 || list.Versions[0].Version != "2.0.0" {
			t.Errorf("%s: after RemoveVersion, versions %+v, want 2.0.0", p, list.Versions)
		}
	}
}

// A module version of a local-only host is never fetched again, as a
// provider version of one is not (mirror/modules.Modules.fetchable):
// a record fetched from its origin before the host became local-only
// (no longer an allowed origin, and an import loaded packages of it) is
// as unfetchable as an imported one, and retention keeps it.
func TestModuleOfLocalOnlyHostCannotBeFetchedAgain(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	local := addrs.Provider{Hostname: "tf.corp.test", Namespace: "platform", Type: "thing"}
	in, _ := harness.UnsignedImport(t, local, "1.0.0")
	if _, err := h.Engine.AirGap().Import(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	const sha = "1111111111111111111111111111111111111111111111111111111111111111"
	for _, tc := range []struct {
		host    string
		refetch bool
	}{
		{host: "tf.corp.test", refetch: false},
		{host: enginetest.OriginHost, refetch: true},
	} {
		m := tc.host + "/platform/network/aws"
		raw := fmt.Sprintf(`{"schema":%d,"module":%q,"version":"1.0.0","location":"https://%s/network.tar.gz","kind":"archive",
			"package":"https://%s/network.tar.gz","sha256":%q,"size":10}`, records.Schema, m, tc.host, tc.host, sha)
		r, ok := h.Engine.Inventory().VersionOfRecord("module/"+m+"/1.0.0", json.RawMessage(raw))
		if !ok {
			t.Fatalf("%s: not a record of a version", m)
		}
		if r.Refetch != tc.refetch || r.Refetchable(sha) != tc.refetch {
			t.Errorf("%s: Refetch %v, Refetchable %v; want %v", m, r.Refetch, r.Refetchable(sha), tc.refetch)
		}
	}
}
