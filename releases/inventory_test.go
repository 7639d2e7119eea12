package releases_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/inventory"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// notes records what the releases side tells its Notifier.
type notes struct {
	mu      sync.Mutex
	used    []string
	serving []string
}

func (n *notes) Used(key string) { n.mu.Lock(); n.used = append(n.used, key); n.mu.Unlock() }
func (n *notes) Serving(kind, address string, v versions.Version, sha string) {
	n.mu.Lock()
	n.serving = append(n.serving, kind+" "+address+" "+v.String()+" "+sha)
	n.mu.Unlock()
}
func (n *notes) ImportBegun()     {}
func (n *notes) Importing(string) {}
func (n *notes) ImportEnded()     {}

// TestInventory: the CLI versions with a verified SHA256SUMS are listed
// for retention with the archives it lists, whether they can be fetched
// again (not sealed, not imported), and a record that does not read is
// left out; serving an archive tells the Notifier (one only) the version
// was used; RemoveVersion takes a version's SHA256SUMS away, and refuses
// what is not a CLI product's.
func TestInventory(t *testing.T) {
	o := startOrigin(t)
	dir := t.TempDir()
	r := newRig(t, o, dir, false)
	inv := r.rel.Inventory()
	n := &notes{}
	if err := inv.Notify(n); err != nil {
		t.Fatal(err)
	}
	if err := inv.Notify(&notes{}); err == nil {
		t.Error("a second Notifier was taken")
	}
	ctx := context.Background()
	if _, _, err := r.read(releases.HashiCorp, "terraform", "1.6.0", tfZip); err != nil {
		t.Fatal(err)
	}
	if _, err := r.rel.Sums(ctx, releases.OpenTofu, "tofu", "1.8.0"); err != nil {
		t.Fatal(err)
	}
	r.waitIdle()
	tfAddr := releases.Address(releases.HashiCorp, "terraform")
	tfSHA := fakeorigin.ArchiveSHA256("terraform", "1.6.0", "linux_amd64")
	if want := []string{"releases/sums/hashicorp/terraform/1.6.0"}; !reflect.DeepEqual(n.used, want) {
		t.Errorf("used %v, want %v", n.used, want)
	}
	if want := []string{"cli " + tfAddr + " 1.6.0 " + tfSHA}; !reflect.DeepEqual(n.serving, want) {
		t.Errorf("serving %v, want %v", n.serving, want)
	}
	// A record that does not read, and one under a key that is not its own.
	r.store.PutMeta("releases/sums/hashicorp/terraform/9.9.9", map[string]any{"schema": 1, "document": "bm90IHN1bXM="})
	var s releases.Sums
	if _, err := r.store.GetMeta("releases/sums/opentofu/tofu/1.8.0", &s); err != nil {
		t.Fatal(err)
	}
	r.store.PutMeta("releases/sums/opentofu/tofu/1.9.0", &s)
	var unreadable []inventory.Record
	scan := func(inv *releases.Inventory) []inventory.Record {
		var out []inventory.Record
		unreadable = nil
		if err := inv.ScanVersions(func(rec inventory.Record) {
			if rec.Kind == inventory.KindUnreadable {
				unreadable = append(unreadable, rec)
				return
			}
			out = append(out, rec)
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := scan(inv)
	// Those two are listed as records retention cannot read: never taken
	// as ones that can be fetched again, every sha256 they hold kept.
	if len(unreadable) != 2 || unreadable[0].Key != "releases/sums/hashicorp/terraform/9.9.9" || unreadable[0].Refetch ||
		unreadable[1].Key != "releases/sums/opentofu/tofu/1.9.0" || unreadable[1].Refetch || len(unreadable[1].Archives) != 2 {
		t.Errorf("listed as unreadable: %+v, want terraform 9.9.9 and tofu 1.9.0 (its two archives)", unreadable)
	}
	if len(got) != 2 {
		t.Fatalf("listed %+v, want terraform 1.6.0 and tofu 1.8.0", got)
	}
	tf, tofu := got[0], got[1]
	wantTF := []string{fakeorigin.ArchiveSHA256("terraform", "1.6.0", "darwin_arm64"), tfSHA}
	if tf.Kind != releases.Kind || tf.Address != tfAddr || tf.Raw != "1.6.0" || tf.Key != "releases/sums/hashicorp/terraform/1.6.0" ||
		!tf.Refetch || !reflect.DeepEqual(tf.Archives, wantTF) {
		t.Errorf("terraform listed as %+v, archives want %v", tf, wantTF)
	}
	if tofu.Address != releases.Address(releases.OpenTofu, "tofu") || tofu.Raw != "1.8.0" || len(tofu.Archives) != 2 || !tofu.Refetch {
		t.Errorf("tofu listed as %+v", tofu)
	}
	// Imported: cannot be fetched again.
	s.Provenance = records.ProvenanceImported
	r.store.PutMeta("releases/sums/opentofu/tofu/1.8.0", &s)
	if got := scan(inv); got[1].Refetch {
		t.Errorf("an imported version can be fetched again: %+v", got[1])
	}
	for _, tc := range []struct{ kind, addr, version string }{
		{"provider", tfAddr, "1.6.0"},
		{releases.Kind, "registry.terraform.io/hashicorp/aws", "1.6.0"},
		{releases.Kind, releases.Address(releases.HashiCorp, "terraform-provider-aws"), "1.6.0"},
		{releases.Kind, tfAddr, "../1.6.0"},
	} {
		if err := inv.RemoveVersion(tc.kind, tc.addr, tc.version); err == nil {
			t.Errorf("RemoveVersion(%q, %q, %q) took it", tc.kind, tc.addr, tc.version)
		}
	}
	if err := inv.RemoveVersion(releases.Kind, tfAddr, "1.6.0"); err != nil {
		t.Fatal(err)
	}
	if got := scan(inv); len(got) != 1 || got[0].Raw != "1.8.0" {
		t.Errorf("after the removal: %+v", got)
	}
	r.stop()

	// Sealed, nothing can be fetched again.
	sealed := newRig(t, o, dir, true)
	for _, rec := range scan(sealed.rel.Inventory()) {
		if rec.Refetch {
			t.Errorf("sealed, %+v can be fetched again", rec)
		}
	}
	if _, err := sealed.rel.Sums(ctx, releases.HashiCorp, "terraform", "1.6.0"); !errors.Is(err, releases.ErrNotFound) || !errors.Is(err, records.ErrOffline) {
		t.Errorf("sealed, the removed version: %v, want ErrNotFound and ErrOffline", err)
	}
}

// TestParseAddress: the addresses Address gives read back; others do not.
func TestParseAddress(t *testing.T) {
	for _, tc := range []struct {
		product string
		pub     releases.Publisher
	}{{"terraform", releases.HashiCorp}, {"packer", releases.HashiCorp}, {"tofu", releases.OpenTofu}} {
		if got := releases.PublisherOf(tc.product); got != tc.pub {
			t.Errorf("PublisherOf(%q) = %q, want %q", tc.product, got, tc.pub)
		}
		pub, product, ok := releases.ParseAddress(releases.Address(tc.pub, tc.product))
		if !ok || pub != tc.pub || product != tc.product {
			t.Errorf("ParseAddress(Address(%q, %q)) = %q %q %v", tc.pub, tc.product, pub, product, ok)
		}
	}
	for _, bad := range []string{"", "get.opentofu.org/opentofu/terraform", "releases.hashicorp.com/hashicorp/terraform-provider-aws",
		"releases.hashicorp.com/hashicorp/Terraform", "releases.hashicorp.com/hashicorp/a/b", "registry.terraform.io/hashicorp/aws"} {
		if _, _, ok := releases.ParseAddress(bad); ok {
			t.Errorf("ParseAddress(%q) took it", bad)
		}
	}
}

// TestStoredVerdict: retention's view of the policy on a CLI version it
// holds is the door's (the release age dated by the stored signature, a
// deny_version), and asks the origin nothing.
func TestStoredVerdict(t *testing.T) {
	o := startOrigin(t)
	r := newRig(t, o, "", false)
	ctx := context.Background()
	now := r.clock.Now()
	o.SetSignedAt(now.Add(-24 * time.Hour))
	if _, err := r.rel.Sums(ctx, releases.HashiCorp, "terraform", "1.6.0"); err != nil {
		t.Fatal(err)
	}
	o.SetSignedAt(now.Add(-90 * 24 * time.Hour))
	if _, err := r.rel.Sums(ctx, releases.HashiCorp, "terraform", "1.5.7"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.rel.Sums(ctx, releases.OpenTofu, "tofu", "1.8.0"); err != nil {
		t.Fatal(err)
	}
	inv := r.rel.Inventory()
	tfAddr, tofuAddr := releases.Address(releases.HashiCorp, "terraform"), releases.Address(releases.OpenTofu, "tofu")
	if v := inv.StoredVerdict(r.engine.Policy(), tfAddr, "1.6.0"); !v.Allowed {
		t.Errorf("no policy: %+v", v)
	}
	r.engine.SetPolicy(enginetest.DecodePolicy(t, `
minimum_release_age = "72h"
deny_version "get.opentofu.org/opentofu/tofu" {
  versions = ["1.8.0"]
  reason   = "CVE-2026-0001: use 1.8.1"
}
`))
	before := o.TotalHits()
	for _, tc := range []struct {
		addr, version string
		allowed       bool
		rule          string
	}{
		{tfAddr, "1.6.0", false, policy.RuleMinReleaseAge},
		{tfAddr, "1.5.7", true, ""},
		{tofuAddr, "1.8.0", false, policy.RuleDenyVersion},
		{"registry.terraform.io/hashicorp/aws", "1.0.0", true, ""},
	} {
		v := inv.StoredVerdict(r.engine.Policy(), tc.addr, tc.version)
		if v.Allowed != tc.allowed || v.Rule != tc.rule {
			t.Errorf("%s %s: %+v, want allowed %v by %q", tc.addr, tc.version, v, tc.allowed, tc.rule)
		}
	}
	if n := o.TotalHits() - before; n != 0 {
		t.Errorf("the verdicts asked the origin %d times", n)
	}
}
