package releases_test

import (
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/heldpoint"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// stallingListOrigin is the origin client next, whose version list
// fetches (PRODUCT/index.json) wait, while stalled, until release is
// closed or their context ends: an origin host that accepts the request
// and does not answer.
type stallingListOrigin struct {
	next releases.Origin

	mu      sync.Mutex
	stalled bool
	release chan struct{}

	entered  chan struct{} // a stalled fetch began waiting
	lists    atomic.Int32  // list fetches asked of the origin
	returned chan error    // a stalled fetch returned, with its error
}

func (o *stallingListOrigin) stall() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stalled, o.release = true, make(chan struct{})
}

// answer ends the stall: the fetch waiting goes on to the origin.
func (o *stallingListOrigin) answer() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stalled = false
	close(o.release)
}

func (o *stallingListOrigin) FetchFile(ctx context.Context, p addrs.Provider, raw string, limit int64) ([]byte, error) {
	if !strings.HasSuffix(raw, "/index.json") {
		return o.next.FetchFile(ctx, p, raw, limit)
	}
	o.lists.Add(1)
	o.mu.Lock()
	stalled, release := o.stalled, o.release
	o.mu.Unlock()
	if !stalled {
		return o.next.FetchFile(ctx, p, raw, limit)
	}
	o.entered <- struct{}{}
	var (
		data []byte
		err  error
	)
	select {
	case <-release:
		data, err = o.next.FetchFile(ctx, p, raw, limit)
	case <-ctx.Done():
		err = ctx.Err()
	}
	o.returned <- err
	return data, err
}

func (o *stallingListOrigin) OpenArchive(ctx context.Context, p addrs.Provider, raw string) (io.ReadCloser, int64, error) {
	return o.next.OpenArchive(ctx, p, raw)
}

// stallRig is the releases side before an origin whose list endpoint
// can be stalled: lists expire after ListTTL on the rig's clock, a
// cached list is served stale after staleAfter, and an origin fetch
// gives up only after an hour.
func stallRig(t *testing.T, staleAfter time.Duration) (*rig, *stallingListOrigin, *releases.Releases) {
	t.Helper()
	r := newRig(t, startOrigin(t), "", false)
	o := &stallingListOrigin{next: r.client, entered: make(chan struct{}, 1), returned: make(chan error, 1)}
	rel, err := releases.New(releases.Config{
		HashiCorpURL: r.origin.HashiCorpURL, HashiCorpKeys: []string{r.origin.HashiCorpKey},
		OpenTofuDownloadURL: r.origin.OpenTofuDownloadURL, OpenTofuAPIURL: r.origin.OpenTofuAPIURL, OpenTofuKeys: []string{r.origin.OpenTofuKey},
		ListTTL: 10 * time.Minute, StaleAfter: staleAfter, OriginTimeout: time.Hour,
		Logger: enginetest.Logger(t), Metrics: r.metrics, Now: r.clock.Now,
	}, o, r.engine, r.store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rel.Close)
	return r, o, rel
}

// versionsWithin is rel.Versions, failing the test when it has not
// answered within bound.
func versionsWithin(t *testing.T, rel *releases.Releases, bound time.Duration) (*releases.List, releases.ListState, error) {
	t.Helper()
	type answer struct {
		list *releases.List
		st   releases.ListState
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		l, st, err := rel.Versions(t.Context(), releases.HashiCorp, "terraform")
		ch <- answer{l, st, err}
	}()
	select {
	case a := <-ch:
		return a.list, a.st, a.err
	case <-time.After(bound):
		t.Fatalf("the version list was not answered within %s (the origin's timeout is an hour)", bound)
		panic("unreachable")
	}
}

// An expired version list whose origin stalls is served, stale, once
// StaleAfter has passed, not when the origin fetch gives up: the refresh
// goes on, and once the origin answers the next caller is served what
// it fetched, without asking the origin again.
func TestStalledOriginServesCachedListStale(t *testing.T) {
	r, o, rel := stallRig(t, 50*time.Millisecond)
	if _, _, err := versionsWithin(t, rel, time.Minute); err != nil {
		t.Fatal(err)
	}
	r.origin.Add("hashicorp", "terraform", "1.7.0", "linux_amd64")
	o.stall()
	r.clock.Add(time.Hour) // the cached list has expired

	list, st, err := versionsWithin(t, rel, 30*time.Second)
	if err != nil || !st.Stale || list.Has("1.7.0") || !list.Has("1.6.0") {
		t.Fatalf("with the origin stalled: stale %v, %v; want the cached list (1.6.0, not 1.7.0), stale", st.Stale, err)
	}
	if n := r.metrics.servedCount("hashicorp/terraform/list/stale"); n != 1 {
		t.Errorf("lists counted served stale = %d, want 1", n)
	}
	<-o.entered // the refresh is under way

	o.answer()
	if err := <-o.returned; err != nil {
		t.Fatalf("the refresh, once the origin answered: %v; want it gone on", err)
	}
	list, st, err = versionsWithin(t, rel, time.Minute)
	if err != nil || st.Stale || !list.Has("1.7.0") {
		t.Fatalf("after the refresh: stale %v, has 1.7.0 %v, %v; want the list it fetched", st.Stale, err == nil && list.Has("1.7.0"), err)
	}
	if n := o.lists.Load(); n != 2 {
		t.Errorf("%d list fetches, want 2 (the first listing and the one refresh that went on)", n)
	}
	if n := r.metrics.servedCount("hashicorp/terraform/list/stale"); n != 1 {
		t.Errorf("lists counted served stale = %d after the refresh, want still 1", n)
	}
}

// A refresh still waiting on a stalled origin when the releases side is
// closed is ended by Close, which returns once it has: no fetch outlives
// it.
func TestCloseEndsStalledListRefresh(t *testing.T) {
	r, o, rel := stallRig(t, 50*time.Millisecond)
	if _, _, err := versionsWithin(t, rel, time.Minute); err != nil {
		t.Fatal(err)
	}
	o.stall()
	r.clock.Add(time.Hour)
	if _, st, err := versionsWithin(t, rel, 30*time.Second); err != nil || !st.Stale {
		t.Fatalf("with the origin stalled: stale %v, %v; want the cached list, stale", st.Stale, err)
	}
	<-o.entered

	closed := make(chan struct{})
	go func() { rel.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close did not return within a minute with a list refresh stalled")
	}
	select {
	case err := <-o.returned:
		if err == nil {
			t.Error("the stalled refresh returned a list after Close; want it ended")
		}
	default:
		t.Error("Close returned before the stalled refresh did")
	}
}

// gatedClock is clock's Now, except that the first call after Arm waits
// (heldpoint), having said so on Reached, until GoOn: a caller held
// between reading the version list it has in memory and asking the
// origin for a new one.
type gatedClock struct {
	clock *enginetest.FakeClock

	heldpoint.Point
}

func (c *gatedClock) Now() time.Time {
	c.Pass()
	return c.clock.Now()
}

// A caller that found the version list expired while another caller's
// refresh was under way, and asks for it once that refresh has ended, is
// answered with the list the refresh fetched: the origin is not asked
// again (the refresh's flight looks at the list in memory before it
// fetches).
func TestListFetchedJustBeforeIsNotFetchedAgain(t *testing.T) {
	r := newRig(t, startOrigin(t), "", false)
	o := &stallingListOrigin{next: r.client}
	clock := &gatedClock{clock: r.clock}
	rel, err := releases.New(releases.Config{
		HashiCorpURL: r.origin.HashiCorpURL, HashiCorpKeys: []string{r.origin.HashiCorpKey},
		OpenTofuDownloadURL: r.origin.OpenTofuDownloadURL, OpenTofuAPIURL: r.origin.OpenTofuAPIURL, OpenTofuKeys: []string{r.origin.OpenTofuKey},
		ListTTL: 10 * time.Minute, Logger: enginetest.Logger(t), Metrics: r.metrics, Now: clock.Now,
	}, o, r.engine, r.store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rel.Close)
	if _, _, err := versionsWithin(t, rel, time.Minute); err != nil {
		t.Fatal(err)
	}
	r.origin.Add("hashicorp", "terraform", "1.7.0", "linux_amd64")
	r.clock.Add(time.Hour) // the cached list has expired

	clock.Arm()
	held := make(chan error, 1)
	var heldList *releases.List
	go func() {
		l, _, err := rel.Versions(t.Context(), releases.HashiCorp, "terraform")
		heldList = l
		held <- err
	}()
	<-clock.Reached() // the held caller has read the expired list
	list, _, err := versionsWithin(t, rel, time.Minute)
	if err != nil || !list.Has("1.7.0") {
		t.Fatalf("the caller that refreshed: has 1.7.0 %v, %v; want the new list", err == nil && list.Has("1.7.0"), err)
	}
	clock.GoOn()
	if err := <-held; err != nil || !heldList.Has("1.7.0") {
		t.Fatalf("the held caller: has 1.7.0 %v, %v; want the new list", err == nil && heldList.Has("1.7.0"), err)
	}
	if n := o.lists.Load(); n != 2 {
		t.Errorf("%d list fetches, want 2 (the first listing and the one refresh)", n)
	}
}
