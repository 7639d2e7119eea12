package proxy

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/mirror"
)

// A version the cached version list lacks is "not found" (404) only when
// a fresh list from the origin lacks it. While the list cannot be
// refreshed, the answer is the origin's trouble (here 503), or, offline,
// that the mirror is offline (503): a client must not conclude that the
// version does not exist.
func TestUnknownVersionWhileListCannotBeRefreshed(t *testing.T) {
	t.Parallel()
	t.Run("refresh after the TTL fails", func(t *testing.T) {
		h := newHarness(t, harnessOptions{engine: mirror.Config{VersionsTTL: 1}}) // every request refreshes
		h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
		if r := h.get(providerPath("index.json")); r.status != http.StatusOK {
			t.Fatalf("warm-up: %d", r.status)
		}
		h.origin.SetDown(http.StatusServiceUnavailable)
		if r := h.get(providerPath("2.0.0.json")); r.status != http.StatusServiceUnavailable {
			t.Fatalf("VERSION.json of an unlisted version, origin down: status %d, want 503: %s", r.status, r.body)
		}
		if r := h.get(providerPath("1.0.0.json")); r.status != http.StatusServiceUnavailable {
			// Listed, but its package metadata is not cached either.
			t.Fatalf("VERSION.json of an uncached version, origin down: status %d, want 503: %s", r.status, r.body)
		}
	})

	t.Run("forced refresh of a fresh list fails", func(t *testing.T) {
		var now atomic.Int64
		now.Store(time.Now().UnixNano())
		h := newHarness(t, harnessOptions{engine: mirror.Config{
			VersionsTTL: time.Hour,
			Now:         func() time.Time { return time.Unix(0, now.Load()) },
		}})
		h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
		if r := h.get(providerPath("index.json")); r.status != http.StatusOK {
			t.Fatalf("warm-up: %d", r.status)
		}
		// Within the TTL, but old enough for an unknown version to
		// refresh the list.
		now.Add(int64(5 * time.Minute))
		h.origin.SetDown(http.StatusBadGateway)
		if r := h.get(providerPath("2.0.0.json")); r.status != http.StatusBadGateway {
			t.Fatalf("VERSION.json of an unlisted version, origin failing: status %d, want 502: %s", r.status, r.body)
		}
		// The origin back, a fresh list that lacks the version is believed.
		h.origin.SetDown(0)
		if r := h.get(providerPath("2.0.0.json")); r.status != http.StatusNotFound {
			t.Fatalf("VERSION.json of a version the origin does not list: status %d, want 404: %s", r.status, r.body)
		}
	})

	t.Run("offline", func(t *testing.T) {
		dir := t.TempDir()
		h := newHarness(t, harnessOptions{cacheDir: dir})
		h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
		if r := h.get(providerPath("index.json")); r.status != http.StatusOK {
			t.Fatalf("warm-up: %d", r.status)
		}
		h.stop()
		h.start(harnessOptions{cacheDir: dir, engine: mirror.Config{Offline: true}})
		r := h.get(providerPath("2.0.0.json"))
		if r.status != http.StatusServiceUnavailable {
			t.Fatalf("offline, VERSION.json of an unlisted version: status %d, want 503: %s", r.status, r.body)
		}
		var body errorBody
		r.json(t, &body)
		if len(body.Errors) != 1 || !strings.Contains(body.Errors[0], "offline") {
			t.Errorf("errors %q do not say the mirror is offline", body.Errors)
		}
	})
}

// An archive the engine refuses for a fault of the origin's (here: larger
// than allowed) is a 502, like any origin fault, not a 500.
func TestArchiveOriginFaultIsBadGateway(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{engine: mirror.Config{MaxArchiveBytes: 100}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	r := h.get(archivePath("1.0.0", "linux_amd64"))
	if r.status != http.StatusBadGateway {
		t.Fatalf("archive larger than allowed: status %d, want 502: %s", r.status, r.body)
	}
	var body errorBody
	r.json(t, &body)
	if len(body.Errors) != 1 || !strings.Contains(body.Errors[0], "more than the 100 allowed") {
		t.Errorf("errors %q do not say what was wrong", body.Errors)
	}
}
