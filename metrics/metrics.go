// Package metrics owns tfmirror's Prometheus collectors: their names,
// labels and help texts, in one place.
//
// It builds every collector on a prometheus.Registerer it is given (no
// global registry) and offers small methods that the other packages call
// through interfaces they declare themselves (proxy.Metrics,
// discovery.Observer). Label values are bounded: routes, kinds, operations,
// outcomes and reasons are fixed sets, and origins are the configured
// allowed hosts. Paths, versions and client addresses never become labels.
//
// It decides nothing and observes nothing itself: the other packages tell
// it what happened. docs/metrics.md describes every family
// (TestDocsDescribeEveryMetric holds it to the code).
package metrics

import (
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Fixed label values, pre-created so that series exist from the start.
var (
	Routes = []string{"index", "version", "archive", "registry_versions", "registry_download",
		"registry_shasums", "registry_signature", "module_versions", "module_download", "module_package",
		"oci_ping", "oci_token", "oci_tags", "oci_manifest", "oci_blob", "oci_referrers",
		"releases_archive", "releases", "status", "metrics", "health", "other"}
	CacheKinds = []string{"discovery", "versions", "package", "archive", "module_versions", "module_location", "module_package", "module_zip"}
	// StaleKinds are the kinds of tfmirror_stale_responses_total: what is
	// served stale when its origin fails.
	StaleKinds = []string{"versions", "module_versions", "package", "discovery"}
	// CoalescedKinds are the kinds of tfmirror_coalesced_requests_total:
	// the fetches a request may join.
	CoalescedKinds = []string{"versions", "package", "archive", "archive_size", "module_versions", "module_location", "module_package", "module_zip", "release"}
	Operations     = []string{"discovery", "versions", "package", "shasums", "signature", "document", "archive", "archive_size", "module_versions", "module_location", "module_source"}
	Outcomes       = []string{"success", "not_found", "error", "timeout", "refused", "untrusted", "proxy"}
	Reasons        = []string{"signature", "missing_checksum", "checksum_mismatch", "bad_archive", "archive_too_large", "name_mismatch"}
	// SyncOutcomes are the outcomes of packages `tfmirror sync` asks a
	// running mirror for: fetched from the origin, already cached, failed.
	SyncOutcomes = []string{"fetched", "cached", "failed"}
	// ImportOutcomes and ExportOutcomes are the outcomes of packages
	// `tfmirror import` and `tfmirror export` ran through a running
	// mirror: done, already present, failed (a failed version counts once).
	ImportOutcomes = []string{"imported", "present", "failed"}
	ExportOutcomes = []string{"exported", "present", "failed"}
)

// Metrics holds tfmirror's collectors.
type Metrics struct {
	reg prometheus.Gatherer

	httpRequests *prometheus.CounterVec
	httpAborted  *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	httpBytes    *prometheus.CounterVec
	cacheHits    *prometheus.CounterVec
	cacheMisses  *prometheus.CounterVec
	evictions    prometheus.Counter
	writeErrors  prometheus.Counter
	damagedReads prometheus.Counter
	ociWrongSize prometheus.Counter
	originReqs   *prometheus.CounterVec
	originDur    *prometheus.HistogramVec
	originBytes  *prometheus.CounterVec
	inflight     prometheus.Gauge
	waiting      prometheus.Gauge
	fetching     atomic.Int64 // inflight's value, for ArchiveFetches
	coalesced    *prometheus.CounterVec
	verifyFails  *prometheus.CounterVec
	stale        *prometheus.CounterVec
	circuitOpen  *circuitGauge
	lastSuccess  *prometheus.GaugeVec
	// notFoundCached and notFoundEntries: the origins' not-found answers
	// remembered (mirror/notfound).
	notFoundCached  *prometheus.CounterVec
	notFoundEntries *prometheus.GaugeVec
	sharedReqs      *prometheus.CounterVec
	sharedDur       *prometheus.HistogramVec
	sharedDown      *breakerGauge
	// sharedConditional: 1 honoured, 0 ignored, -1 not probed.
	sharedConditional prometheus.Gauge
	sharedRejected    *prometheus.CounterVec
	syncPackages      *prometheus.CounterVec
	syncBytes         prometheus.Counter
	airGapPkgs        map[string]*prometheus.CounterVec // by op: import, export
	airGapBytes       map[string]prometheus.Counter
	modules           moduleMetrics     // modules.go
	retention         retentionMetrics  // retention.go
	cacheCheck        cacheCheckMetrics // cachecheck.go
	config            reloadMetrics     // config.go: the configuration file's reloads
	tokens            reloadMetrics     // config.go: the client tokens file's reloads
	trust             reloadMetrics     // config.go: the trusted keys files' reloads
	cert              reloadMetrics     // config.go: the TLS certificate's reloads
	originCA          reloadMetrics     // config.go: origin_ca_file's readings
	policy            policyMetrics     // policy.go
	releases          releasesMetrics   // releases.go
	auth              authMetrics       // auth.go
	conns             connMetrics       // connections.go

	// Children of the vectors bound to their labels, for what every
	// request records: WithLabelValues hashes the values and looks them
	// up under a lock each time. Read-only after New.
	routes map[string]*routeMetrics
	hits   map[string]prometheus.Counter
	misses map[string]prometheus.Counter
}

// routeMetrics are one route's request collectors.
type routeMetrics struct {
	duration prometheus.Observer
	bytes    prometheus.Counter
	aborted  prometheus.Counter
	requests *prometheus.CounterVec // for codes not yet in codes
	route    string
	mu       sync.Mutex // serialises additions to codes
	// codes holds the request counter of each status code served so
	// far; replaced, never modified, under mu.
	codes atomic.Pointer[map[int]prometheus.Counter]
}

// counter returns the request counter of code.
func (r *routeMetrics) counter(code int) prometheus.Counter {
	if c, ok := (*r.codes.Load())[code]; ok {
		return c
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.codes.Load()
	if c, ok := old[code]; ok {
		return c
	}
	c := r.requests.WithLabelValues(r.route, strconv.Itoa(code))
	codes := make(map[int]prometheus.Counter, len(old)+1)
	for k, v := range old {
		codes[k] = v
	}
	codes[code] = c
	r.codes.Store(&codes)
	return c
}

// CacheStats reports what the cache holds, read at scrape time.
type CacheStats func() (archives int, bytes int64)

// Options configures New.
type Options struct {
	Version  string   // reported in tfmirror_build_info
	Revision string   // the VCS revision, also reported there ("" when unknown)
	Origins  []string // allowed origin hosts, pre-created as label values
	// Cache, if set, backs the tfmirror_cache_archives and
	// tfmirror_cache_stored_bytes gauges.
	Cache CacheStats
	// Damaged, if set, backs the tfmirror_cache_damaged_archives gauge:
	// the archives held in the cache that a read found damaged where they
	// are stored, kept and not served (cache.Blobs.DamagedArchives).
	// Default nil: no such gauge.
	Damaged func() int
	// MaxBytes is the configured cache size limit (0 = unlimited).
	MaxBytes int64
	// Disk, if set, backs the tfmirror_cache_disk_free_bytes,
	// tfmirror_cache_disk_reserve_bytes and tfmirror_cache_writable
	// gauges: free space on the cache's file system and the reserve
	// (negative when not checked), and whether the cache writes, as
	// /readyz finds it. Default nil: no such gauges.
	Disk DiskStats
	// Budget, if set, backs tfmirror_cache_budget_waits_total and
	// tfmirror_cache_budget_refused_total: archive writes that waited for
	// the data directory's disk budget, and those that gave up (the
	// archive was served without being cached). Default nil: none.
	Budget BudgetStats
	// Circuits, if set, backs tfmirror_origin_circuit_open at scrape
	// time: an open breaker whose cooldown passed reads 0 without a
	// request to tell of it. Default nil: the gauge is what CircuitOpen
	// last said.
	Circuits CircuitState
	// SharedDown, if set, backs tfmirror_shared_store_down at scrape
	// time: whether the shared store's breaker fails calls fast now (a
	// cooldown passes without a call to tell of it). Default nil: the
	// gauge is what SharedStoreDown last said.
	SharedDown func() bool
	// Certificate, if set, backs
	// tfmirror_tls_certificate_expiry_timestamp_seconds: when the
	// certificate served expires, read at scrape time. Default nil (no
	// TLS): no such gauge.
	Certificate func() time.Time
}

// BudgetStats reports the cache's disk-budget counters, read at scrape time.
type BudgetStats func() (waits, refused int64)

// DiskStats reports the cache's disk space, read at scrape time.
type DiskStats func() (free, reserve int64, writable bool)

// New registers tfmirror's collectors, the Go and process collectors, and
// the build-info gauge on reg.
func New(reg *prometheus.Registry, opts Options) (*Metrics, error) {
	m := &Metrics{
		reg: reg,
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfmirror_http_requests_total", Help: "HTTP requests served, by route and status code.",
		}, []string{"route", "code"}),
		httpAborted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfmirror_http_responses_aborted_total", Help: "Responses the mirror broke off after their status was sent (a download that failed its verification or found its cached copy damaged as it streamed, a shutdown that cut it off), by route; counted under their status code in tfmirror_http_requests_total too.",
		}, []string{"route"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tfmirror_http_request_duration_seconds", Help: "Time to serve HTTP requests, by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"route"}),
		httpBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfmirror_http_response_bytes_total", Help: "Response body bytes sent, by route.",
		}, []string{"route"}),
		cacheHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfmirror_cache_hits_total", Help: "Lookups answered from the cache, by kind.",
		}, []string{"kind"}),
		cacheMisses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfmirror_cache_misses_total", Help: "Lookups that needed the origin, by kind.",
		}, []string{"kind"}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tfmirror_cache_evictions_total", Help: "Archives evicted to stay under the cache size limit.",
		}),
		writeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tfmirror_cache_write_errors_total", Help: "Data that could not be written to the cache.",
		}),
		damagedReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tfmirror_cache_damaged_reads_total", Help: "Cached archives a read found damaged where they are stored (a changed or missing chunk: the disk), once per archive.",
		}),
		ociWrongSize: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tfmirror_oci_wrong_size_dropped_total", Help: "Provider versions whose OCI documents were dropped, to be made again, because an archive's verified size differed from the size (as the origin stated it) they were made with.",
		}),
		originReqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfmirror_origin_requests_total", Help: "Requests to origin registries and their download hosts, by origin, operation and outcome.",
		}, []string{"origin", "operation", "outcome"}),
		originDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tfmirror_origin_request_duration_seconds", Help: "Duration of origin requests (for archives: the whole download), by origin and operation.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"origin", "operation"}),
		originBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfmirror_origin_bytes_total", Help: "Archive bytes fetched from origins, by origin.",
		}, []string{"origin"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tfmirror_origin_inflight_archive_fetches", Help: "Archive downloads from origins under way.",
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tfmirror_origin_waiting_archive_fetches", Help: "Archive downloads from origins and module package fetches from source hosts waiting for one of the --max-archive-downloads slots, each while a client waits for it.",
		}),
		coalesced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfmirror_coalesced_requests_total", Help: "Requests that joined an origin fetch already under way instead of starting one, by kind.",
		}, []string{"kind"}),
		verifyFails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfmirror_verification_failures_total", Help: "Packages refused by verification, and cached packages found damaged, by reason.",
		}, []string{"reason"}),
		stale: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfmirror_stale_responses_total", Help: "Cached answers served because the origin failed, by kind.",
		}, []string{"kind"}),
		circuitOpen: newCircuitGauge(opts.Circuits),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tfmirror_origin_last_success_timestamp_seconds", Help: "When a request to an origin last succeeded (a not-found answer is one), as a Unix time; absent before the first.",
		}, []string{"origin"}),
		notFoundCached: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfmirror_origin_not_found_cached_total", Help: "Questions answered \"not found\" from the origin's own recent 404 to the same question (not_found_ttl), without asking the origin again, by origin.",
		}, []string{"origin"}),
		notFoundEntries: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tfmirror_origin_not_found_entries", Help: "An origin's 404 answers held in memory to be given again without asking it (not_found_ttl), by origin.",
		}, []string{"origin"}),
		sharedReqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfmirror_shared_store_requests_total", Help: "Calls to the shared store (--shared-store), by operation and outcome; \"unavailable\" calls were not made because its circuit breaker was open.",
		}, []string{"operation", "outcome"}),
		sharedDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tfmirror_shared_store_request_duration_seconds", Help: "Duration of calls to the shared store, archive bodies excluded but uploads included, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 8),
		}, []string{"operation"}),
		sharedDown: newBreakerGauge(sharedDownOpts, opts.SharedDown),
		sharedConditional: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tfmirror_shared_store_conditional_writes", Help: "1 when the shared store was found to honour conditional writes (If-None-Match, If-Match), 0 when it ignores them (replicas then do not coordinate origin downloads through it), -1 before it was probed.",
		}),
		sharedRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfmirror_shared_rejected_total", Help: "Objects read from the shared store that failed authentication (written without the replicas' shared store key, changed, moved from another name, or written by an earlier release), by kind: ignored, and taken from the origin instead.",
		}, []string{"kind"}),
		syncPackages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfmirror_sync_packages_total", Help: "Packages (one version, one platform) that tfmirror sync asked this mirror to cache, by outcome: fetched, cached (already), failed.",
		}, []string{"outcome"}),
		syncBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tfmirror_sync_bytes_total", Help: "Archive bytes fetched from origins for tfmirror sync.",
		}),
	}
	m.airGapPkgs = map[string]*prometheus.CounterVec{
		"import": prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfmirror_import_packages_total", Help: "Packages (one version, one platform; a module version, a CLI archive) that tfmirror import loaded through this mirror, by outcome: imported, present (already), failed (a refused version counts once).",
		}, []string{"outcome"}),
		"export": prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tfmirror_export_packages_total", Help: "Packages (one version, one platform; a module version, a CLI archive) that tfmirror export wrote through this mirror, by outcome: exported, present (already in the export), failed (a failed version counts once).",
		}, []string{"outcome"}),
	}
	m.airGapBytes = map[string]prometheus.Counter{
		"import": prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tfmirror_import_bytes_total", Help: "Archive bytes that tfmirror import added to the cache through this mirror.",
		}),
		"export": prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tfmirror_export_bytes_total", Help: "Archive bytes that tfmirror export wrote through this mirror.",
		}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tfmirror_build_info", Help: "Always 1; labels say which build is running.",
	}, []string{"version", "revision", "goversion"})
	build.WithLabelValues(opts.Version, opts.Revision, runtime.Version()).Set(1)
	m.sharedConditional.Set(-1)
	maxBytes := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tfmirror_cache_max_bytes", Help: "Configured cache size limit in bytes (0 = unlimited).",
	})
	maxBytes.Set(float64(opts.MaxBytes))

	cs := []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		build, maxBytes,
		m.httpRequests, m.httpAborted, m.httpDuration, m.httpBytes, m.cacheHits, m.cacheMisses, m.evictions,
		m.writeErrors, m.damagedReads, m.ociWrongSize, m.originReqs, m.originDur, m.originBytes, m.inflight, m.waiting, m.coalesced,
		m.verifyFails, m.stale, m.circuitOpen, m.lastSuccess, m.notFoundCached, m.notFoundEntries, m.sharedReqs, m.sharedDur, m.sharedDown, m.sharedConditional, m.sharedRejected, m.syncPackages, m.syncBytes,
		m.airGapPkgs["import"], m.airGapBytes["import"], m.airGapPkgs["export"], m.airGapBytes["export"],
	}
	cs = append(cs, m.modules.collectors()...)
	cs = append(cs, m.retention.collectors()...)
	cs = append(cs, m.cacheCheck.collectors()...)
	cs = append(cs, m.config.configCollectors()...)
	cs = append(cs, m.tokens.tokensCollectors()...)
	cs = append(cs, m.trust.trustCollectors()...)
	cs = append(cs, m.cert.certCollectors()...)
	cs = append(cs, m.originCA.originCACollectors()...)
	cs = append(cs, m.policy.collectors()...)
	cs = append(cs, m.releases.collectors()...)
	cs = append(cs, m.auth.collectors()...)
	cs = append(cs, m.conns.collectors()...)
	if opts.Cache != nil {
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "tfmirror_cache_archives", Help: "Archives held in the cache.",
			}, func() float64 { n, _ := opts.Cache(); return float64(n) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "tfmirror_cache_stored_bytes", Help: "Bytes of archives held in the cache.",
			}, func() float64 { _, b := opts.Cache(); return float64(b) }),
		)
	}
	if opts.Certificate != nil {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tfmirror_tls_certificate_expiry_timestamp_seconds", Help: "When the certificate the mirror's port serves expires (Unix seconds): the operator's (--tls-cert) as last put in force, or the generated one. Absent with --insecure-http.",
		}, func() float64 {
			if t := opts.Certificate(); !t.IsZero() {
				return float64(t.Unix())
			}
			return 0
		}))
	}
	if opts.Damaged != nil {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tfmirror_cache_damaged_archives", Help: "Archives held in the cache that a read found damaged where they are stored: kept, not served, until a verified copy replaces them.",
		}, func() float64 { return float64(opts.Damaged()) }))
	}
	if opts.Budget != nil {
		cs = append(cs,
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "tfmirror_cache_budget_waits_total", Help: "Archive writes that waited for value-log GC to bring the data directory under its budget (1.25 × --cache-max-bytes + the reserve).",
			}, func() float64 { w, _ := opts.Budget(); return float64(w) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "tfmirror_cache_budget_refused_total", Help: "Archives served without being cached because the data directory stayed at its budget.",
			}, func() float64 { _, r := opts.Budget(); return float64(r) }),
		)
	}
	if opts.Disk != nil {
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "tfmirror_cache_disk_free_bytes", Help: "Free bytes on the cache's file system at the last check (-1: not checked).",
			}, func() float64 { f, _, _ := opts.Disk(); return float64(f) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "tfmirror_cache_disk_reserve_bytes", Help: "Free bytes below which nothing is written to the cache: --disk-reserve plus Badger's LSM tree (-1: not checked).",
			}, func() float64 { _, r, _ := opts.Disk(); return float64(r) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "tfmirror_cache_writable", Help: "1 while the cache stores what it is given, 0 while it does not (disk below the reserve, or its test write failed): 0 exactly when /readyz answers 503 for the cache.",
			}, func() float64 {
				if _, _, ok := opts.Disk(); ok {
					return 1
				}
				return 0
			}),
		)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}

	m.routes = make(map[string]*routeMetrics, len(Routes))
	for _, r := range Routes {
		rm := &routeMetrics{
			duration: m.httpDuration.WithLabelValues(r),
			bytes:    m.httpBytes.WithLabelValues(r),
			aborted:  m.httpAborted.WithLabelValues(r),
			requests: m.httpRequests,
			route:    r,
		}
		rm.codes.Store(&map[int]prometheus.Counter{})
		m.routes[r] = rm
	}
	m.hits = make(map[string]prometheus.Counter, len(CacheKinds))
	m.misses = make(map[string]prometheus.Counter, len(CacheKinds))
	for _, k := range CacheKinds {
		m.hits[k] = m.cacheHits.WithLabelValues(k)
		m.misses[k] = m.cacheMisses.WithLabelValues(k)
	}
	for _, k := range CoalescedKinds {
		m.coalesced.WithLabelValues(k)
	}
	for _, k := range StaleKinds {
		m.stale.WithLabelValues(k)
	}
	for _, r := range Reasons {
		m.verifyFails.WithLabelValues(r)
	}
	for _, o := range SyncOutcomes {
		m.syncPackages.WithLabelValues(o)
	}
	for _, k := range SharedRejectedKinds {
		m.sharedRejected.WithLabelValues(k)
	}
	for _, o := range ImportOutcomes {
		m.airGapPkgs["import"].WithLabelValues(o)
	}
	for _, o := range ExportOutcomes {
		m.airGapPkgs["export"].WithLabelValues(o)
	}
	for _, o := range opts.Origins {
		m.originBytes.WithLabelValues(o)
		m.circuitOpen.set(o, false)
		m.notFoundCached.WithLabelValues(o)
		m.notFoundEntries.WithLabelValues(o)
		for _, op := range Operations {
			m.originDur.WithLabelValues(o, op)
			for _, out := range Outcomes {
				m.originReqs.WithLabelValues(o, op, out)
			}
		}
	}
	return m, nil
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// ObserveRequest records one served HTTP request; aborted when the
// mirror broke its response off after sending its status.
func (m *Metrics) ObserveRequest(route string, code int, d time.Duration, bytes int64, aborted bool) {
	r, ok := m.routes[route]
	if !ok {
		m.httpRequests.WithLabelValues(route, strconv.Itoa(code)).Inc()
		m.httpDuration.WithLabelValues(route).Observe(d.Seconds())
		m.httpBytes.WithLabelValues(route).Add(float64(bytes))
		if aborted {
			m.httpAborted.WithLabelValues(route).Inc()
		}
		return
	}
	r.counter(code).Inc()
	r.duration.Observe(d.Seconds())
	r.bytes.Add(float64(bytes))
	if aborted {
		r.aborted.Inc()
	}
}

// CacheLookup records a cache hit or miss of kind.
func (m *Metrics) CacheLookup(kind string, hit bool) {
	bound, vec := m.misses, m.cacheMisses
	if hit {
		bound, vec = m.hits, m.cacheHits
	}
	if c, ok := bound[kind]; ok {
		c.Inc()
		return
	}
	vec.WithLabelValues(kind).Inc()
}

// StaleServed records a stale answer of kind.
func (m *Metrics) StaleServed(kind string) { m.stale.WithLabelValues(kind).Inc() }

// Coalesced records a request that joined a fetch under way.
func (m *Metrics) Coalesced(kind string) { m.coalesced.WithLabelValues(kind).Inc() }

// VerificationFailed records a package refused for reason.
func (m *Metrics) VerificationFailed(reason string) { m.verifyFails.WithLabelValues(reason).Inc() }

// ArchiveFetchStarted records an archive download; done ends it.
func (m *Metrics) ArchiveFetchStarted() (done func()) {
	m.inflight.Inc()
	m.fetching.Add(1)
	return func() {
		m.fetching.Add(-1)
		m.inflight.Dec()
	}
}

// ArchiveFetchWaiting records an archive download waiting for a download
// slot; done ends the wait.
func (m *Metrics) ArchiveFetchWaiting() (done func()) {
	m.waiting.Inc()
	return m.waiting.Dec
}

// ArchiveFetches returns how many archive downloads from origins are
// under way (tfmirror_origin_inflight_archive_fetches), for the shutdown's
// log line.
func (m *Metrics) ArchiveFetches() int64 { return m.fetching.Load() }

// Synced records a package tfmirror sync asked for, with its outcome (one
// of SyncOutcomes) and the archive bytes fetched from the origin for it.
func (m *Metrics) Synced(outcome string, fetchedBytes int64) {
	m.syncPackages.WithLabelValues(outcome).Inc()
	m.syncBytes.Add(float64(fetchedBytes))
}

// AirGap records what a tfmirror import or export (op "import" or
// "export") run through this mirror did: packages by outcome (of
// ImportOutcomes or ExportOutcomes) and the archive bytes imported or
// written.
func (m *Metrics) AirGap(op string, packages map[string]int, bytes int64) {
	vec, ok := m.airGapPkgs[op]
	if !ok {
		return
	}
	for outcome, n := range packages {
		vec.WithLabelValues(outcome).Add(float64(n))
	}
	m.airGapBytes[op].Add(float64(bytes))
}

// CacheWriteFailed records data that could not be stored.
func (m *Metrics) CacheWriteFailed() { m.writeErrors.Inc() }

// CacheDamagedRead counts a cached archive a read found damaged where it
// is stored (cache.Options.OnDamaged): the disk's fault, not an origin's.
func (m *Metrics) CacheDamagedRead() { m.damagedReads.Inc() }

// OCIWrongSizeDropped records a provider version whose OCI documents
// were dropped: made with an archive size its verified archive does not
// have.
func (m *Metrics) OCIWrongSizeDropped() { m.ociWrongSize.Inc() }

// Evicted records n archives evicted.
func (m *Metrics) Evicted(n int) { m.evictions.Add(float64(n)) }

// OriginRequest records one request to an origin (or its download host,
// labelled with the origin it serves) with its outcome and duration.
func (m *Metrics) OriginRequest(origin, operation, outcome string, d time.Duration) {
	m.originReqs.WithLabelValues(origin, operation, outcome).Inc()
	m.originDur.WithLabelValues(origin, operation).Observe(d.Seconds())
	if outcome == "success" || outcome == "not_found" {
		m.lastSuccess.WithLabelValues(origin).SetToCurrentTime()
	}
}

// OriginBytes records archive bytes fetched from origin.
func (m *Metrics) OriginBytes(origin string, n int64) {
	m.originBytes.WithLabelValues(origin).Add(float64(n))
}

// CircuitOpen records that origin's circuit breaker opened or closed
// (Options.Circuits, when set, says at scrape time which it is now).
func (m *Metrics) CircuitOpen(origin string, open bool) { m.circuitOpen.set(origin, open) }

// NotFoundRemembered counts a question answered from origin's
// remembered 404, without an origin request.
func (m *Metrics) NotFoundRemembered(origin string) { m.notFoundCached.WithLabelValues(origin).Inc() }

// NotFoundEntries sets how many of origin's 404 answers are remembered.
func (m *Metrics) NotFoundEntries(origin string, n int) {
	m.notFoundEntries.WithLabelValues(origin).Set(float64(n))
}

// SharedStoreRequest records one call to the shared store.
func (m *Metrics) SharedStoreRequest(op, outcome string, d time.Duration) {
	m.sharedReqs.WithLabelValues(op, outcome).Inc()
	if outcome != "unavailable" {
		m.sharedDur.WithLabelValues(op).Observe(d.Seconds())
	}
}

// SharedStoreConditional records whether the shared store honours
// conditional writes.
func (m *Metrics) SharedStoreConditional(honoured bool) {
	v := 0.0
	if honoured {
		v = 1
	}
	m.sharedConditional.Set(v)
}

// SharedRejectedKinds are the kinds of shared store object
// tfmirror_shared_rejected_total counts (package sharedstore's Kinds).
var SharedRejectedKinds = []string{"archive", "package", "versions", "module", "module_versions", "module_zip",
	"release_time", "oci_version", "oci_digest", "last_use", "record"}

// SharedStoreRejected records an object read from the shared store that
// failed authentication.
func (m *Metrics) SharedStoreRejected(kind string) {
	m.sharedRejected.WithLabelValues(kind).Inc()
}

// sharedDownOpts are tfmirror_shared_store_down's.
var sharedDownOpts = prometheus.GaugeOpts{
	Name: "tfmirror_shared_store_down",
	Help: "1 while the shared store's circuit breaker is open (the replica serves from its cache and the origins alone), 0 otherwise (closed, or its cooldown passed: the next call tries the store).",
}

// SharedStoreDown records that the shared store's circuit breaker opened
// or closed (Options.SharedDown, when set, says at scrape time which it
// is now).
func (m *Metrics) SharedStoreDown(down bool) {
	m.sharedDown.set(down)
}
