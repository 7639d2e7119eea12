package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// row is one line of the results table.
type row struct {
	fig, name, mirror, ref, ratio, target string
	met                                   bool
	info                                  bool // no pass/fail target
}

type machine struct {
	loadStart, loadEnd string
	nginx, terraform   string
}

type report struct {
	cfg      config
	started  time.Time
	rows     []row
	machine  machine
	protocol string
	memNote  bool // VmHWM over the target only because of mapped file pages
}

func newReport(cfg config) *report { return &report{cfg: cfg, started: time.Now().UTC()} }

func (r *report) add(x row) { r.rows = append(r.rows, x) }

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "\n## tfmirror benchmark, %s\n\n", r.started.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintln(w, "| # | Figure | tfmirror | Reference | Ratio | Target | Met |")
	fmt.Fprintln(w, "|---|--------|----------|-----------|-------|--------|-----|")
	for _, x := range r.rows {
		met := "no"
		switch {
		case x.info:
			met = "—"
		case x.met:
			met = "yes"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", x.fig, x.name, x.mirror, x.ref, x.ratio, x.target, met)
	}
	fmt.Fprintln(w)
	if r.memNote {
		fmt.Fprintln(w, "- Figure 5: VmHWM is over the target only because it counts mapped pages of Badger's value log (page cache); the anonymous peak is under it.")
	}
	fmt.Fprintf(w, "- Machine: %d CPUs (%s), %s RAM, Linux %s, %s\n", runtime.NumCPU(), cpuModel(), memTotal(), kernel(), runtime.Version())
	if r.machine.nginx != "" {
		fmt.Fprintf(w, "- nginx: %s\n", r.machine.nginx)
	}
	if r.machine.terraform != "" {
		fmt.Fprintf(w, "- terraform: %s\n", r.machine.terraform)
	}
	if r.protocol != "" {
		fmt.Fprintf(w, "- Protocol (same client for both): %s\n", r.protocol)
	}
	fmt.Fprintf(w, "- Load average (1, 5, 15 min) at start: %s; at end: %s\n", r.machine.loadStart, r.machine.loadEnd)
	fmt.Fprintf(w, "- Flags: %s\n", strings.Join(os.Args[1:], " "))
}

func mbps(bps float64) string { return fmt.Sprintf("%.0f MB/s", bps/1e6) }

func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.0f ms", float64(d)/1e6)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func ratio(x float64) string { return fmt.Sprintf("%.2fx", x) }

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == "MemTotal" {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	return "?"
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		out, _ := exec.Command("uname", "-r").Output()
		return strings.TrimSpace(string(out))
	}
	return strings.TrimSpace(string(b))
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
