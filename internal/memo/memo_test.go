package memo

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// put is Put with a fresh generation, as after a Get that missed.
func put(t *testing.T, m *Memo[string, int], k string, v int) {
	t.Helper()
	_, gen, _ := m.Get(k)
	if !m.Put(k, gen, v) {
		t.Fatalf("Put(%q) with a fresh generation was refused", k)
	}
}

func TestLeastRecentlyUsedIsEvicted(t *testing.T) {
	tests := []struct {
		name      string
		ops       []string // "put k" or "get k", on a memo of 3 holding a, b, c (c most recent)
		wantKeys  []string // most recent first
		wantGone  string
		wantValue map[string]int
	}{
		{name: "oldest goes", ops: []string{"put d"}, wantKeys: []string{"d", "c", "b"}, wantGone: "a"},
		{name: "a get makes an entry recent", ops: []string{"get a", "put d"}, wantKeys: []string{"d", "a", "c"}, wantGone: "b"},
		{name: "a put of a known key makes it recent and replaces it", ops: []string{"put b", "put d", "put e"},
			wantKeys: []string{"e", "d", "b"}, wantGone: "c", wantValue: map[string]int{"b": 100}},
		{name: "a miss changes nothing", ops: []string{"get x", "put d"}, wantKeys: []string{"d", "c", "b"}, wantGone: "a"},
		{name: "forget frees a place", ops: []string{"forget b", "put d"}, wantKeys: []string{"d", "c", "a"}, wantGone: "b"},
		{name: "clear empties it", ops: []string{"clear -", "put d"}, wantKeys: []string{"d"}, wantGone: "c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New[string, int](3)
			for i, k := range []string{"a", "b", "c"} {
				put(t, m, k, i)
			}
			for _, op := range tc.ops {
				var verb, k string
				fmt.Sscan(op, &verb, &k)
				switch verb {
				case "put":
					put(t, m, k, 100)
				case "get":
					m.Get(k)
				case "forget":
					m.Forget(k)
				case "clear":
					m.Clear()
				}
			}
			if got := m.Keys(); !slices.Equal(got, tc.wantKeys) {
				t.Errorf("keys %v, want %v", got, tc.wantKeys)
			}
			if _, _, ok := m.Get(tc.wantGone); ok {
				t.Errorf("%q is still remembered", tc.wantGone)
			}
			for k, want := range tc.wantValue {
				if v, _, ok := m.Get(k); !ok || v != want {
					t.Errorf("Get(%q) = %d, %v; want %d", k, v, ok, want)
				}
			}
		})
	}
}

func TestBound(t *testing.T) {
	const max = 100
	m := New[string, int](max)
	for i := range 10 * max {
		put(t, m, strconv.Itoa(i), i)
		if n := m.Len(); n != min(i+1, max) {
			t.Fatalf("after %d puts Len = %d, want %d", i+1, n, min(i+1, max))
		}
	}
	// The last max keys are the ones kept, and with their values.
	for i := 9 * max; i < 10*max; i++ {
		if v, _, ok := m.Get(strconv.Itoa(i)); !ok || v != i {
			t.Errorf("Get(%d) = %d, %v", i, v, ok)
		}
	}
	if len(m.Keys()) != max {
		t.Errorf("the list holds %d entries, the map %d", len(m.Keys()), m.Len())
	}
}

func TestGenerationRule(t *testing.T) {
	tests := []struct {
		name    string
		between func(m *Memo[string, int]) // between Get and Put of "k"
		want    bool
	}{
		{"nothing happened", func(*Memo[string, int]) {}, true},
		{"k was forgotten", func(m *Memo[string, int]) { m.Forget("k") }, false},
		{"another key was forgotten", func(m *Memo[string, int]) { m.Forget("other") }, false},
		{"everything was cleared", func(m *Memo[string, int]) { m.Clear() }, false},
		{"another key was put", func(m *Memo[string, int]) {
			_, gen, _ := m.Get("other")
			m.Put("other", gen, 2)
		}, true},
		{"another key was adopted", func(m *Memo[string, int]) {
			_, gen, _ := m.Get("other")
			m.Adopt("other", gen, 2)
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New[string, int](10)
			_, gen, _ := m.Get("k")
			if g := m.Generation(); g != gen {
				t.Fatalf("Generation = %d, Get handed out %d", g, gen)
			}
			tc.between(m)
			if unchanged := m.Generation() == gen; unchanged != tc.want {
				t.Errorf("Generation unchanged = %v, want %v", unchanged, tc.want)
			}
			if got := m.Put("k", gen, 1); got != tc.want {
				t.Errorf("Put = %v, want %v", got, tc.want)
			}
			if _, _, ok := m.Get("k"); ok != tc.want {
				t.Errorf("remembered = %v, want %v", ok, tc.want)
			}
			// A Get after the write hands out a generation that works.
			_, gen, _ = m.Get("k")
			if !m.Put("k", gen, 3) {
				t.Error("Put with the generation of a later Get was refused")
			}
		})
	}
}

// Concurrent use is safe (the race detector checks) and keeps the bound.
// Adopt remembers a value under Put's rule and advances the generation.
func TestAdopt(t *testing.T) {
	m := New[string, int](10)
	_, gen, _ := m.Get("k")
	if !m.Adopt("k", gen, 1) {
		t.Fatal("Adopt with a fresh generation was refused")
	}
	if m.Generation() == gen {
		t.Error("Adopt left the generation as it was")
	}
	if v, _, ok := m.Get("k"); !ok || v != 1 {
		t.Errorf("Get = %d, %v after Adopt; want 1, true", v, ok)
	}
	_, gen, _ = m.Get("k")
	m.Forget("k")
	if m.Adopt("k", gen, 2) {
		t.Error("Adopt after a Forget since its Get was accepted")
	}
	if _, _, ok := m.Get("k"); ok {
		t.Error("a refused Adopt remembered its value")
	}
}

func TestConcurrentUse(t *testing.T) {
	m := New[int, int](16)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := (i * (g + 1)) % 64
				if _, gen, ok := m.Get(k); !ok {
					m.Put(k, gen, k)
				}
				if i%100 == 0 {
					m.Forget(k)
				}
			}
		}()
	}
	wg.Wait()
	if n := m.Len(); n > 16 || len(m.Keys()) != n {
		t.Errorf("Len = %d, list %d, bound 16", n, len(m.Keys()))
	}
}

func BenchmarkGetHit(b *testing.B) {
	m := New[string, int](4096)
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
		_, gen, _ := m.Get(keys[i])
		m.Put(keys[i], gen, i)
	}
	i := 0
	for b.Loop() {
		m.Get(keys[i%len(keys)])
		i++
	}
}

// Every Put evicts: the cost must not grow with the memo's size.
func BenchmarkPutEvicting(b *testing.B) {
	for _, size := range []int{16, 4096, 65536} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			m := New[int, int](size)
			i := 0
			for b.Loop() {
				_, gen, _ := m.Get(i)
				m.Put(i, gen, i)
				i++
			}
		})
	}
}

func BenchmarkParallelGet(b *testing.B) {
	m := New[int, int](1024)
	for i := range 1024 {
		m.Put(i, 0, i)
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.Get(i % 1024)
			i++
		}
	})
}
