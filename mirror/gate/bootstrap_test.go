package gate_test

import (
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
)

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
			r := newReplicas(t, kind)
			r.publish("1.0.0")
			r.publish("1.1.0")
			first := r.listAt(r.a)
			r.publish("1.2.0")
			r.listAt(r.a)
			r.withdraw("1.1.0")
			r.withdraw("1.2.0")
			short := r.listAt(r.a)
			for _, v := range []string{"1.1.0", "1.2.0", "1.3.0"} {
				r.publish(v)
			}
			c := r.replica(t, r.cfg("c"))
			r.listAt(c)
			r.listAt(r.a)

			pol := enginetest.DecodePolicy(t, `minimum_release_age = "72h"`)
			want := map[string]time.Time{
				"1.0.0": {}, "1.1.0": {}, // of the first listing: served
				"1.2.0": first.Add(72 * time.Hour), // dated by the listing before the one that first named it
				"1.3.0": short.Add(72 * time.Hour), // first named after the short listing
			}
			for name, h := range map[string]*harness.Harness{"a": r.a, "c": c} {
				h.Engine.SetPolicy(pol)
				for v, until := range want {
					err := r.verdict(h, v)
					if !until.IsZero() {
						heldUntil(t, "replica "+name+": "+v, err, until)
					} else if err != nil {
						t.Errorf("replica %s: %s, of a's first listing: %v, want it served", name, v, err)
					}
				}
			}
		})
	}
}
