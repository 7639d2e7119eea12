package modules_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/heldpoint"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// A module's version list offers only versions its doors serve: one the
// origin lists that is not a version (addrs.ParseModuleVersion) is left
// out, as the providers' lists leave theirs out. Terraform and OpenTofu
// would take "1.2.0.0" (hashicorp/go-version reads four parts) as the
// newest and ask the door for it, which refuses it: left out, the client
// installs the newest version the mirror serves. Versions in any
// spelling the doors accept stay as the origin spells them.
func TestModuleListOffersWhatTheDoorsServe(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	h.Origin.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# m\n")}))
	listed := []string{"1.0.0", "v1.1.0", "1.2.0.0", "latest", "1.3.0-", "1.1.0-rc~1", strings.Repeat("9", 300) + ".0.0", "01.4.0"}
	for _, v := range listed {
		h.Origin.AddModule(harness.Module.Namespace, harness.Module.Name, harness.Module.System, v, h.Origin.TarballURL("m.tar.gz"))
	}
	list, _, err := h.Engine.Modules().ModuleVersions(context.Background(), harness.Module)
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Clone(list.Versions)
	slices.Sort(got)
	if want := []string{"01.4.0", "1.0.0", "v1.1.0"}; !slices.Equal(got, want) {
		t.Errorf("listed %q, want %q", got, want)
	}
}

// heldLookupMetrics holds (heldpoint) the first miss of a module
// version list's cache lookup after Arm, having said so on Reached,
// until GoOn: a caller held between reading the list the cache holds
// and asking the origin for a new one.
type heldLookupMetrics struct {
	enginetest.NoMetrics

	heldpoint.Point
}

func (m *heldLookupMetrics) CacheLookup(kind string, hit bool) {
	if kind != "module_versions" || hit {
		return
	}
	m.Pass()
}

// A caller that found a module's version list expired, and asks the
// origin for it once another caller's listing has ended, is answered
// with the list that listing stored: the origin is not asked again (the
// listing looks at the stored list before it asks).
func TestModuleListFetchedJustBeforeIsNotFetchedAgain(t *testing.T) {
	t.Parallel()
	met := &heldLookupMetrics{}
	// StaleAfter is long: a held caller waits for its listing, so that
	// it is never answered the cached list instead.
	h := harness.New(t, harness.Options{Config: harness.Config{Metrics: met, VersionsTTL: time.Minute, StaleAfter: time.Minute}})
	h.Origin.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# m\n")}))
	for _, v := range []string{"1.0.0", "1.1.0"} {
		h.Origin.AddModule(harness.Module.Namespace, harness.Module.Name, harness.Module.System, v, h.Origin.TarballURL("m.tar.gz"))
	}
	old := time.Now().Add(-time.Hour)
	listed := &records.ModuleVersionList{Schema: records.Schema, Versions: []string{"1.0.0"}, ListedAt: old.UTC(), Dates: map[string]time.Time{}}
	if err := h.Store.PutMetaAt(records.ModuleVersionsKey(harness.Module), listed, old); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	mods := h.Engine.Modules()

	met.Arm()
	type answer struct {
		versions []string
		err      error
	}
	held := make(chan answer, 1)
	go func() {
		list, _, err := mods.ModuleVersions(ctx, harness.Module)
		if err != nil {
			held <- answer{nil, err}
			return
		}
		held <- answer{list.Versions, nil}
	}()
	<-met.Reached() // the held caller has read the expired list
	list, _, err := mods.ModuleVersions(ctx, harness.Module)
	if err != nil || !slices.Equal(list.Versions, []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("the caller that listed: %v, %v; want the origin's list", list, err)
	}
	met.GoOn()
	if a := <-held; a.err != nil || !slices.Equal(a.versions, []string{"1.0.0", "1.1.0"}) {
		t.Fatalf("the held caller: %v, %v; want the origin's list", a.versions, a.err)
	}
	if n := h.Origin.Hits(fakeorigin.ModuleVersions); n != 1 {
		t.Errorf("the origin was asked for the list %d times, want once", n)
	}
}
