package metrics

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestDocsDescribeEveryMetric keeps the metrics table of docs/metrics.md
// in step with what the package registers: every tfmirror_* family has a row, and
// every row names a family that exists.
func TestDocsDescribeEveryMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, everySource())
	if err != nil {
		t.Fatal(err)
	}
	// Vectors without pre-created series appear once observed.
	m.ObserveRequest("index", 200, time.Millisecond, 1, false)
	m.SharedStoreRequest("get_archive", "ok", time.Millisecond)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "tfmirror_") {
			names[f.GetName()] = true
		}
	}
	// And whatever the sources name, in case a vector has no series yet.
	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	nameLit := regexp.MustCompile(`Name:\s*"(tfmirror_[a-z0-9_]+)"`)
	for _, src := range sources {
		if strings.HasSuffix(src, "_test.go") {
			continue
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range nameLit.FindAllStringSubmatch(string(data), -1) {
			names[m[1]] = true
		}
	}
	if len(names) < 30 || !names["tfmirror_http_requests_total"] || !names["tfmirror_module_fetches_total"] {
		t.Fatalf("found too few metrics to check: %v", names)
	}

	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	// The table is in the guide's first part, before its first section.
	section, ok := strings.CutPrefix(string(doc), "# Metrics\n")
	if !ok {
		t.Fatal("docs/metrics.md does not begin with its Metrics title")
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(tfmirror_[a-z0-9_]+)` \\|").FindAllStringSubmatch(section, -1) {
		rows[m[1]] = true
	}
	var missing, stale []string
	for n := range names {
		if !rows[n] {
			missing = append(missing, n)
		}
	}
	for n := range rows {
		if !names[n] {
			stale = append(stale, n)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	for _, n := range missing {
		t.Errorf("docs/metrics.md's metrics table has no row for %s", n)
	}
	for _, n := range stale {
		t.Errorf("docs/metrics.md's metrics table has a row for %s, which the metrics package does not register", n)
	}
}

// The series the two counters of kinds hold from start are those of the
// kinds docs/metrics.md names in their rows, no more: an alert or a
// dashboard built on the doc finds each series, and no series of a kind
// that never moves (the cache's kinds that are never served stale or
// joined: an archive is never served stale) stands beside them.
func TestKindSeriesAsDocumented(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(reg, Options{Version: "test"}); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tfmirror_stale_responses_total", "tfmirror_coalesced_requests_total"} {
		var series []string
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "kind" {
						series = append(series, l.GetValue())
					}
				}
			}
		}
		row := docRow(string(doc), name)
		_, desc, _ := strings.Cut(row, "`kind` |")
		var documented []string
		for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(desc, -1) {
			documented = append(documented, m[1])
		}
		sort.Strings(series)
		sort.Strings(documented)
		if strings.Join(series, " ") != strings.Join(documented, " ") {
			t.Errorf("%s: series at start %v, kinds docs/metrics.md names %v", name, series, documented)
		}
	}
}

// TestDocsSayTheSentinelValues: a gauge whose help gives a value a
// meaning of its own (-1, not checked or not probed) has it said in its
// row of docs/metrics.md too, so that a dashboard or an alert built on
// the doc does not read -1 as a measure (tfmirror_cache_disk_reserve_bytes
// said nothing of its -1 with --disk-reserve 0).
func TestDocsSayTheSentinelValues(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(reg, everySource()); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "tfmirror_") || !strings.Contains(f.GetHelp(), "-1") {
			continue
		}
		checked++
		row := docRow(string(doc), f.GetName())
		if !strings.Contains(row, "-1") {
			t.Errorf("%s: its help says what -1 means (%q); its row of docs/metrics.md does not: %s", f.GetName(), f.GetHelp(), row)
		}
	}
	if checked < 3 {
		t.Errorf("found %d gauges whose help names -1; the check reads them wrong", checked)
	}
}

// everySource is the Options of a package whose every gauge read at
// scrape is registered (each source set), as serve's are.
func everySource() Options {
	return Options{
		Version: "test", Origins: []string{"registry.terraform.io"},
		Cache:   func() (int, int64) { return 0, 0 },
		Disk:    func() (int64, int64, bool) { return 0, 0, true },
		Damaged: func() int { return 0 },
	}
}

// docRow is the row of the metric name in docs/metrics.md's table doc,
// or "" when it has none.
func docRow(doc, name string) string {
	return regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(name) + "` \\|.*$").FindString(doc)
}
