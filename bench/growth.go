package main

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// growthReference is the cache size figure 8 compares index.json and
// VERSION.json against: "as fast as with 10 packages".
const growthReference = 10

// growthResult is figure 8's measurement of one cache size.
type growthResult struct {
	packages, providers int
	write               time.Duration // writing the fixture (not a figure of tfmirror's)
	start               time.Duration // exec to the first answer
	memStart, memStatus mem           // after start-up settled; after the status views
	statusHTML          []time.Duration
	statusJSON          []time.Duration
	index, version      time.Duration // medians
	importT, exportT    time.Duration
	disk                int64 // data directory, allocated bytes
}

// Figure 8: what start-up, memory, the status page, warm JSON, import and
// export cost as the cache grows. For each size, a new data directory is
// filled with that many tiny in-house packages (writeFixture), and a new
// tfmirror serves it.
func (e *env) growth(ctx context.Context) error {
	sizes := []int{growthReference}
	for _, s := range strings.Split(e.cfg.GrowthSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("-growth-sizes: %q is not a number of packages", s)
		}
		sizes = append(sizes, n)
	}
	var ref growthResult
	for i, n := range sizes {
		r, err := e.growthAt(ctx, n)
		if err != nil {
			return fmt.Errorf("%d packages: %w", n, err)
		}
		if i == 0 {
			ref = r
			continue
		}
		e.report.add(growthRow(r, ref))
	}
	return nil
}

func growthRow(r, ref growthResult) row {
	status := max(slices.Max(r.statusHTML), slices.Max(r.statusJSON))
	statusMedian := time.Duration(max(median(durations(r.statusHTML)), median(durations(r.statusJSON))))
	rss := max(r.memStart.rss, r.memStatus.rss)
	jsonRatio := max(float64(r.index)/float64(ref.index), float64(r.version)/float64(ref.version))
	// The status target is the median view's: on a shared machine a
	// single request can wait for the CPU longer than the page takes.
	met := r.start < time.Second && rss < 100<<20 && statusMedian < 50*time.Millisecond && jsonRatio <= 1.5
	return row{
		fig:  "8",
		name: fmt.Sprintf("%d in-house packages (%d providers × %d versions × %d platforms)", r.packages, r.providers, fixtureVersions, len(fixturePlatforms)),
		mirror: fmt.Sprintf("start %s; RSS after start %s (anon %s, file %s), after status views %s (anon %s, file %s); "+
			"status page HTML %s, JSON %s (median; slowest %s); index.json %s, VERSION.json %s; import of 1 version %s, export of 1 provider %s; data directory %s",
			ms(r.start), mib(r.memStart.rss), mib(r.memStart.anon), mib(r.memStart.file),
			mib(r.memStatus.rss), mib(r.memStatus.anon), mib(r.memStatus.file),
			ms(time.Duration(median(durations(r.statusHTML)))), ms(time.Duration(median(durations(r.statusJSON)))), ms(status),
			usec(r.index), usec(r.version), ms(r.importT), ms(r.exportT), mib(r.disk)),
		ref: fmt.Sprintf("%d packages: index.json %s, VERSION.json %s; start %s, RSS %s", ref.packages,
			usec(ref.index), usec(ref.version), ms(ref.start), mib(max(ref.memStart.rss, ref.memStatus.rss))),
		ratio:  ratio(jsonRatio),
		target: "start < 1 s, RSS < 100 MiB, status < 50 ms (median), JSON ≤ 1.5x",
		met:    met,
	}
}

func durations(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d)
	}
	return out
}

func usec(d time.Duration) string {
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

// growthAt measures one cache size.
func (e *env) growthAt(ctx context.Context, n int) (growthResult, error) {
	r := growthResult{packages: n}
	dataDir := filepath.Join(e.dir, fmt.Sprintf("growth-%d", n))
	defer os.RemoveAll(dataDir)
	progress("figure 8: writing %d in-house packages", n)
	t0 := time.Now()
	providers, err := writeFixture(ctx, dataDir, n)
	if err != nil {
		return r, err
	}
	r.providers, r.packages = providers, providers*fixtureVersions*len(fixturePlatforms)
	r.write = time.Since(t0)
	progress("  written in %s", r.write.Round(time.Millisecond))

	c := newClient(e.pool, 2)
	defer closeIdle(c)
	last := fixtureProvider(providers - 1)
	index := fmt.Sprintf("%s/%s/%s/index.json", fixtureHost, fixtureNS, last)
	version := fmt.Sprintf("%s/%s/%s/%s.json", fixtureHost, fixtureNS, last, fixtureVersion(fixtureVersions-1))

	m, start, err := e.startTimed(ctx, fmt.Sprintf("growth-%d.log", n), []string{"--data-dir", dataDir,
		"--allowed-origins", "registry.terraform.io"}, c, index)
	if err != nil {
		return r, err
	}
	defer m.stop(syscall.SIGTERM, 30*time.Second)
	r.start = start
	progress("  started in %s", r.start.Round(time.Millisecond))
	// Whatever start-up left to the background (cleaning up, trimming
	// to the limit) is given time to finish before memory is read.
	if err := sleep(ctx, 5*time.Second); err != nil {
		return r, err
	}
	if r.memStart, err = memStatus(m.pid()); err != nil {
		return r, err
	}

	// The status page, five times as HTML and five as JSON, each view
	// more than a second after the last (what the page may keep of a
	// view does not serve the next).
	for range 5 {
		for _, q := range []string{"", "?format=json"} {
			if err := sleep(ctx, 1100*time.Millisecond); err != nil {
				return r, err
			}
			d, err := timedGet(ctx, c, m.url+q)
			if err != nil {
				return r, err
			}
			if q == "" {
				r.statusHTML = append(r.statusHTML, d)
			} else {
				r.statusJSON = append(r.statusJSON, d)
			}
		}
	}
	if r.memStatus, err = memStatus(m.pid()); err != nil {
		return r, err
	}
	if r.index, err = medianGet(ctx, c, m.url+index, 200); err != nil {
		return r, err
	}
	if r.version, err = medianGet(ctx, c, m.url+version, 200); err != nil {
		return r, err
	}

	// Import one new in-house version, then export one provider, with
	// the CLI, through the serving process's admin socket.
	in := filepath.Join(e.dir, fmt.Sprintf("growth-import-%d", n))
	defer os.RemoveAll(in)
	if err := writeImportDir(in, "imported", "2.0.0"); err != nil {
		return r, err
	}
	if r.importT, err = e.timedCLI(ctx, "import", "--data-dir", dataDir, "--allow-unsigned", in); err != nil {
		return r, err
	}
	out := filepath.Join(e.dir, fmt.Sprintf("growth-export-%d", n))
	defer os.RemoveAll(out)
	if r.exportT, err = e.timedCLI(ctx, "export", "--data-dir", dataDir, "--provider", fixtureHost+"/"+fixtureNS+"/"+last, out); err != nil {
		return r, err
	}
	r.disk = dirBytes(dataDir)
	progress("  RSS %s after start, %s after status views; status %v / %v; index.json %s, VERSION.json %s; import %s, export %s",
		mib(r.memStart.rss), mib(r.memStatus.rss), r.statusHTML, r.statusJSON, usec(r.index), usec(r.version), ms(r.importT), ms(r.exportT))
	return r, nil
}

// startTimed starts a tfmirror with args and returns it once path answers
// 200, with the time from exec to that answer.
func (e *env) startTimed(ctx context.Context, logName string, args []string, c *http.Client, path string) (*mirrorProc, time.Duration, error) {
	args = append(args, "--tls-cert", e.tls.Cert, "--tls-key", e.tls.Key)
	t0 := time.Now()
	m, err := startMirror(ctx, e.bin, e.dir, logName, args, nil)
	if err != nil {
		return nil, 0, err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := get(ctx, c, m.url+path); err == nil {
			return m, time.Since(t0), nil
		} else if time.Now().After(deadline) {
			m.stop(syscall.SIGKILL, 0)
			return nil, 0, err
		}
		if err := sleep(ctx, 2*time.Millisecond); err != nil {
			m.stop(syscall.SIGKILL, 0)
			return nil, 0, err
		}
	}
}

// timedCLI runs `tfmirror args...` and returns how long it took.
func (e *env) timedCLI(ctx context.Context, args ...string) (time.Duration, error) {
	t0 := time.Now()
	out, err := exec.CommandContext(ctx, e.bin, args...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("tfmirror %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return time.Since(t0), nil
}

// writeImportDir writes one in-house version of provider typ (two
// platforms) as `terraform providers mirror` lays it out.
func writeImportDir(dir, typ, version string) error {
	pdir := filepath.Join(dir, fixtureHost, fixtureNS, typ)
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		return err
	}
	for _, pl := range fixturePlatforms {
		name := fmt.Sprintf("terraform-provider-%s_%s_%s.zip", typ, version, pl)
		if err := os.WriteFile(filepath.Join(pdir, name), fixtureArchive(typ, version, pl), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func timedGet(ctx context.Context, c *http.Client, url string) (time.Duration, error) {
	t0 := time.Now()
	_, err := get(ctx, c, url)
	return time.Since(t0), err
}

// medianGet requests url n times in a row and returns the median time.
func medianGet(ctx context.Context, c *http.Client, url string, n int) (time.Duration, error) {
	ds := make([]float64, 0, n)
	for range n {
		d, err := timedGet(ctx, c, url)
		if err != nil {
			return 0, err
		}
		ds = append(ds, float64(d))
	}
	return time.Duration(median(ds)), nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// dirBytes is the disk space the files under dir take (allocated
// blocks where the system says, so that sparse files count what they
// use).
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			n += allocated(fi)
		}
		return nil
	})
	return n
}
