package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// requestFDs are the file descriptors of the process that a request to
// the mirror listening on port can leave open: sockets with an end at
// port (the clients' connections, both ends, and the listener), and
// files (spool and temporary files, and the cache's own). Not counted:
// the mirror's pooled connections to the origin (both ends in this
// process), kept for the next download as they should be, and the
// other sockets and pipes of the process.
func requestFDs(t *testing.T, port int) (sockets, files int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	atPort := socketsAtPort(t, port)
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // closed since the listing
		}
		switch {
		case strings.HasPrefix(target, "socket:["):
			if atPort[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] {
				sockets++
			}
		case strings.HasPrefix(target, "/"):
			files++
		}
	}
	return sockets, files
}

// socketsAtPort are the inodes of the TCP sockets with an end at port.
func socketsAtPort(t *testing.T, port int) map[string]bool {
	t.Helper()
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 {
				continue
			}
			for _, addr := range f[1:3] {
				if i := strings.LastIndexByte(addr, ':'); i >= 0 {
					if p, err := strconv.ParseUint(addr[i+1:], 16, 16); err == nil && int(p) == port {
						inodes[f[9]] = true
					}
				}
			}
		}
	}
	return inodes
}

// codes are the status codes counted in tfmirror_http_requests_total for
// route, with their counts.
func codes(t *testing.T, tm *testMirror, route string) map[string]float64 {
	t.Helper()
	mfs, err := tm.m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "tfmirror_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var r, c string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "route":
					r = l.GetValue()
				case "code":
					c = l.GetValue()
				}
			}
			if r == route {
				out[c] += counterValue(m)
			}
		}
	}
	return out
}

func counterValue(m *dto.Metric) float64 { return m.GetCounter().GetValue() }

// requestGoroutines counts the goroutines of the process that serve a
// client's HTTP/1.1 connection to the mirror (--insecure-http) or run an
// archive download (the mirror's fetcher): those a request leaves behind
// if anything is not released. Not counted: the background loops of the
// mirrors and tests of the package, which come and go on their own
// clocks, and the mirror's pooled HTTP/2 connections to the origin
// (both ends), kept for the next download as they should be.
func requestGoroutines() int {
	buf := make([]byte, 8<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if (strings.Contains(g, "net/http.(*conn).serve") && !strings.Contains(g, "http2")) ||
			strings.Contains(g, "/mirror/fetch.") {
			n++
		}
	}
	return n
}

// TestManyColdClientsAllLeave sends 200 requests at once for the archives
// of 200 versions of one provider through a mirror whose origin holds
// every archive download half way, then has every client go away at
// once: the downloads from the origin stay within their slots, none of
// the requests is counted as a server error, and once the origin lets
// the downloads end, no goroutine or file descriptor of them is left.
// Not parallel: it counts the process's goroutines and descriptors.
func TestManyColdClientsAllLeave(t *testing.T) {
	if testing.Short() {
		t.Skip("200 clients")
	}
	const clients, slots = 200, 16
	origin := newOrigin(t, fakeorigin.Options{ArchiveSize: 64 << 10})
	var vs []string
	for i := range clients {
		vs = append(vs, fmt.Sprintf("1.%d.0", i))
	}
	origin.AddProvider("hashicorp", "random", vs, []string{"linux_amd64"})
	tm := startMirror(t, origin, t.TempDir(), nil, "--insecure-http", "--max-archive-downloads", fmt.Sprint(slots))
	// The version list cached first, as a client's first request would.
	if resp, body, err := tm.get(tfRegistry + "/hashicorp/random/index.json"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("index: %v %s", err, body)
	}
	tm.client.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond)
	u, err := url.Parse(tm.url)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	goroutines := requestGoroutines()
	sockets, files := requestFDs(t, port)

	release := origin.GateArchives()
	defer release()
	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for _, v := range vs {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, tm.url+archiveURL("random", v, "linux_amd64"), nil)
			if err != nil {
				errs <- err
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				return // gone before an answer
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("%s: %s", v, resp.Status)
			}
		})
	}
	wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := origin.WaitGated(wctx, slots); err != nil {
		t.Fatalf("%d archive downloads held at the origin, want %d: %v", origin.Gated(), slots, err)
	}
	// Every request has reached the mirror's fetcher.
	for deadline := time.Now().Add(time.Minute); metric(t, tm.m.registry, "tfmirror_origin_waiting_archive_fetches") < clients-slots; {
		if time.Now().After(deadline) {
			t.Fatalf("%v downloads wait for a slot, want %d", metric(t, tm.m.registry, "tfmirror_origin_waiting_archive_fetches"), clients-slots)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := origin.Gated(); n > slots {
		t.Errorf("%d archive downloads at the origin at once, want at most %d", n, slots)
	}
	leave()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	client.CloseIdleConnections()
	release()
	tm.idle()
	// Every request logged and counted, none as a server error.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		var n float64
		for _, c := range codes(t, tm, "archive") {
			n += c
		}
		if n >= clients {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v archive requests counted, want %d", n, clients)
		}
	}
	for code, n := range codes(t, tm, "archive") {
		if strings.HasPrefix(code, "5") {
			t.Errorf("%v archive requests counted as %s when their clients went away", n, code)
		}
	}
	if n := metric(t, tm.m.registry, "tfmirror_origin_waiting_archive_fetches"); n != 0 {
		t.Errorf("%v downloads still wait for a slot", n)
	}
	deadline := time.Now().Add(time.Minute)
	fdsLeft := func() bool {
		// The cache may open a table or log file of its own meanwhile.
		s, f := requestFDs(t, port)
		return s > sockets || f > files+5
	}
	for (requestGoroutines() > goroutines || fdsLeft()) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := requestGoroutines(); n > goroutines {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines of requests and downloads once every client left and the downloads ended, %d before:\n%s", n, goroutines, buf[:runtime.Stack(buf, true)])
	}
	if s, f := requestFDs(t, port); s > sockets || f > files+5 {
		t.Errorf("%d sockets at the mirror's port and %d open files once every client left and the downloads ended, %d and %d before", s, f, sockets, files)
	}
	s, f := requestFDs(t, port)
	t.Logf("codes: %v; sockets at the mirror's port %d (%d before), open files %d (%d before)", codes(t, tm, "archive"), s, sockets, f, files)
}
