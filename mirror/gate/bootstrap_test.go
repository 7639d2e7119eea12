package gate_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/mirror/gate"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// sharedBucket starts versitygw with one bucket and returns a function
// that opens a store on it for a replica.
func sharedBucket(t *testing.T) func(name string) bucketTier {
	t.Helper()
	return bucketOn(t, s3test.Start(t))
}

// bucketOn is sharedBucket on srv.
func bucketOn(t *testing.T, srv *s3test.Server) func(name string) bucketTier {
	t.Helper()
	srv.SetEnv(t)
	srv.CreateBucket("tfm")
	keys, err := sharedstore.NewKeys(bytes.Repeat([]byte("k"), sharedstore.MinKeyBytes), nil)
	if err != nil {
		t.Fatal(err)
	}
	return func(name string) bucketTier {
		s, err := sharedstore.Open(context.Background(), sharedstore.Config{URL: srv.URL("tfm", "replicas"), Holder: name, Keys: keys, CallTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return bucketTier{s}
	}
}

// Two replicas on a versitygw bucket. Replica a's first listing names
// 1.0.0 and 1.1.0 (the bootstrap: taken as released before the mirror
// first looked); its next one adds 1.2.0 (dated by the listing before);
// then the origin answers a short list, 1.0.0 alone, which the bucket
// holds as the newest listing. The origin lists them all again, and
// 1.3.0 besides; replica c, started then with an empty cache, has no
// listing but that short one to date its first by. It took 1.1.0 for a
// version published after the short listing, held it for the minimum
// release age from then, while a served it. The short listing keeps the
// versions it lacked, for the dating alone: c takes 1.1.0 as a, 1.2.0
// by a's dating of it (from the bucket), and 1.3.0, which no listing
// before named, by the short listing. Both replicas agree on every
// version, for a provider (whose signature also dates it, here long
// before) and for a module (dated by its listings alone).
func TestBootstrapVersionAcrossReplicasThroughAShortListing(t *testing.T) {
	for _, kind := range []string{"provider", "module"} {
		t.Run(kind, func(t *testing.T) {
			open := sharedBucket(t)
			clock := enginetest.NewFakeClock()
			start := time.Now().Truncate(time.Second)
			clock.Set(start)
			cfg := func(name string) harness.Config {
				return harness.Config{Now: clock.Now, VersionsTTL: time.Minute, Shared: open(name)}
			}
			a := harness.New(t, harness.Options{Config: cfg("a")})
			o := a.Origin
			ctx := context.Background()
			m := harness.Module
			var publish, pull func(v string)
			var list func(h *harness.Harness)
			var verdict func(h *harness.Harness, v string) error
			switch kind {
			case "provider":
				publish = func(v string) {
					o.AddProvider(harness.NS, harness.Type, []string{v}, []string{"linux_amd64"})
					o.SetSignedAt(harness.NS, harness.Type, v, start.Add(-365*day))
				}
				pull = func(v string) { o.RemoveVersion(harness.NS, harness.Type, v) }
				list = func(h *harness.Harness) { h.Listed() }
				verdict = func(h *harness.Harness, v string) error { _, err := h.Packages(v); return err }
			case "module":
				o.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
				publish = func(v string) { o.AddModule(m.Namespace, m.Name, m.System, v, o.TarballURL("vpc.tar.gz")) }
				pull = func(v string) { o.RemoveModule(m.Namespace, m.Name, m.System, v) }
				list = func(h *harness.Harness) {
					if _, _, err := h.Engine.Modules().ModuleVersions(ctx, m); err != nil {
						t.Fatal(err)
					}
				}
				verdict = func(h *harness.Harness, v string) error {
					_, err := h.Engine.Modules().ModuleLocation(ctx, m, enginetest.MustModuleVersion(t, v))
					return err
				}
			}
			listAt := func(h *harness.Harness) time.Time {
				t.Helper()
				clock.Add(time.Hour)
				list(h)
				h.WaitIdle()
				return clock.Now()
			}

			publish("1.0.0")
			publish("1.1.0")
			first := listAt(a)
			publish("1.2.0")
			listAt(a)
			pull("1.1.0")
			pull("1.2.0")
			short := listAt(a)
			for _, v := range []string{"1.1.0", "1.2.0", "1.3.0"} {
				publish(v)
			}
			c := &harness.Harness{T: t, Origin: o}
			c.Start(harness.Options{Config: cfg("c")})
			listAt(c)
			listAt(a)

			pol := enginetest.DecodePolicy(t, `minimum_release_age = "72h"`)
			want := map[string]time.Time{
				"1.0.0": {}, "1.1.0": {}, // of the first listing: served
				"1.2.0": first.Add(72 * time.Hour), // dated by the listing before the one that first named it
				"1.3.0": short.Add(72 * time.Hour), // first named after the short listing
			}
			for name, h := range map[string]*harness.Harness{"a": a, "c": c} {
				h.Engine.SetPolicy(pol)
				for v, until := range want {
					err := verdict(h, v)
					var perr *gate.PolicyError
					switch {
					case until.IsZero() && err != nil:
						t.Errorf("replica %s: %s, of a's first listing: %v, want it served", name, v, err)
					case !until.IsZero() && (!errors.As(err, &perr) || perr.Verdict.Rule != policy.RuleMinReleaseAge || !perr.Verdict.AvailableAt.Equal(until)):
						t.Errorf("replica %s: %s: %v, want held by the minimum release age until %v", name, v, err, until)
					}
				}
			}
		})
	}
}
