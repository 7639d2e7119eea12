package releases_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/releases"
)

// rig is the releases side on an engine and a cache, before the stand-in
// origins, each publisher's key trusted.
type rig struct {
	t       testing.TB
	origin  *fakeorigin.Releases
	store   *cache.Store
	engine  *mirror.Engine
	rel     *releases.Releases
	client  *discovery.Client
	clock   *enginetest.FakeClock
	metrics *countingMetrics
}

type countingMetrics struct {
	mu      sync.Mutex
	served  map[string]int
	refused map[string]int
	failed  map[string]int // VerificationFailed, by reason
	// originRefused counts Config.OriginRefused's calls, by
	// "ORIGIN/REASON".
	originRefused map[string]int
}

// refusedBy is the rig's Config.OriginRefused.
func (m *countingMetrics) refusedBy(origin, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.originRefused == nil {
		m.originRefused = map[string]int{}
	}
	m.originRefused[origin+"/"+reason]++
}

// toldOrigins returns what Config.OriginRefused was told.
func (m *countingMetrics) toldOrigins() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.originRefused)
}

func (m *countingMetrics) CLIServed(pub, product, kind string, stale bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := pub + "/" + product + "/" + kind
	if stale {
		k += "/stale"
	}
	m.served[k]++
}

func (m *countingMetrics) CLIRefused(pub, product, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refused[pub+"/"+product+"/"+reason]++
}

func (m *countingMetrics) VerificationFailed(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed == nil {
		m.failed = map[string]int{}
	}
	m.failed[reason]++
}

func (m *countingMetrics) verificationFailures(reason string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failed[reason]
}

func (m *countingMetrics) servedCount(k string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.served[k]
}

func (m *countingMetrics) refusals(k string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused[k]
}

func startOrigin(t *testing.T) *fakeorigin.Releases {
	t.Helper()
	o, err := fakeorigin.StartReleases()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	o.Add("hashicorp", "terraform", "1.5.7", "linux_amd64", "darwin_arm64")
	o.Add("hashicorp", "terraform", "1.6.0", "linux_amd64", "darwin_arm64")
	o.Add("opentofu", "tofu", "1.8.0", "linux_amd64", "darwin_arm64")
	return o
}

// newRig opens the releases side before o, on the cache in dir ("": in memory).
func newRig(t testing.TB, o *fakeorigin.Releases, dir string, offline bool) *rig {
	t.Helper()
	return newRigStore(t, o, dir, offline, cache.Options{})
}

// newRigStore is newRig on a cache opened with opts.
func newRigStore(t testing.TB, o *fakeorigin.Releases, dir string, offline bool, opts cache.Options) *rig {
	t.Helper()
	r := &rig{t: t, origin: o, clock: enginetest.NewFakeClock(),
		metrics: &countingMetrics{served: map[string]int{}, refused: map[string]int{}}}
	r.clock.Set(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	r.store = enginetest.OpenStore(t, dir, opts)
	client, host := enginetest.ReleasesClient(t, o)
	r.client = client
	var err error
	r.engine, err = mirror.New(mirror.Config{AllowedOrigins: []string{host}, Logger: enginetest.Logger(t), Offline: offline}, client, r.store)
	if err != nil {
		t.Fatal(err)
	}
	r.rel, err = releases.New(releases.Config{
		HashiCorpURL: o.HashiCorpURL, HashiCorpKeys: []string{o.HashiCorpKey},
		OpenTofuDownloadURL: o.OpenTofuDownloadURL, OpenTofuAPIURL: o.OpenTofuAPIURL, OpenTofuKeys: []string{o.OpenTofuKey},
		Offline: offline, Logger: enginetest.Logger(t), Metrics: r.metrics, Now: r.clock.Now,
		OriginRefused: r.metrics.refusedBy,
	}, client, r.engine, r.store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	return r
}

func (r *rig) stop() {
	if r.engine == nil {
		return
	}
	r.rel.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.engine.Shutdown(ctx); err != nil {
		r.t.Errorf("shutdown: %v", err)
	}
	r.store.Close()
	r.engine = nil
}

// read opens and reads a whole archive.
func (r *rig) read(pub releases.Publisher, product, version, name string) ([]byte, records.Source, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	arc, err := r.rel.OpenArchive(ctx, pub, product, version, name)
	if err != nil {
		return nil, 0, err
	}
	defer arc.Close()
	data, err := io.ReadAll(arc)
	return data, arc.Source, err
}

// waitIdle waits until the engine's downloads have ended.
func (r *rig) waitIdle() {
	r.t.Helper()
	enginetest.WaitIdle(r.t, func(ctx context.Context) error { return mirror.WaitIdle(ctx, r.engine) })
}

func isNotFound(err error) bool { return errors.Is(err, releases.ErrNotFound) }
