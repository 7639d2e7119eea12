package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// Figure 9: disk use follows the cache. A tfmirror limited to
// -disk-limit-mib (default reserve) pulls twice that through from the fake
// origin, in 8 MiB archives, one after the other, so that it evicts half;
// then the data directory is measured until it is within 1.25 times the
// cached bytes plus the reserve, for up to 2 minutes.
func (e *env) diskUse(ctx context.Context) error {
	limit := int64(e.cfg.DiskLimitMiB) << 20
	run, err := e.startChurn(ctx, "disk-use", "churn", limit)
	if err != nil {
		return err
	}
	defer run.close()
	origin, m, vs, dataDir := run.origin, run.m, run.vs, run.dataDir
	c := newClient(e.pool, 2)
	defer closeIdle(c)
	progress("figure 9: pulling %d archives of %d MiB through a mirror limited to %d MiB", len(vs), churnArchiveMiB, e.cfg.DiskLimitMiB)
	for _, v := range vs {
		if _, err := get(ctx, c, m.url+origin.Addr+"/bench/churn/"+v+".json"); err != nil {
			return err
		}
		if _, _, err := download(ctx, c, m.url+zipPath(origin.Addr, "bench", "churn", v), false); err != nil {
			return err
		}
	}
	// The last archive is committed once the cache serves it.
	if err := waitHit(ctx, c, m.url+zipPath(origin.Addr, "bench", "churn", vs[len(vs)-1])); err != nil {
		return err
	}
	cacheDir := filepath.Join(dataDir, "cache")
	t0 := time.Now()
	after := dirBytes(cacheDir)
	var cached, used int64
	met := false
	for time.Since(t0) < 2*time.Minute {
		body, err := get(ctx, c, m.url+"?format=json&limit=1")
		if err != nil {
			return err
		}
		var st struct {
			Bytes int64 `json:"cached_bytes"`
		}
		if err := json.Unmarshal(body, &st); err != nil {
			return err
		}
		cached, used = st.Bytes, dirBytes(cacheDir)
		if used <= cached+cached/4+cache.DefaultDiskReserve {
			met = true
			break
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	took := time.Since(t0)
	// And once the collection that met the bound has run its course.
	if err := sleep(ctx, 30*time.Second); err != nil {
		return err
	}
	later := dirBytes(cacheDir)
	progress("  data directory %s right after, %s after %s; %s cached", mib(after), mib(used), took.Round(time.Millisecond), mib(cached))
	e.report.add(row{
		fig: "9", name: fmt.Sprintf("Disk use: %d archives of %d MiB pulled through a mirror limited to %d MiB", len(vs), churnArchiveMiB, e.cfg.DiskLimitMiB),
		mirror: fmt.Sprintf("data directory %s right after the last download; %s (%.2fx the cached %s) %s after it, %s 30 s later", mib(after), mib(used),
			float64(used)/float64(max(cached, 1)), mib(cached), took.Round(100*time.Millisecond), mib(later)),
		ref:   fmt.Sprintf("bound: 1.25 × cached + reserve (%s) = %s", mib(cache.DefaultDiskReserve), mib(cached+cached/4+cache.DefaultDiskReserve)),
		ratio: "—", target: "within the bound in 2 min", met: met,
	})
	return nil
}

// waitHit waits until url is served from the cache.
func waitHit(ctx context.Context, c interface {
	Do(*http.Request) (*http.Response, error)
}, url string) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.Header.Get("X-Tfmirror-Cache") == "hit" {
			return nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s was not cached within a minute", url)
}

// churnRun is a tfmirror limited to limit bytes in front of a fake origin
// of one provider, bench/TYPE, whose versions (vs) hold twice the limit
// in 8 MiB archives: the set-up of figures 9 and 10.
type churnRun struct {
	origin  *fakeorigin.Origin
	m       *mirrorProc
	vs      []string
	dataDir string
}

const churnArchiveMiB = 8

// startChurn starts a churnRun named name (its data directory, log and
// origin CA file are named after it), with the mirror's extra flags. The
// caller calls close.
func (e *env) startChurn(ctx context.Context, name, typ string, limit int64, extra ...string) (*churnRun, error) {
	n := int(2 * limit / (churnArchiveMiB << 20))
	origin, err := fakeorigin.Start(fakeorigin.Options{ArchiveSize: churnArchiveMiB << 20})
	if err != nil {
		return nil, err
	}
	r := &churnRun{origin: origin, dataDir: filepath.Join(e.dir, name)}
	for i := range n {
		r.vs = append(r.vs, fmt.Sprintf("1.0.%d", i))
	}
	origin.AddProvider("bench", typ, r.vs, []string{platform})
	caFile := filepath.Join(e.dir, name+"-origin-ca.pem")
	if err := os.WriteFile(caFile, origin.CACertPEM, 0o644); err != nil {
		r.close()
		return nil, err
	}
	args := append([]string{"--data-dir", r.dataDir, "--allowed-origins", origin.Addr, "--allow-private-origins",
		"--cache-max-bytes", fmt.Sprint(limit), "--tls-cert", e.tls.Cert, "--tls-key", e.tls.Key}, extra...)
	if r.m, err = startMirror(ctx, e.bin, e.dir, name+".log", args, []string{"SSL_CERT_FILE=" + caFile}); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// close stops the mirror and the origin and removes the data directory.
func (r *churnRun) close() {
	if r.m != nil {
		r.m.stop(syscall.SIGTERM, 30*time.Second)
	}
	r.origin.Close()
	os.RemoveAll(r.dataDir)
}
