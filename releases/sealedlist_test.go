package releases_test

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// listReads is a store that counts the reads of the stored version lists,
// and of each SHA256SUMS record by key.
type listReads struct {
	releases.Store
	mu   sync.Mutex
	n    int
	sums map[string]int
}

func (s *listReads) GetMeta(key string, v any) (time.Time, error) {
	s.mu.Lock()
	if strings.HasPrefix(key, "releases/list/") {
		s.n++
	}
	if strings.HasPrefix(key, "releases/sums/") {
		if s.sums == nil {
			s.sums = map[string]int{}
		}
		s.sums[key]++
	}
	s.mu.Unlock()
	return s.Store.GetMeta(key, v)
}

func (s *listReads) sumsReads(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sums[key]
}

func (s *listReads) reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// sealedOn is a sealed releases side on r's engine and cache, through
// store.
func sealedOn(t testing.TB, r *rig, store releases.Store) *releases.Releases {
	t.Helper()
	o := r.origin
	rel, err := releases.New(releases.Config{
		HashiCorpURL: o.HashiCorpURL, HashiCorpKeys: []string{o.HashiCorpKey},
		OpenTofuDownloadURL: o.OpenTofuDownloadURL, OpenTofuAPIURL: o.OpenTofuAPIURL, OpenTofuKeys: []string{o.OpenTofuKey},
		Offline: true, Logger: enginetest.Logger(t), Now: r.clock.Now,
	}, noOrigin{}, r.engine, store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rel.Close)
	return rel
}

// TestSealedListDecodedOnce: a sealed mirror reads a product's stored
// version list from the cache once, not at every request (HashiCorp's
// Terraform list is about half a MiB of JSON), and answers as it did:
// the versions it holds, with the builds it holds (not darwin_arm64,
// never fetched) and the list's time. A list stored since (an import
// adding a version) is the one served from then on, and the one a new
// start reads. A version listed that it does not hold costs no lookup of
// its SHA256SUMS.
func TestSealedListDecodedOnce(t *testing.T) {
	o := startOrigin(t)
	dir := t.TempDir()
	online := newRig(t, o, dir, false)
	ctx := context.Background()
	fetched, _, err := online.rel.Versions(ctx, releases.HashiCorp, "terraform")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := online.read(releases.HashiCorp, "terraform", "1.6.0", tfZip); err != nil {
		t.Fatal(err)
	}
	online.waitIdle()
	online.stop()
	// A release published after the list was stored, carried in by an
	// import: its SHA256SUMS as another mirror verified it.
	o.Add("hashicorp", "terraform", "1.7.0", "linux_amd64")
	other := newRig(t, o, "", false)
	newer, err := other.rel.Sums(ctx, releases.HashiCorp, "terraform", "1.7.0")
	if err != nil {
		t.Fatal(err)
	}

	sealed := newRig(t, o, dir, true)
	store := &listReads{Store: sealed.store}
	rel := sealedOn(t, sealed, store)
	want := &releases.List{At: fetched.At, Schema: fetched.Schema, Versions: []releases.Listed{{Version: "1.6.0", Builds: []releases.Build{
		{OS: "linux", Arch: "amd64", Filename: "terraform_1.6.0_linux_amd64.zip"},
	}}}}
	for i := range 3 {
		list, st, err := rel.Versions(ctx, releases.HashiCorp, "terraform")
		if err != nil || st.Stale || !st.At.Equal(fetched.At) {
			t.Fatalf("request %d: %+v, %v", i, st, err)
		}
		if !reflect.DeepEqual(list, want) {
			t.Errorf("request %d lists %+v, want %+v", i, list, want)
		}
	}
	if n := store.reads(); n != 1 {
		t.Errorf("three requests read the stored list %d times, want once", n)
	}
	// 1.5.7, listed and never fetched, is known not held from one scan
	// of the SHA256SUMS stored, not looked up at every request.
	if n := store.sumsReads("releases/sums/hashicorp/terraform/1.5.7"); n != 0 {
		t.Errorf("three requests looked up the SHA256SUMS of 1.5.7, not held, %d times", n)
	}

	in := releases.Imported{Publisher: releases.HashiCorp, Product: "terraform", Version: "1.7.0", Document: newer.Document, Signature: newer.Signature,
		Archives: []releases.ImportedArchive{archiveOf("terraform_1.7.0_linux_amd64.zip", o.Archive("terraform", "1.7.0", "linux_amd64"))}}
	if _, err := rel.AirGap().Import(ctx, in); err != nil {
		t.Fatal(err)
	}
	before := store.reads()
	list, _, err := rel.Versions(ctx, releases.HashiCorp, "terraform")
	if err != nil || len(list.Versions) != 2 || list.Versions[0].Version != "1.7.0" || list.Versions[1].Version != "1.6.0" {
		t.Fatalf("after the import of 1.7.0: %+v, %v", list, err)
	}
	if n := store.reads() - before; n != 0 {
		t.Errorf("the list stored by the import was read again %d times", n)
	}
	restarted := sealedOn(t, sealed, sealed.store)
	if again, _, err := restarted.Versions(ctx, releases.HashiCorp, "terraform"); err != nil || !reflect.DeepEqual(again, list) {
		t.Errorf("a new start on the cache lists %+v, %v; want what was served, %+v", again, err, list)
	}
}

// BenchmarkSealedVersions measures a warm version list request on a
// sealed mirror whose stored Terraform list is of the origin's size
// (about 400 versions of 14 platforms each, half a MiB of JSON) and which
// holds one of them.
func BenchmarkSealedVersions(b *testing.B) {
	o, err := fakeorigin.StartReleases()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(o.Close)
	platforms := []string{"darwin_amd64", "darwin_arm64", "freebsd_386", "freebsd_amd64", "freebsd_arm", "linux_386", "linux_amd64",
		"linux_arm", "linux_arm64", "openbsd_386", "openbsd_amd64", "solaris_amd64", "windows_386", "windows_amd64"}
	for i := range 400 {
		o.Add("hashicorp", "terraform", "1."+itoa(i/40)+"."+itoa(i%40), platforms...)
	}
	dir := b.TempDir()
	online := newRig(b, o, dir, false)
	ctx := context.Background()
	if _, _, err := online.rel.Versions(ctx, releases.HashiCorp, "terraform"); err != nil {
		b.Fatal(err)
	}
	if _, _, err := online.read(releases.HashiCorp, "terraform", "1.9.39", "terraform_1.9.39_linux_amd64.zip"); err != nil {
		b.Fatal(err)
	}
	online.waitIdle()
	online.stop()
	sealed := newRig(b, o, dir, true)
	if list, _, err := sealed.rel.Versions(ctx, releases.HashiCorp, "terraform"); err != nil || len(list.Versions) != 1 {
		b.Fatalf("sealed: %+v, %v", list, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := sealed.rel.Versions(ctx, releases.HashiCorp, "terraform"); err != nil {
			b.Fatal(err)
		}
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
