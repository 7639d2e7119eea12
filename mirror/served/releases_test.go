package served_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/failure"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/releases"
)

const (
	tfZip   = "terraform_1.6.0_linux_amd64.zip"
	tofuZip = "tofu_1.8.0_linux_amd64.zip"
)

// refusalCounter counts the CLI releases' refusals per publisher,
// product and reason.
type refusalCounter struct {
	mu      sync.Mutex
	refused map[string]int
}

func (m *refusalCounter) CLIServed(pub, product, kind string, stale bool) {}

func (m *refusalCounter) VerificationFailed(string) {}

func (m *refusalCounter) PolicyRefused(string) {}

func (m *refusalCounter) CLIRefused(pub, product, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refused[pub+"/"+product+"/"+reason]++
}

func (m *refusalCounter) refusals(k string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused[k]
}

// releasesRig is the CLI releases side behind the policy, on a fake
// clock, before a stand-in origin with terraform 1.5.7 and 1.6.0 and
// tofu 1.8.0.
func releasesRig(t *testing.T) (*fakeorigin.Releases, *harness.ReleasesSide, *enginetest.FakeClock, *refusalCounter) {
	t.Helper()
	o, err := fakeorigin.StartReleases()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	o.Add("hashicorp", "terraform", "1.5.7", "linux_amd64", "darwin_arm64")
	o.Add("hashicorp", "terraform", "1.6.0", "linux_amd64", "darwin_arm64")
	o.Add("opentofu", "tofu", "1.8.0", "linux_amd64", "darwin_arm64")
	clock := enginetest.NewFakeClock()
	clock.Set(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	met := &refusalCounter{refused: map[string]int{}}
	side := harness.StartReleasesSide(t, o, releases.Config{Now: clock.Now, Metrics: met})
	return o, side, clock, met
}

// readArchive opens and reads a whole archive through rel.
func readArchive(rel *served.Releases, pub releases.Publisher, product, version, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	arc, err := rel.OpenArchive(ctx, pub, product, version, name)
	if err != nil {
		return err
	}
	defer arc.Close()
	_, err = io.Copy(io.Discard, arc)
	return err
}

// listedVersions lists product's versions through rel, newest first; a
// list that fails ends the test.
func listedVersions(t *testing.T, rel *served.Releases, pub releases.Publisher, product string) []string {
	t.Helper()
	list, _, err := rel.Versions(context.Background(), pub, product)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range list.Versions {
		got = append(got, l.Version)
	}
	return got
}

// TestReleasesPolicy: a version younger than minimum_release_age (dated
// by its signature) is held in the list and refused with its date;
// deny_version refuses with the operator's reason, and its archive is not
// fetched; a product the policy denies is refused whole; each refusal is
// counted per product.
func TestReleasesPolicy(t *testing.T) {
	o, side, clock, met := releasesRig(t)
	rel := side.Served
	ctx := context.Background()
	now := clock.Now()
	o.SetSignedAt(now.Add(-24 * time.Hour))
	if _, err := rel.Sums(ctx, releases.HashiCorp, "terraform", "1.6.0"); err != nil {
		t.Fatal(err)
	}
	// 1.5.7 is signed long ago.
	o.SetSignedAt(now.Add(-90 * 24 * time.Hour))
	if _, err := rel.Sums(ctx, releases.HashiCorp, "terraform", "1.5.7"); err != nil {
		t.Fatal(err)
	}
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `
minimum_release_age = "72h"
deny_version "get.opentofu.org/opentofu/tofu" {
  versions = ["1.8.0"]
  reason   = "CVE-2026-0001: use 1.8.1"
}
`))
	list, _, err := rel.Versions(ctx, releases.HashiCorp, "terraform")
	if err != nil || len(list.Versions) != 1 || list.Versions[0].Version != "1.5.7" {
		t.Fatalf("list under the age gate: %+v %v, want 1.5.7 alone", list, err)
	}
	err = readArchive(rel, releases.HashiCorp, "terraform", "1.6.0", tfZip)
	var pe *gate.PolicyError
	if !errors.As(err, &pe) || pe.Verdict.Rule != policy.RuleMinReleaseAge || !pe.Verdict.AvailableAt.Equal(now.Add(48*time.Hour)) {
		t.Fatalf("a fresh version: %v, want held until %s", err, now.Add(48*time.Hour))
	}
	if err := readArchive(rel, releases.HashiCorp, "terraform", "1.5.7", "terraform_1.5.7_linux_amd64.zip"); err != nil {
		t.Fatalf("an old version: %v", err)
	}
	err = readArchive(rel, releases.OpenTofu, "tofu", "1.8.0", tofuZip)
	if !errors.As(err, &pe) || pe.Verdict.Rule != policy.RuleDenyVersion || !strings.Contains(err.Error(), "CVE-2026-0001") {
		t.Fatalf("a denied version: %v", err)
	}
	if n := o.Hits("/tofu/download/v1.8.0/" + tofuZip); n != 0 {
		t.Errorf("a denied version's archive was fetched")
	}
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `deny = ["releases.hashicorp.com/hashicorp/*"]`))
	if _, _, err := rel.Versions(ctx, releases.HashiCorp, "terraform"); !errors.As(err, &pe) || pe.Version != "" {
		t.Fatalf("a denied product: %v", err)
	}
	if met.refusals("hashicorp/terraform/"+policy.RuleDeny) == 0 || met.refusals("opentofu/tofu/"+policy.RuleDenyVersion) == 0 {
		t.Error("refusals not counted per product")
	}
	// Beneath the layer, the releases side applies no policy.
	if _, err := side.Releases.Sums(ctx, releases.OpenTofu, "tofu", "1.8.0"); err != nil {
		t.Errorf("the releases side beneath the layer: %v", err)
	}
}

// releaseTarget is what the releases cases ask for.
type releaseTarget struct {
	pub                    releases.Publisher
	product, version, name string
}

// releaseCall is a method of served.Releases as a case calls it.
type releaseCall func(ctx context.Context, r *served.Releases, x releaseTarget) error

// releaseCases has one case per method of served.Releases that serves or
// lists CLI versions: each refuses the target version of a denied
// product, and a denied or an age-held version (a listing by leaving it
// out).
var releaseCases = map[string]releaseCall{
	"Versions": func(ctx context.Context, r *served.Releases, x releaseTarget) error {
		list, _, err := r.Versions(ctx, x.pub, x.product)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(list.Versions, func(l releases.Listed) bool { return l.Version == x.version }) {
			return nil
		}
		return errLeftOut
	},
	"Sums": func(ctx context.Context, r *served.Releases, x releaseTarget) error {
		_, err := r.Sums(ctx, x.pub, x.product, x.version)
		return err
	},
	"Document": func(ctx context.Context, r *served.Releases, x releaseTarget) error {
		_, err := r.Document(ctx, x.pub, x.product, x.version, releases.SumsName(x.pub, x.product, x.version))
		return err
	},
	"OpenArchive": func(ctx context.Context, r *served.Releases, x releaseTarget) error {
		return readArchive(r, x.pub, x.product, x.version, x.name)
	},
	"StoredVersion": func(ctx context.Context, r *served.Releases, x releaseTarget) error {
		return r.StoredVersion(x.pub, x.product, x.version)
	},
}

// releasesNoOrigin are the cases of releaseCases whose method never asks
// an origin, whatever the policy: what the exports and imports ask of a
// version the cache holds.
var releasesNoOrigin = map[string]bool{"StoredVersion": true}

// releasesNotServing are the methods of served.Releases that serve no
// CLI version, each with why.
var releasesNotServing = map[string]string{
	"Products":      "the products configured, for the door's listing, those refused whole left out (TestReleasesProductsLeaveOutDenied)",
	"SignerKeyID":   "the ID of the key that names a version's signature file, for the listings of the versions Versions let through; it asks no origin",
	"Held":          "the versions this layer held back, for the status page",
	"Cached":        "whether an archive, named by the sha256 of an answer this layer gave, is committed",
	"ServedBuilds":  "the archives of a SHA256SUMS this layer let through (Sums) that a listing names; it asks no origin",
	"StoredRelease": "what the cache knows of a version's release, for policy explain; it serves nothing and asks no origin",
}

// TestEveryReleasesMethodRefuses walks the method set of
// served.Releases: every method is either one that serves no CLI
// version (releasesNotServing, with why) or has a case in releaseCases,
// and every case refuses: a denied product (on a cold mirror, asking the
// origin nothing), a deny_version and a minimum release age on versions
// served before the policy changed. A method added later without a case
// fails here.
func TestEveryReleasesMethodRefuses(t *testing.T) {
	names := coveredMethods(t, reflect.TypeOf(&served.Releases{}), releaseCases, "releaseCases", releasesNotServing, "releasesNotServing")
	if t.Failed() {
		return
	}
	for _, sc := range []struct {
		name, policy string
		rule         string
		address      bool // the product is refused, on a cold mirror
	}{
		{"deny", `deny = ["releases.hashicorp.com/hashicorp/terraform", "get.opentofu.org/opentofu/tofu"]`, policy.RuleDeny, true},
		{"deny_version", `
deny_version "releases.hashicorp.com/hashicorp/terraform" {
  versions = "= 1.6.0"
  reason   = "CVE-2026-0004"
}
deny_version "get.opentofu.org/opentofu/tofu" {
  versions = "= 1.8.0"
  reason   = "CVE-2026-0004"
}`, policy.RuleDenyVersion, false},
		{"min_release_age", `minimum_release_age = "72h"`, policy.RuleMinReleaseAge, false},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			o, side, clock, _ := releasesRig(t)
			o.SetSignedAt(clock.Now().Add(-time.Hour))
			targets := []releaseTarget{
				{releases.HashiCorp, "terraform", "1.6.0", tfZip},
				{releases.OpenTofu, "tofu", "1.8.0", tofuZip},
			}
			ctx := context.Background()
			if !sc.address {
				// Everything a case asks is served with no policy first.
				for _, x := range targets {
					for _, name := range names {
						if c, ok := releaseCases[name]; ok {
							if err := c(ctx, side.Served, x); err != nil {
								t.Fatalf("%s %s with no policy: %v", x.product, name, err)
							}
						}
					}
				}
			}
			side.Engine.SetPolicy(enginetest.DecodePolicy(t, sc.policy))
			before := o.TotalHits()
			for _, x := range targets {
				for _, name := range names {
					c, ok := releaseCases[name]
					if !ok {
						continue
					}
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					hits := o.TotalHits()
					err := c(ctx, side.Served, x)
					cancel()
					if n := o.TotalHits() - hits; releasesNoOrigin[name] && n != 0 {
						t.Errorf("%s %s: %d origin requests, want none", x.product, name, n)
					}
					var perr *gate.PolicyError
					switch {
					case errors.Is(err, errLeftOut) && !sc.address:
					case !errors.As(err, &perr):
						t.Errorf("%s %s: %v, want refused by the package policy (%s)", x.product, name, err, sc.rule)
					case perr.Verdict.Rule != sc.rule:
						t.Errorf("%s %s: refused by %s, want %s", x.product, name, perr.Verdict.Rule, sc.rule)
					case sc.address && perr.Version != "":
						t.Errorf("%s %s: refused as version %q, want the product refused whole", x.product, name, perr.Version)
					}
				}
			}
			if sc.address {
				if n := o.TotalHits() - before; n != 0 {
					t.Errorf("%d origin requests for a denied product, want none", n)
				}
			}
		})
	}
}

// TestReleasesOriginFailuresInTheEnginesKinds: with the publisher's
// origin down, every method of served.Releases that reaches it (all but
// releasesNoOrigin) reports the failure in the engine's kinds
// (mirror/failure.OriginError): the origin's status, then its open
// circuit breaker.
func TestReleasesOriginFailuresInTheEnginesKinds(t *testing.T) {
	o, side, _, _ := releasesRig(t)
	o.SetDown(true)
	x := releaseTarget{releases.HashiCorp, "terraform", "1.6.0", tfZip}
	for name, c := range releaseCases {
		if releasesNoOrigin[name] {
			continue
		}
		err := c(context.Background(), side.Served, x)
		var fe *failure.OriginError
		switch {
		case !errors.As(err, &fe):
			t.Errorf("%s: %v, want a failure.OriginError", name, err)
		case fe.Kind == failure.OriginFailed && fe.StatusCode != 0:
		case fe.Kind == failure.CircuitOpen && fe.Wait: // the origin kept failing
		default:
			t.Errorf("%s: %+v, want the origin's status or its open circuit", name, fe)
		}
	}
}

// TestReleasesVersionRulesDecideBeforeOrigin: a CLI version that
// deny_version refuses is refused, on a cold mirror with a minimum
// release age in force and the origin down, before its SHA256SUMS is
// asked for: with the operator's reason and no origin request, as a
// product refused whole is.
func TestReleasesVersionRulesDecideBeforeOrigin(t *testing.T) {
	o, side, _, _ := releasesRig(t)
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `
minimum_release_age = "72h"
deny_version "releases.hashicorp.com/hashicorp/terraform" {
  versions = "= 1.6.0"
  reason   = "CVE-2026-0004"
}`))
	o.SetDown(true)
	x := releaseTarget{releases.HashiCorp, "terraform", "1.6.0", tfZip}
	for _, name := range slices.Sorted(maps.Keys(releaseCases)) {
		if name == "Versions" {
			continue // a listing asks the origin for the list
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		hits := o.TotalHits()
		err := releaseCases[name](ctx, side.Served, x)
		cancel()
		if n := o.TotalHits() - hits; n != 0 {
			t.Errorf("%s: %d origin requests for a version deny_version refuses, want none", name, n)
		}
		var perr *gate.PolicyError
		if !errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleDenyVersion || !strings.Contains(err.Error(), "CVE-2026-0004") {
			t.Errorf("%s: %v, want refused by deny_version with its reason", name, err)
		}
	}
}

// TestReleasesProductsLeaveOutDenied: the door's listing of the HashiCorp
// products leaves out a product the policy refuses whole, as the version
// lists leave out what it holds back.
func TestReleasesProductsLeaveOutDenied(t *testing.T) {
	_, side, _, _ := releasesRig(t)
	if !slices.Contains(side.Served.Products(), "terraform") {
		t.Fatalf("products %v with no policy, want terraform", side.Served.Products())
	}
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `deny = ["releases.hashicorp.com/hashicorp/terraform"]`))
	if got := side.Served.Products(); slices.Contains(got, "terraform") {
		t.Errorf("products %v under a deny of terraform, want it left out", got)
	}
}

// TestReleasesHeldNotFilledByMadeUpVersions: deny_version refuses a
// version before any origin is asked whether it exists, so a client can
// have the layer note a thousand versions it made up as held back. A
// version held back since is noted still, for the status page (Held):
// before, the first 1,024 noted were kept and every later one dropped
// until a restart.
func TestReleasesHeldNotFilledByMadeUpVersions(t *testing.T) {
	o, side, clock, _ := releasesRig(t)
	rel := side.Served
	ctx := context.Background()
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `
minimum_release_age = "48h"
deny_version "releases.hashicorp.com/hashicorp/terraform" {
  versions = "< 1.5.0"
  reason   = "too old"
}`))
	for i := range 1100 {
		if _, err := rel.Sums(ctx, releases.HashiCorp, "terraform", fmt.Sprintf("1.0.%d", i)); err == nil {
			t.Fatalf("a denied version was served")
		}
	}
	o.SetSignedAt(clock.Now().Add(-24 * time.Hour))
	err := readArchive(rel, releases.HashiCorp, "terraform", "1.6.0", tfZip)
	var pe *gate.PolicyError
	if !errors.As(err, &pe) || pe.Verdict.Rule != policy.RuleMinReleaseAge {
		t.Fatalf("a fresh version: %v, want held by its age", err)
	}
	held := rel.Held()
	if !slices.ContainsFunc(held, func(v unsigned.Version) bool { return v.Version == "1.6.0" }) {
		t.Errorf("1.6.0, held back after 1,100 made-up versions were refused, is not among the %d held", len(held))
	}
}

// warnCounter counts the log records at warn level and above.
type warnCounter struct {
	mu sync.Mutex
	n  int
}

func (c *warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (c *warnCounter) Handle(context.Context, slog.Record) error {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return nil
}
func (c *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *warnCounter) WithGroup(string) slog.Handler      { return c }

func (c *warnCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestReleasesRefusalLoggedOnce: a CLI version the package policy
// refuses is logged once, when first refused by its rule (as
// mirror/gate logs a provider's or a module's), not on every request:
// before, each request for it, a client's retries as much as a flood of
// one, wrote a warning. Refused by another rule since, it is logged again.
func TestReleasesRefusalLoggedOnce(t *testing.T) {
	_, side, clock, _ := releasesRig(t)
	warns := &warnCounter{}
	rel, err := served.NewReleases(served.ReleasesConfig{Releases: side.Releases, Policy: side.Engine, Logger: slog.New(warns), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `
deny_version "releases.hashicorp.com/hashicorp/terraform" {
  versions = "< 1.5.0"
  reason   = "too old"
}`))
	for range 50 {
		if _, err := rel.Sums(ctx, releases.HashiCorp, "terraform", "1.0.0"); err == nil {
			t.Fatal("a denied version was served")
		}
	}
	if n := warns.count(); n != 1 {
		t.Errorf("50 refusals of one version wrote %d warnings, want 1", n)
	}
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `deny = ["releases.hashicorp.com/hashicorp/terraform"]`))
	for range 5 {
		if _, err := rel.Sums(ctx, releases.HashiCorp, "terraform", "1.0.0"); err == nil {
			t.Fatal("a denied product was served")
		}
	}
	if n := warns.count(); n != 2 {
		t.Errorf("after the product is denied: %d warnings, want 2", n)
	}
}

// Made-up CLI versions, each refused by deny_version without asking the
// origin, cannot fill the log: they are logged at warn within the bound
// the gate keeps for the packages (mirror/gate.RefusalWarnings), the rest
// at debug.
func TestReleasesMadeUpVersionsWarnWithinBound(t *testing.T) {
	_, side, clock, _ := releasesRig(t)
	warns := &warnCounter{}
	rel, err := served.NewReleases(served.ReleasesConfig{Releases: side.Releases, Policy: side.Engine, Logger: slog.New(warns), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `
deny_version "releases.hashicorp.com/hashicorp/terraform" {
  versions = "< 1.5.0"
  reason   = "too old"
}`))
	for i := range 300 {
		if _, err := rel.Sums(context.Background(), releases.HashiCorp, "terraform", fmt.Sprintf("1.0.%d", i)); err == nil {
			t.Fatal("a denied version was served")
		}
	}
	if n := warns.count(); n != 20 {
		t.Errorf("300 made-up versions refused at once wrote %d warnings, want 20", n)
	}
}

// TestReleasesAgeNotDatedByAnotherRelease: an origin that answers a
// version it lists with an old release's SHA256SUMS and signature (the
// publisher's, for 1.5.7) does not date that version, nor the versions
// below it, by that old signature: under minimum_release_age, the list
// leaves out the made-up 9.0.0 and the fresh 1.6.0, and keeps the old
// 1.5.7.
func TestReleasesAgeNotDatedByAnotherRelease(t *testing.T) {
	o, side, clock, _ := releasesRig(t)
	rel := side.Served
	ctx := context.Background()
	now := clock.Now()
	o.SetSignedAt(now.Add(-24 * time.Hour))
	o.SetVersionSignedAt("terraform", "1.5.7", now.Add(-90*24*time.Hour))
	o.Add("hashicorp", "terraform", "9.0.0", "linux_amd64")
	o.ReplaySums("hashicorp", "terraform", "9.0.0", "terraform", "1.5.7")
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	got := listedVersions(t, rel, releases.HashiCorp, "terraform")
	if !slices.Equal(got, []string{"1.5.7"}) {
		t.Fatalf("listed %v under the age gate, want [1.5.7]", got)
	}
	if _, err := rel.Sums(ctx, releases.HashiCorp, "terraform", "9.0.0"); err == nil {
		t.Fatal("9.0.0 served with 1.5.7's SHA256SUMS")
	}
}

// TestReleasesListDatesWhatItHolds: under minimum_release_age, a version
// below one old enough is taken to be as old only while the mirror holds
// nothing that dates it: a patch of an older line released after the
// newest (1.5.8, signed yesterday, below 1.6.0, signed long ago), once
// its SHA256SUMS is held, is left out of the list as its download is
// refused.
func TestReleasesListDatesWhatItHolds(t *testing.T) {
	o, side, clock, _ := releasesRig(t)
	rel := side.Served
	now := clock.Now()
	o.SetSignedAt(now.Add(-90 * 24 * time.Hour))
	o.Add("hashicorp", "terraform", "1.5.8", "linux_amd64")
	o.SetVersionSignedAt("terraform", "1.5.8", now.Add(-24*time.Hour))
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	var pe *gate.PolicyError
	if err := readArchive(rel, releases.HashiCorp, "terraform", "1.5.8", "terraform_1.5.8_linux_amd64.zip"); !errors.As(err, &pe) || pe.Verdict.Rule != policy.RuleMinReleaseAge {
		t.Fatalf("1.5.8, signed yesterday: %v, want held", err)
	}
	got := listedVersions(t, rel, releases.HashiCorp, "terraform")
	if !slices.Equal(got, []string{"1.6.0", "1.5.7"}) {
		t.Fatalf("listed %v, want [1.6.0 1.5.7]: 1.5.8 was refused", got)
	}
}

// The status page asks Held for the CLI versions held back on every
// view, and deny_version refuses a version before any origin is asked
// whether it exists, so a client can fill the notes (maxHeldNoted) with
// versions it made up, and refuse one more before each view. Each view
// judged every note again, with two reads of the cache each, and sorted
// them: some 15 ms of CPU a view. Held now gives its last answer again
// while it holds; a policy put in force, or a version held back for its
// age, shows at once.
func TestReleasesHeldCostsNoWorkPerNote(t *testing.T) {
	o, side, clock, _ := releasesRig(t)
	rel := side.Served
	ctx := context.Background()
	src := `
minimum_release_age = "48h"
deny_version "releases.hashicorp.com/hashicorp/terraform" {
  versions = "< 1.5.0"
  reason   = "too old"
}`
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, src))
	const invented = 1000
	next := 0
	refuse := func() {
		if _, err := rel.Sums(ctx, releases.HashiCorp, "terraform", fmt.Sprintf("1.0.%d", next)); err == nil {
			t.Fatalf("a denied version was served")
		}
		next++
	}
	for range invented {
		refuse()
	}
	if n := len(rel.Held()); n != invented {
		t.Fatalf("%d held, want %d", n, invented)
	}
	// The list is made again once a second at most, whatever the runs
	// take on a loaded machine. Made again each time, it took some 50
	// allocations a version.
	const runs = 30
	for name, f := range map[string]func(){"Held": func() { rel.Held() }, "a refusal and Held": func() { refuse(); rel.Held() }} {
		total, took := countAllocs(runs, f)
		if allowed := runs*invented/4 + (int(took.Seconds())+2)*60*invented; total > allowed {
			t.Errorf("%s, %d times, of %d versions, in %s: %d allocations, want at most %d (a list made again once a second)",
				name, runs, invented, took, total, allowed)
		}
	}

	o.SetSignedAt(clock.Now().Add(-24 * time.Hour))
	var pe *gate.PolicyError
	if err := readArchive(rel, releases.HashiCorp, "terraform", "1.6.0", tfZip); !errors.As(err, &pe) || pe.Verdict.Rule != policy.RuleMinReleaseAge {
		t.Fatalf("a fresh version: %v, want held by its age", err)
	}
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, src))
	if !slices.ContainsFunc(rel.Held(), func(v unsigned.Version) bool { return v.Version == "1.6.0" && !v.AvailableAt.IsZero() }) {
		t.Error("with a policy put in force, 1.6.0 held for its age is not listed")
	}
	clock.Add(24 * time.Hour)
	if slices.ContainsFunc(rel.Held(), func(v unsigned.Version) bool { return v.Version == "1.6.0" }) {
		t.Error("past its time, 1.6.0 is still listed as held")
	}
	side.Engine.SetPolicy(nil)
	if held := rel.Held(); len(held) != 0 {
		t.Errorf("with no policy, %d held", len(held))
	}
}

// countAllocs runs f runs times and returns the allocations the process
// made meanwhile, and the time they took.
func countAllocs(runs int, f func()) (int, time.Duration) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for range runs {
		f()
	}
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	return int(after.Mallocs - before.Mallocs), took
}

// TestReleasesPreReleaseDatesNoRelease: under minimum_release_age, a
// pre-release old enough (Terraform's alpha of its next minor, published
// every few weeks) does not make the releases below it as old: a patch
// of the current line signed yesterday (1.6.1, below 1.7.0-alpha1 of ten
// days ago) is looked up and left out of the list, as its download is
// refused, so that an installer's "latest" is not a version refused with
// 451; the releases below the newest one old enough still are not.
func TestReleasesPreReleaseDatesNoRelease(t *testing.T) {
	o, side, clock, _ := releasesRig(t)
	rel := side.Served
	ctx := context.Background()
	now := clock.Now()
	o.SetSignedAt(now.Add(-90 * 24 * time.Hour))
	o.Add("hashicorp", "terraform", "1.7.0-alpha1", "linux_amd64")
	o.SetVersionSignedAt("terraform", "1.7.0-alpha1", now.Add(-10*24*time.Hour))
	o.Add("hashicorp", "terraform", "1.6.1", "linux_amd64")
	o.SetVersionSignedAt("terraform", "1.6.1", now.Add(-24*time.Hour))
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	got := listedVersions(t, rel, releases.HashiCorp, "terraform")
	if !slices.Equal(got, []string{"1.7.0-alpha1", "1.6.0", "1.5.7"}) {
		t.Errorf("listed %v, want [1.7.0-alpha1 1.6.0 1.5.7]: 1.6.1 was signed yesterday", got)
	}
	var pe *gate.PolicyError
	if _, err := rel.Sums(ctx, releases.HashiCorp, "terraform", "1.6.1"); !errors.As(err, &pe) || pe.Verdict.Rule != policy.RuleMinReleaseAge {
		t.Fatalf("1.6.1, signed yesterday: %v, want held", err)
	}
	if n := o.Hits("/hc/terraform/1.5.7/terraform_1.5.7_SHA256SUMS"); n != 0 {
		t.Errorf("1.5.7, below 1.6.0 old enough, was looked up %d times", n)
	}
}

// TestReleasesRelistedVersionKeepsItsDating: a version the first list
// had, left out of one list (an origin's glitch answers a list that lacks
// it) and listed again, is not dated by that list: the listing rule's
// time is that of the list before the one that first listed it, and the
// first had it. Dated by the glitch, every version of the first list
// (cached ones too) was held back for the whole minimum release age.
func TestReleasesRelistedVersionKeepsItsDating(t *testing.T) {
	o, side, clock, _ := releasesRig(t)
	rel := side.Served
	ctx := context.Background()
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	const zip157 = "terraform_1.5.7_linux_amd64.zip"
	if err := readArchive(rel, releases.HashiCorp, "terraform", "1.5.7", zip157); err != nil {
		t.Fatalf("1.5.7, signed long ago: %v", err)
	}
	o.Unlist("hashicorp", "terraform", "1.5.7", true)
	clock.Add(11 * time.Minute)
	if _, _, err := rel.Versions(ctx, releases.HashiCorp, "terraform"); err != nil {
		t.Fatal(err)
	}
	o.Unlist("hashicorp", "terraform", "1.5.7", false)
	clock.Add(11 * time.Minute)
	got := listedVersions(t, rel, releases.HashiCorp, "terraform")
	if !slices.Equal(got, []string{"1.6.0", "1.5.7"}) {
		t.Errorf("listed %v once 1.5.7 is listed again, want [1.6.0 1.5.7]", got)
	}
	if err := readArchive(rel, releases.HashiCorp, "terraform", "1.5.7", zip157); err != nil {
		t.Errorf("1.5.7, cached and first listed by the first list: %v", err)
	}
}

// TestReleasesListDeniedVersionsNotLookedUp: under minimum_release_age,
// a list asks the origin for the SHA256SUMS of its newest versions only,
// to date them; the versions deny_version refuses need no date, so none
// of their SHA256SUMS is fetched, and they take none of the list's
// lookups. Denying every version from 1.6.0 on (Terraform's licence
// change) left the versions below them undated, held and left out of the
// list, for as many lists as there were denied versions to look up.
func TestReleasesListDeniedVersionsNotLookedUp(t *testing.T) {
	o, side, clock, _ := releasesRig(t)
	rel := side.Served
	ctx := context.Background()
	now := clock.Now()
	o.SetSignedAt(now.Add(-90 * 24 * time.Hour))
	denied := []string{"1.6.1", "1.6.2", "1.7.0", "1.7.1", "1.8.0"}
	for _, v := range denied { // each released within the minimum release age
		o.Add("hashicorp", "terraform", v, "linux_amd64")
		o.SetVersionSignedAt("terraform", v, now.Add(-24*time.Hour))
	}
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `
minimum_release_age = "72h"
deny_version "releases.hashicorp.com/hashicorp/terraform" {
  versions = ">= 1.6.0"
  reason   = "licence"
}`))
	got := listedVersions(t, rel, releases.HashiCorp, "terraform")
	if !slices.Equal(got, []string{"1.5.7"}) {
		t.Errorf("listed %v, want [1.5.7]: every newer version is denied, 1.5.7 signed long ago", got)
	}
	for _, v := range append(denied, "1.6.0") {
		if n := o.Hits("/hc/terraform/" + v + "/terraform_" + v + "_SHA256SUMS"); n != 0 {
			t.Errorf("denied %s: its SHA256SUMS fetched %d times to date it", v, n)
		}
	}
	var pe *gate.PolicyError
	if _, err := rel.Sums(ctx, releases.HashiCorp, "terraform", "1.7.0"); !errors.As(err, &pe) || pe.Verdict.Rule != policy.RuleDenyVersion {
		t.Errorf("1.7.0: %v, want denied", err)
	}
}

// An origin that fails the first lookup of a list's dating is asked for
// no other version's SHA256SUMS in that list: each lookup may wait the
// origin's whole time limit, and the versions left undated are held, as
// they would be by the lookups' failures.
func TestReleasesListStopsLookingUpWhenTheOriginFails(t *testing.T) {
	o, side, clock, _ := releasesRig(t)
	rel := side.Served
	now := clock.Now()
	o.SetSignedAt(now.Add(-90 * 24 * time.Hour))
	recent := []string{"1.6.1", "1.6.2", "1.7.0", "1.7.1"}
	for _, v := range recent {
		o.Add("hashicorp", "terraform", v, "linux_amd64")
		o.SetVersionSignedAt("terraform", v, now.Add(-24*time.Hour))
	}
	// Listed with no minimum release age: nothing is looked up, and the
	// list is held fresh.
	if got := listedVersions(t, rel, releases.HashiCorp, "terraform"); len(got) != 6 {
		t.Fatalf("listed %v, want all six versions", got)
	}
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	o.SetDown(true)
	got := listedVersions(t, rel, releases.HashiCorp, "terraform")
	if len(got) != 0 {
		t.Errorf("listed %v with the origin down, want none: no version could be dated", got)
	}
	asked := 0
	for _, v := range append(recent, "1.6.0", "1.5.7") {
		if o.Hits("/hc/terraform/"+v+"/terraform_"+v+"_SHA256SUMS") > 0 {
			asked++
		}
	}
	if asked != 1 {
		t.Errorf("%d versions' SHA256SUMS asked of an origin that failed the first, want 1", asked)
	}
}

// A lookup that fails for its version alone (a SHA256SUMS missing, or
// signed by a key nobody trusts) leaves the list's other lookups to go
// on: the versions below it are dated.
func TestReleasesListLooksOnPastAVersionsFailure(t *testing.T) {
	o, side, clock, _ := releasesRig(t)
	rel := side.Served
	now := clock.Now()
	o.SetSignedAt(now.Add(-90 * 24 * time.Hour))
	o.Add("hashicorp", "terraform", "1.7.0", "linux_amd64")
	o.Add("hashicorp", "terraform", "1.7.1", "linux_amd64")
	o.Add("hashicorp", "terraform", "1.7.2", "linux_amd64")
	o.SignWithOtherKey("terraform_1.7.2_SHA256SUMS")
	o.Withhold("terraform_1.7.1_SHA256SUMS", true)
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	got := listedVersions(t, rel, releases.HashiCorp, "terraform")
	if !slices.Equal(got, []string{"1.7.0", "1.6.0", "1.5.7"}) {
		t.Errorf("listed %v, want [1.7.0 1.6.0 1.5.7]: 1.7.0 signed long ago, the two above it undatable", got)
	}
}

// datingRig is the CLI releases side made with cfg, on a fake clock,
// under minimum_release_age = "72h", before a stand-in origin with
// terraform 1.5.7, signed 90 days ago, and four versions signed a day
// ago above it: a list dates its newest versions by their SHA256SUMS.
func datingRig(t *testing.T, cfg releases.Config) (*fakeorigin.Releases, *harness.ReleasesSide) {
	t.Helper()
	o, err := fakeorigin.StartReleases()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	clock := enginetest.NewFakeClock()
	clock.Set(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	now := clock.Now()
	o.SetSignedAt(now.Add(-90 * 24 * time.Hour))
	o.Add("hashicorp", "terraform", "1.5.7", "linux_amd64")
	for _, v := range []string{"1.6.1", "1.6.2", "1.7.0", "1.7.1"} {
		o.Add("hashicorp", "terraform", v, "linux_amd64")
		o.SetVersionSignedAt("terraform", v, now.Add(-24*time.Hour))
	}
	cfg.Now = clock.Now
	side := harness.StartReleasesSide(t, o, cfg)
	side.Engine.SetPolicy(enginetest.DecodePolicy(t, `minimum_release_age = "72h"`))
	return o, side
}

// TestReleasesListWaitsOneOriginTimeLimit: the lookups that date a version
// list's newest versions under a minimum release age share one origin
// time limit. An origin that answers each SHA256SUMS slowly, within the
// limit, made a list wait that limit once per lookup (four), where the
// docs promise one; the versions left undated when it is spent are held,
// never listed as released long ago.
func TestReleasesListWaitsOneOriginTimeLimit(t *testing.T) {
	const limit = 2 * time.Second
	o, side := datingRig(t, releases.Config{OriginTimeout: limit})
	o.SetDelay("_SHA256SUMS", 1500*time.Millisecond)

	start := time.Now()
	got := listedVersions(t, side.Served, releases.HashiCorp, "terraform")
	if took := time.Since(start); took > 2*limit {
		t.Errorf("the list took %s with an origin answering each SHA256SUMS in 1.5 s, want one origin time limit (%s) at most, not one per lookup", took.Round(100*time.Millisecond), limit)
	}
	if len(got) != 0 {
		t.Errorf("listed %v, want none: the recent versions are too new, and 1.5.7 could not be dated in time", got)
	}
}

// TestReleasesListWaitsNoLongerThanItsStaleWait: with a minimum release
// age, an origin that stalls on the SHA256SUMS that date a list's newest
// versions keeps a list request waiting no longer than the list itself
// is waited for before it is served stale (releases.Config.StaleAfter),
// not the origin's whole time limit on every request; the versions left
// undated are held, and the lookups go on for a later list.
func TestReleasesListWaitsNoLongerThanItsStaleWait(t *testing.T) {
	const limit, staleAfter = 6 * time.Second, 300 * time.Millisecond
	o, side := datingRig(t, releases.Config{OriginTimeout: limit, StaleAfter: staleAfter})
	o.SetDelay("_SHA256SUMS", time.Hour) // stalled: cut by the origin time limit

	for i := range 2 {
		start := time.Now()
		got := listedVersions(t, side.Served, releases.HashiCorp, "terraform")
		took := time.Since(start)
		t.Logf("list %d with the origin stalled: %s", i+1, took.Round(10*time.Millisecond))
		if took > limit/2 {
			t.Errorf("list %d took %s with the origin stalled, want about the stale wait (%s), far below the origin time limit (%s)", i+1, took.Round(100*time.Millisecond), staleAfter, limit)
		}
		if len(got) != 0 {
			t.Errorf("list %d: listed %v, want none: no version could be dated", i+1, got)
		}
	}

	// The origin answering again, a later list dates them.
	o.SetDelay("", 0)
	var got []string
	deadline := time.Now().Add(2 * limit)
	for time.Now().Before(deadline) {
		if got = listedVersions(t, side.Served, releases.HashiCorp, "terraform"); slices.Equal(got, []string{"1.5.7"}) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !slices.Equal(got, []string{"1.5.7"}) {
		t.Errorf("listed %v once the origin answers, want [1.5.7]: the others are a day old", got)
	}
}
