package retention

import (
	"reflect"
	"testing"

	"github.com/tfmirror/tfmirror/v2/mirror"
)

// A version of a host that is no longer an allowed origin (the operator
// took it off --allowed-origins) is still served from the cache, and
// cannot be fetched again: no rule and no size limit removes it, as they
// keep an import; a prune naming it removes it, and unlists it.
func TestRetentionKeepsVersionsOfAHostNoLongerAllowed(t *testing.T) {
	t.Parallel()
	opts := harnessOptions{cacheDir: t.TempDir(), ret: Config{Interval: -1}}
	h := newHarness(t, opts)
	all := []string{"1.0.0", "2.0.0"}
	h.origin.AddProvider(ns, typ, all, []string{"linux_amd64"})
	h.readAll(all...)
	h.stop()

	opts.cfg = mirror.Config{AllowedOrigins: []string{"registry.example.com"}}
	opts.ret = Config{Interval: -1, KeepVersions: 1}
	h.start(opts)
	if _, err := h.read(t.Context(), "1.0.0", "linux_amd64"); err != nil {
		t.Fatalf("the cached 1.0.0 of a host no longer allowed is not served: %v", err)
	}
	done, err := h.ret.Prune(t.Context(), PruneRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 0 || !h.isCached("1.0.0") {
		t.Errorf("the rules removed %v of a host no longer allowed, which cannot be fetched again", removalNames(done))
	}
	if _, err := h.read(t.Context(), "1.0.0", "linux_amd64"); err != nil {
		t.Errorf("1.0.0 is no longer served: %v", err)
	}
	h.ret.rebuild()
	if sha := h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"); h.ret.Evictable(sha) {
		t.Error("the size limit may evict a package of a host no longer allowed")
	}
	named := pruneNamed(t, h, "1.0.0")
	if got, want := removalNames(named), []string{"1.0.0 named"}; !reflect.DeepEqual(got, want) || !named[0].Unlisted {
		t.Errorf("a prune naming it removed %+v, want %v, unlisted", named, want)
	}
}
