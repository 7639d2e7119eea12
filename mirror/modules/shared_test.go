package modules_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// Three replicas on one shared tier, ten clients each asking at once for
// a module version none has: one fetch from the Git host; a sealed
// replica with an empty cache then lists and serves it from the tier.
func TestModulesShared(t *testing.T) {
	tier, first := sharedModuleReplica(t)
	o := first.Origin
	if _, _, err := first.Engine.Modules().ModuleVersions(context.Background(), harness.Module); err != nil {
		t.Fatal(err)
	}
	rs := []*harness.Harness{first}
	for range 2 {
		h := &harness.Harness{T: t, Origin: o}
		h.Start(harness.Options{Config: harness.Config{Shared: tier}})
		rs = append(rs, h)
	}
	var wg sync.WaitGroup
	bodies := make([][]byte, 30)
	errs := make([]error, 30)
	for i := range bodies {
		h := rs[i%len(rs)]
		wg.Go(func() { _, bodies[i], errs[i] = h.ReadModule("1.0.0") })
	}
	wg.Wait()
	for i := range bodies {
		if errs[i] != nil || !bytes.Equal(bodies[i], bodies[0]) {
			t.Fatalf("client %d: %v", i, errs[i])
		}
	}
	if n := o.Hits("git"); n != 2 {
		t.Errorf("three replicas made %d Git requests, want the 2 of one fetch", n)
	}
	if tier.Archives() != 1 || tier.Meta(records.ModuleRecordKey(harness.Module, versions.MustParseVersion("1.0.0"))) == nil {
		t.Errorf("the tier holds %d packages and records %v", tier.Archives(), tier.Metas())
	}

	for _, h := range rs {
		h.WaitIdle() // records go to the tier in the background
	}
	o.ResetHits()
	sealed := &harness.Harness{T: t, Origin: o}
	sealed.Start(harness.Options{Config: harness.Config{Shared: tier, Offline: true}})
	list, _, err := sealed.Engine.Modules().ModuleVersions(context.Background(), harness.Module)
	if err != nil || len(list.Versions) != 1 {
		t.Fatalf("sealed replica's versions: %+v, %v", list, err)
	}
	if _, b, err := sealed.ReadModule("1.0.0"); err != nil || !bytes.Equal(b, bodies[0]) {
		t.Fatalf("sealed replica's package: %v", err)
	}
	other := addrs.Module{Hostname: harness.OriginHost, Namespace: "acme", Name: "other", System: "aws"}
	if _, _, err := sealed.Engine.Modules().ModuleVersions(context.Background(), other); err == nil {
		t.Error("the sealed replica listed a module no replica has")
	}
	if n := o.TotalHits(); n != 0 {
		t.Errorf("the sealed replica made %d origin requests", n)
	}
}

// A copy in the shared tier that is not the module package it is stored
// as is never served: a replica reading it fetches the package from its
// source instead, serves that, and puts it in place of the bad copy.
func TestModulesSharedBadCopyReplaced(t *testing.T) {
	tier, first := sharedModuleReplica(t)
	o := first.Origin
	if _, _, err := first.ReadModule("1.0.0"); err != nil {
		t.Fatal(err)
	}
	first.WaitIdle()
	var rec records.ModuleRecord
	if err := json.Unmarshal(tier.Meta(records.ModuleRecordKey(harness.Module, versions.MustParseVersion("1.0.0"))), &rec); err != nil || rec.SHA256 == "" {
		t.Fatalf("the tier's record of the version: %+v, %v", rec, err)
	}
	stored := func() []byte {
		t.Helper()
		r, _, err := tier.OpenArchive(context.Background(), rec.SHA256)
		if err != nil || r == nil {
			t.Fatalf("the tier's package: %v", err)
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := stored()
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 1
	if err := tier.PutArchive(context.Background(), rec.SHA256, bytes.NewReader(bad), int64(len(bad))); err != nil {
		t.Fatal(err)
	}

	o.ResetHits()
	var log logbuf.Buffer
	second := &harness.Harness{T: t, Origin: o}
	second.Start(harness.Options{Config: harness.Config{Shared: tier, Logger: slog.New(slog.NewTextHandler(&log, nil))}})
	_, body, err := second.ReadModule("1.0.0")
	if err != nil {
		t.Fatalf("a replica finding a bad copy in the tier: %v", err)
	}
	_, want, _ := first.ReadModule("1.0.0")
	if !bytes.Equal(body, want) {
		t.Errorf("the replica served %d bytes, not the package", len(body))
	}
	if o.Hits("git") == 0 || !strings.Contains(log.String(), "the shared store's copy of a module package is not the package") {
		t.Errorf("the replica did not fetch the package from its source, saying why:\n%s", log.String())
	}
	second.WaitIdle()
	if got := stored(); !bytes.Equal(got, good) {
		t.Errorf("the bad copy was not replaced in the tier: %d bytes", len(got))
	}
}

// sharedModuleReplica is a replica on a new shared tier in memory, whose
// origin has one module version, harness.Module's 1.0.0, from a Git
// repository.
func sharedModuleReplica(t *testing.T) (*harness.MemTier, *harness.Harness) {
	t.Helper()
	needGit(t)
	tier := harness.NewMemTier()
	first := harness.New(t, harness.Options{Config: harness.Config{Shared: tier}})
	o := first.Origin
	if _, err := o.AddGitRepo("vpc", map[string][]byte{"main.tf": []byte("# shared\n")}, "v1.0.0"); err != nil {
		t.Fatal(err)
	}
	o.AddModule("acme", "vpc", "aws", "1.0.0", "git::"+o.GitURL("vpc")+"?ref=v1.0.0")
	return tier, first
}
