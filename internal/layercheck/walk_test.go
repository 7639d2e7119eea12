package layercheck

import (
	"bufio"
	"debug/elf"
	"debug/gosym"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The walks of one request through the module's own code, measured from an
// execution trace of function entries: delve's `dlv trace` sets a
// tracepoint on every function of the module (built without optimisation
// or inlining, so every call is seen) and prints each entry and return in
// the order they happen. TestWalkFigures runs it over TestWalkColdArchive
// and TestWalkColdOCIManifest and prints, for each walk, its figures and
// its per-file sequence. It needs delve, and runs only when TFMIRROR_DLV
// names its binary (see ARCHITECTURE.md, "One request, top to bottom", for
// the command); CI does not run it.
//
// The rule, the same for both walks:
//
//   - the walk starts at the request's root, the first call of
//     walkRoot on its goroutine, and that goroutine's part ends when the
//     root returns;
//   - the request's goroutines are the root's and every goroutine whose
//     first traced event lies between the root's entry and return (started
//     by the request, such as the engine's archive download, which runs on
//     the engine's context); each of these is counted whole, to its end;
//     goroutines seen before the root (the test's, background loops) are not;
//   - a stop is a call of a function of the module's own production code:
//     its file is in the module, not a _test.go file, not under
//     internal/testrig/ (the fake origin and the rigs), and not compiler
//     generated (method value wrappers "-fm", the "deferwrap" and "gowrap"
//     closures of defer and go statements);
//   - with a boundary (the walk "handler to cache and origin": the files
//     of layers.txt's storage layer and the layers beneath it), a call into
//     a boundary file is a stop and the calls beneath it are not, and a
//     goroutine whose first stop is in a boundary file (started by the
//     origin client or the cache, or by a library beneath them, such as
//     Badger's writes) is not counted; without one, every call counts;
//   - internal/workgroup's functions, which start a goroutine or recover a
//     function's panic for the code that calls them (passThrough), are
//     read as the go statement and deferred recovery they stand for: no
//     stop, the function they run as if called where they are;
//   - a goroutine's stops are read as if its go statement were a call: its
//     whole sequence goes into the walk after the last stop that was traced
//     before its first one;
//   - files are the distinct files of the stops; a return is a stop that
//     enters a file (its file differs from the previous stop's) the walk
//     had been in before.

// passThroughDir holds the functions a walk passes through as it does
// a go statement or a deferred recovery: internal/workgroup's, which
// start a goroutine or run a function with its panic recovered
// (workgroup.Go, workgroup.Guarded, a group's Go). They are not stops,
// nor a boundary, and not a file a call comes back up through: the
// function they run is counted as if called where they are.
const passThroughDir = "internal/workgroup/"

// passThrough is file, or "" (not the module's own, as the rule reads
// it) for a file of passThroughDir.
func passThrough(file string) string {
	if strings.HasPrefix(file, passThroughDir) {
		return ""
	}
	return file
}

// walkRoot is the function every request of the mirror enters first.
const walkRoot = "github.com/tfmirror/tfmirror/v2/proxy.(*Server).ServeHTTP"

// traceEvent is one line of delve's trace: a function's entry or return.
type traceEvent struct {
	pos       int // line number in the trace
	goroutine int
	call      bool // entry, or return
	fn        string
}

var traceLine = regexp.MustCompile(`^(>>?) goroutine\((\d+)\): ([^\s(]+\.(?:\(\*?[^)\s]+\)\.)?[^\s(]+)`)

// parseTrace reads delve's trace output; lines that are not tracepoints
// (the program's own output) are skipped.
func parseTrace(r io.Reader) ([]traceEvent, error) {
	var events []traceEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		m := traceLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var g int
		fmt.Sscan(m[2], &g)
		events = append(events, traceEvent{pos: n, goroutine: g, call: m[1] == ">", fn: m[3]})
	}
	return events, sc.Err()
}

// stop is one call of the walk, with the file of its function.
type stop struct {
	fn, file string
	pos      int
}

// walk is one request's walk.
type walk struct {
	stops      []stop
	goroutines []string // the request's goroutines: each one's first stop and its number of stops
}

// walkFrom cuts the nth (from 0) request out of events by the rule above;
// fileOf names the file of a function, relative to the module's root, or
// "" for a function that is not the module's own production code.
//
// boundary, when not nil, names the files where the walk ends: a call
// into one is a stop, the calls beneath it are not.
func walkFrom(events []traceEvent, root string, nth int, fileOf func(fn string) string, boundary func(file string) bool) (walk, error) {
	start, g, seen := -1, 0, 0
	for i, e := range events {
		if e.call && e.fn == root {
			if seen == nth {
				start, g = i, e.goroutine
				break
			}
			seen++
		}
	}
	if start < 0 {
		return walk{}, fmt.Errorf("the trace has %d calls of %s, not %d", seen, root, nth+1)
	}
	end, depth := len(events), 0
	for i := start; i < len(events); i++ {
		e := events[i]
		if e.goroutine != g || e.fn != root {
			continue
		}
		if e.call {
			depth++
		} else if depth--; depth == 0 {
			end = i
			break
		}
	}
	first := map[int]int{} // goroutine -> index of its first event
	for i, e := range events {
		if _, ok := first[e.goroutine]; !ok {
			first[e.goroutine] = i
		}
	}
	own := func(i int) (stop, bool) {
		e := events[i]
		if !e.call || strings.HasSuffix(e.fn, "-fm") || strings.Contains(e.fn, "deferwrap") || strings.Contains(e.fn, ".gowrap") {
			return stop{}, false
		}
		f := fileOf(e.fn)
		if f == "" || strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "internal/testrig/") {
			return stop{}, false
		}
		return stop{fn: e.fn, file: f, pos: e.pos}, true
	}
	// seq is goroutine sg's stops between events from and to; under a
	// call into a file where the walk ends (boundary), nothing counts.
	seq := func(sg, from, to int) []stop {
		var stops []stop
		type frame struct {
			fn    string
			under bool // at or under a boundary
		}
		var stack []frame // the open calls
		for i := from; i <= to && i < len(events); i++ {
			e := events[i]
			if e.goroutine != sg {
				continue
			}
			if !e.call {
				// delve reports some returns twice (a function with
				// deferred calls): a return closes the innermost open
				// call of its function, and is ignored if there is none.
				for j := len(stack) - 1; j >= 0; j-- {
					if stack[j].fn == e.fn {
						stack = stack[:j]
						break
					}
				}
				continue
			}
			under := len(stack) > 0 && stack[len(stack)-1].under
			s, ok := own(i)
			if ok && !under {
				stops = append(stops, s)
			}
			stack = append(stack, frame{e.fn, under || (ok && boundary != nil && boundary(s.file))})
		}
		return stops
	}
	w := walk{stops: seq(g, start, end)}
	w.goroutines = append(w.goroutines, fmt.Sprintf("%s (%d stops)", root, len(w.stops)))
	// The goroutines started during the request, in the order they start.
	var started []int
	for i := start + 1; i < end; i++ {
		if e := events[i]; first[e.goroutine] == i {
			started = append(started, e.goroutine)
		}
	}
	for _, sg := range started {
		seq := seq(sg, first[sg], len(events)-1)
		if len(seq) == 0 || boundary != nil && boundary(seq[0].file) {
			// A goroutine that starts beneath a boundary (the origin
			// client's dialers, the cache's writes) is that package's own.
			continue
		}
		w.goroutines = append(w.goroutines, fmt.Sprintf("%s (%d stops)", seq[0].fn, len(seq)))
		at := 0
		for j, s := range w.stops {
			if s.pos < events[first[sg]].pos {
				at = j + 1
			}
		}
		w.stops = append(w.stops[:at], append(seq, w.stops[at:]...)...)
	}
	return w, nil
}

// visit is a run of consecutive stops in one file.
type visit struct {
	file  string
	stops int
	again bool // the walk had been in this file before
}

func (w walk) visits() []visit {
	var vs []visit
	been := map[string]bool{}
	for _, s := range w.stops {
		if len(vs) > 0 && vs[len(vs)-1].file == s.file {
			vs[len(vs)-1].stops++
			continue
		}
		vs = append(vs, visit{file: s.file, stops: 1, again: been[s.file]})
		been[s.file] = true
	}
	return vs
}

// figures returns the walk's stops, files and returns to a file left.
func (w walk) figures() (stops, files, returns int) {
	for _, v := range w.visits() {
		if v.again {
			returns++
		} else {
			files++
		}
	}
	return len(w.stops), files, returns
}

// report is the walk's figures, its per-file sequence (a * marks a return
// to a file left) and its stops.
func (w walk) report(name string) string {
	var b strings.Builder
	stops, files, returns := w.figures()
	// Files plus returns are the walk's entries into a file: the unit
	// of issue #33's "stops" (its 116 / 35 / 81 is 35 + 81 entries).
	fmt.Fprintf(&b, "%s: %d stops / %d files / %d returns to a file left (%d file entries)\n", name, stops, files, returns, files+returns)
	for _, v := range w.visits() {
		mark := " "
		if v.again {
			mark = "*"
		}
		fmt.Fprintf(&b, "  %s %-45s %3d\n", mark, v.file, v.stops)
	}
	b.WriteString("  goroutines:\n")
	for _, g := range w.goroutines {
		fmt.Fprintf(&b, "    %s\n", strings.TrimPrefix(g, "github.com/tfmirror/tfmirror/v2/"))
	}
	b.WriteString("  stops:\n")
	for _, s := range w.stops {
		fmt.Fprintf(&b, "    %-45s %s\n", s.file, strings.TrimPrefix(s.fn, "github.com/tfmirror/tfmirror/v2/"))
	}
	return b.String()
}

// binaryFiles maps each function of a Go binary to its file (from its
// line table), relative to root, for the functions under root.
func binaryFiles(binary, root string) (func(string) string, error) {
	f, err := elf.Open(binary)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	text, pcln := f.Section(".text"), f.Section(".gopclntab")
	if text == nil || pcln == nil {
		return nil, fmt.Errorf("%s: no .text or .gopclntab", binary)
	}
	data, err := pcln.Data()
	if err != nil {
		return nil, err
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	for _, fn := range tab.Funcs {
		file, _, _ := tab.PCToLine(fn.Entry)
		if rel, err := filepath.Rel(root, file); err == nil && !strings.HasPrefix(rel, "..") {
			files[fn.Name] = filepath.ToSlash(rel)
		}
	}
	return func(fn string) string { return files[fn] }, nil
}

// TestWalkRule holds the rule to a small trace: the window, the
// goroutines, the files and the returns.
func TestWalkRule(t *testing.T) {
	const trace = `=== RUN TestX
> goroutine(1): m/proxy.(*Server).ServeHTTP(x)
>> goroutine(1): m/proxy.(*Server).ServeHTTP => ()
> goroutine(7): m/bg.loop()
> goroutine(9): m/proxy.(*Server).ServeHTTP(y)
> goroutine(9): m/proxy.route-fm()
> goroutine(9): m/mirror.(*Engine).Open()
> goroutine(7): m/bg.tick()
> goroutine(9): m/origin.Serve()
> goroutine(11): m/mirror.run()
> goroutine(9): m/proxy.stream()
> goroutine(11): m/cache.Write()
> goroutine(11): m/cache.inner()
>> goroutine(11): m/cache.inner => ()
>> goroutine(11): m/cache.inner => ()
>> goroutine(11): m/cache.Write => ()
> goroutine(11): m/mirror.commit()
> goroutine(12): m/cache.log()
>> goroutine(9): m/proxy.(*Server).ServeHTTP => ()
> goroutine(11): m/cache.Commit()
> goroutine(9): m/proxy.after()
`
	events, err := parseTrace(strings.NewReader(trace))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"m/proxy.(*Server).ServeHTTP": "proxy/server.go", "m/proxy.route-fm": "proxy/server.go",
		"m/proxy.stream": "proxy/server.go", "m/proxy.after": "proxy/server.go",
		"m/mirror.(*Engine).Open": "mirror/api.go", "m/mirror.run": "mirror/archive.go",
		"m/mirror.commit": "mirror/archive.go", "m/cache.Write": "cache/blob.go", "m/cache.inner": "cache/db.go", "m/cache.Commit": "cache/blob.go", "m/cache.log": "cache/log.go",
		"m/bg.loop": "bg/bg.go", "m/bg.tick": "bg/bg.go", "m/origin.Serve": "internal/testrig/fakeorigin/o.go",
	}
	fileOf := func(fn string) string { return files[fn] }
	w, err := walkFrom(events, "m/proxy.(*Server).ServeHTTP", 1, fileOf, func(f string) bool { return strings.HasPrefix(f, "cache/") })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range w.stops {
		got = append(got, s.fn)
	}
	want := []string{"m/proxy.(*Server).ServeHTTP", "m/mirror.(*Engine).Open", "m/mirror.run", "m/cache.Write",
		"m/mirror.commit", "m/cache.Commit", "m/proxy.stream"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("stops\n %v\nwant\n %v", got, want)
	}
	stops, nfiles, returns := w.figures()
	if stops != 7 || nfiles != 4 || returns != 3 {
		t.Fatalf("figures %d/%d/%d, want 7/4/3\n%s", stops, nfiles, returns, w.report("walk"))
	}
	// Without a boundary, the calls inside the cache count.
	if w, err := walkFrom(events, "m/proxy.(*Server).ServeHTTP", 1, fileOf, nil); err != nil || len(w.stops) != 9 {
		t.Fatalf("without a boundary: %v\n%s", err, w.report("walk"))
	}
	if _, err := walkFrom(events, "m/proxy.(*Server).ServeHTTP", 2, fileOf, nil); err == nil {
		t.Fatal("a third request was found in a trace of two")
	}
}

// TestWalkFigures traces TestWalkColdArchive and TestWalkColdOCIManifest
// with delve and prints both walks. TFMIRROR_DLV names delve's binary;
// TFMIRROR_WALK_DIR, when set, keeps the trace and the test binary there,
// and with TFMIRROR_WALK_REUSE set as well the walks are read again from
// the trace kept there, without tracing.
func TestWalkFigures(t *testing.T) {
	dlv := os.Getenv("TFMIRROR_DLV")
	if dlv == "" {
		t.Skip("TFMIRROR_DLV (delve's binary) not set: the walks are measured by hand (ARCHITECTURE.md)")
	}
	dir := os.Getenv("TFMIRROR_WALK_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	binary, tracePath := filepath.Join(dir, "walks.test"), filepath.Join(dir, "walks.trace")
	if os.Getenv("TFMIRROR_WALK_REUSE") == "" {
		trace, err := os.Create(tracePath)
		if err != nil {
			t.Fatal(err)
		}
		// Built as dlv test builds it: no optimisation, no inlining.
		build := exec.Command("go", "test", "-c", "-gcflags=all=-N -l", "-o", binary, ".")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go test -c: %v\n%s", err, out)
		}
		cmd := exec.Command(dlv, "trace", "--exec", binary, "github.com/tfmirror/tfmirror/v2/",
			"--", "-test.run", "^TestWalkCold(Archive|OCIManifest)$", "-test.count=1")
		cmd.Stderr, cmd.Stdout = trace, io.Discard
		if err := cmd.Run(); err != nil {
			t.Fatalf("dlv trace: %v (trace in %s)", err, tracePath)
		}
		trace.Close()
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := binaryFiles(binary, root)
	if err != nil {
		t.Fatal(err)
	}
	fileOf := func(fn string) string { return passThrough(files(fn)) }
	f, err := os.Open(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events, err := parseTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	boundary, err := storageBoundary()
	if err != nil {
		t.Fatal(err)
	}
	// go test runs the two in the order of their file: the archive first.
	for i, r := range []struct{ name, door string }{
		{"cold archive (TestWalkColdArchive)", "proxy/networkmirror.go"},
		{"cold OCI manifest (TestWalkColdOCIManifest)", "proxy/ocidoor/door.go"},
	} {
		name := r.name
		for _, b := range []struct {
			what     string
			boundary func(string) bool
		}{{"handler to cache and origin", boundary}, {"every call", nil}} {
			w, err := walkFrom(events, walkRoot, i, fileOf, b.boundary)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(w.stops, func(s stop) bool { return s.file == r.door }) {
				t.Fatalf("%s: the walk never enters %s: not this request\n%s", name, r.door, w.report(name))
			}
			t.Log("\n" + w.report(name+", "+b.what))
			if b.boundary != nil {
				back := callsBack(events, w, fileOf)
				t.Logf("%s: %d calls back into a file of their own call path\n%s", name, len(back), strings.Join(back, "\n"))
			}
		}
	}
}

// callsBack returns the stops of w that call back up their own call
// path: a call into a file of the module that is on the calling
// goroutine's stack beneath a call into another file (A calls B, and B,
// or what B calls, calls A again), each with the files of its path. Only
// the module's own frames count, and a goroutine's stack starts at its
// own first call (a function run by a helper's goroutine, such as a
// coalesced step, is not counted as called back by it). A walk that goes
// top to bottom has none.
func callsBack(events []traceEvent, w walk, fileOf func(string) string) []string {
	in := map[int]bool{}
	for _, s := range w.stops {
		in[s.pos] = true
	}
	type frame struct{ fn, file string }
	stacks := map[int][]frame{}
	var back []string
	for _, e := range events {
		st := stacks[e.goroutine]
		if !e.call {
			for j := len(st) - 1; j >= 0; j-- {
				if st[j].fn == e.fn {
					stacks[e.goroutine] = st[:j]
					break
				}
			}
			continue
		}
		file := fileOf(e.fn)
		stacks[e.goroutine] = append(st, frame{e.fn, file})
		if !in[e.pos] {
			continue
		}
		var path []string // the files of the module's frames, runs of one file as one
		for _, f := range st {
			if f.file != "" && (len(path) == 0 || path[len(path)-1] != f.file) {
				path = append(path, f.file)
			}
		}
		if len(path) < 2 || path[len(path)-1] == file || !slices.Contains(path[:len(path)-1], file) {
			continue
		}
		back = append(back, fmt.Sprintf("    %s, called back by %s", strings.TrimPrefix(e.fn, "github.com/tfmirror/tfmirror/v2/"), strings.Join(path, " > ")))
	}
	return back
}

// storageBoundary names the files where the walk "handler to cache and
// origin" ends: those of the packages of layers.txt's storage layer and
// the layers beneath it (the cache, the bucket, the origin client,
// verification, the policy, the helpers, the domain). A call into one is
// a stop; what that package does beneath it is its own.
func storageBoundary() (func(file string) bool, error) {
	text, err := os.ReadFile("layers.txt")
	if err != nil {
		return nil, err
	}
	tb, err := parseTable(string(text))
	if err != nil {
		return nil, err
	}
	storage := slices.Index(tb.layers, storageLayer)
	if storage < 0 {
		return nil, fmt.Errorf("layers.txt has no layer %q", storageLayer)
	}
	return func(file string) bool {
		l, ok := tb.layerOf[path.Dir(file)]
		return ok && l <= storage
	}, nil
}

// storageLayer is the layer of the cache and the origin client.
const storageLayer = "storage"

// TestCallsBack holds callsBack to a small trace: a call back up the
// path counts, a call down or within one file does not, nor does a
// function a goroutine of its own runs.
func TestCallsBack(t *testing.T) {
	const trace = `> goroutine(1): m/proxy.Serve()
> goroutine(1): m/mirror.Open()
> goroutine(1): m/mirror.open()
> goroutine(1): m/records.Read()
> goroutine(1): m/mirror.keys()
>> goroutine(1): m/mirror.keys => ()
>> goroutine(1): m/records.Read => ()
> goroutine(1): m/records.Write()
>> goroutine(1): m/records.Write => ()
>> goroutine(1): m/mirror.open => ()
>> goroutine(1): m/mirror.Open => ()
> goroutine(2): m/mirror.step()
> goroutine(2): m/records.Read()
>> goroutine(1): m/proxy.Serve => ()
`
	events, err := parseTrace(strings.NewReader(trace))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"m/proxy.Serve": "proxy/server.go", "m/mirror.Open": "mirror/api.go", "m/mirror.open": "mirror/api.go",
		"m/mirror.keys": "mirror/api.go", "m/mirror.step": "mirror/api.go", "m/records.Read": "mirror/records/records.go", "m/records.Write": "mirror/records/records.go"}
	fileOf := func(fn string) string { return files[fn] }
	w, err := walkFrom(events, "m/proxy.Serve", 0, fileOf, nil)
	if err != nil {
		t.Fatal(err)
	}
	back := callsBack(events, w, fileOf)
	if len(back) != 1 || !strings.Contains(back[0], "m/mirror.keys, called back by proxy/server.go > mirror/api.go > mirror/records/records.go") {
		t.Fatalf("calls back: %q, want mirror.keys alone", back)
	}
}
