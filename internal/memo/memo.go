// Package memo owns one small thing: a bounded in-memory map that
// remembers values read from a slower store (Badger documents, archive
// records), safe for concurrent use.
//
// It is bounded by entry count, evicting the least recently used entry in
// O(1) (an intrusive doubly linked list beside the map: no scan, no
// allocation beyond the entry). It guards against remembering stale
// values with a generation: Get returns the current generation, every
// Forget advances it, and Put stores a value only if no Forget happened
// since the Get that preceded the read. A value read from the store while
// a write (followed by Forget) was under way is therefore never
// remembered, so the memo never answers with something older than the
// store. The generation is one for the whole memo, not per key: a write
// of any key discards the puts under way for all keys, which costs one
// extra read at worst and needs no memory for keys already forgotten.
//
// A value that is not read from the store but adopted (Adopt) advances
// the generation as a write does.
//
// It knows nothing of what it stores: no expiry by time, no sizes in
// bytes, no loading (callers read the store themselves, between Get and
// Put). Values are shared by every caller that gets them and must not be
// modified.
package memo

import (
	"sync"
	"sync/atomic"
)

// Memo is a bounded map from K to V with least-recently-used eviction and
// generation-guarded puts. Create it with New.
type Memo[K comparable, V any] struct {
	mu   sync.Mutex
	max  int
	gen  atomic.Uint64 // written under mu; read without it by Generation
	m    map[K]*node[K, V]
	root node[K, V] // sentinel: root.next is the most recently used, root.prev the least
}

type node[K comparable, V any] struct {
	key        K
	val        V
	prev, next *node[K, V]
}

// New returns a memo holding at most max entries. max must be at least 1.
func New[K comparable, V any](max int) *Memo[K, V] {
	if max < 1 {
		panic("memo: max must be at least 1")
	}
	m := &Memo[K, V]{max: max, m: make(map[K]*node[K, V])}
	m.root.next, m.root.prev = &m.root, &m.root
	return m
}

// Get returns the value remembered under k, marking it most recently
// used, and the current generation, to pass to Put after reading the
// store when there is no value (or to replace it).
func (m *Memo[K, V]) Get(k K) (v V, gen uint64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.m[k]
	if n == nil {
		return v, m.gen.Load(), false
	}
	m.moveToFront(n)
	return n.val, m.gen.Load(), true
}

// Put remembers v under k as the most recently used entry, evicting the
// least recently used one if the memo is full, unless Forget was called
// since the Get that returned gen: then it does nothing and returns false.
func (m *Memo[K, V]) Put(k K, gen uint64, v V) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.putLocked(k, gen, v)
}

// Adopt is Put for a value the store does not hold (one taken from
// elsewhere, which callers now answer from as if it had been written):
// under the same rule as Put, it remembers v and then advances the
// generation, as a write followed by Forget would, so that whatever was
// made from the memo before can tell.
func (m *Memo[K, V]) Adopt(k K, gen uint64, v V) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.putLocked(k, gen, v) {
		return false
	}
	m.gen.Add(1)
	return true
}

func (m *Memo[K, V]) putLocked(k K, gen uint64, v V) bool {
	if gen != m.gen.Load() {
		return false
	}
	if n := m.m[k]; n != nil {
		n.val = v
		m.moveToFront(n)
		return true
	}
	var n *node[K, V]
	if len(m.m) >= m.max {
		n = m.root.prev // the least recently used: reuse its node
		m.unlink(n)
		delete(m.m, n.key)
	} else {
		n = new(node[K, V])
	}
	n.key, n.val = k, v
	m.pushFront(n)
	m.m[k] = n
	return true
}

// Forget drops k, if remembered, and advances the generation so that no
// value read before now is put. Call it after writing (or failing to
// write) k in the store.
func (m *Memo[K, V]) Forget(k K) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen.Add(1)
	if n := m.m[k]; n != nil {
		m.unlink(n)
		delete(m.m, k)
	}
}

// Clear drops every entry and advances the generation, as Forget does
// for one key: for when the store behind the memo changed as a whole.
func (m *Memo[K, V]) Clear() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen.Add(1)
	clear(m.m)
	m.root.next, m.root.prev = &m.root, &m.root
}

// Generation returns the current generation, without taking the memo's
// lock: it changes (grows) on every Forget and Clear, so a caller that
// made something from values of the memo and its store can tell later,
// cheaply, whether anything has been written since.
func (m *Memo[K, V]) Generation() uint64 { return m.gen.Load() }

// Len is the number of entries remembered.
func (m *Memo[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}

// Keys returns the keys remembered, most recently used first.
func (m *Memo[K, V]) Keys() []K {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := make([]K, 0, len(m.m))
	for n := m.root.next; n != &m.root; n = n.next {
		keys = append(keys, n.key)
	}
	return keys
}

func (m *Memo[K, V]) unlink(n *node[K, V]) {
	n.prev.next, n.next.prev = n.next, n.prev
	n.prev, n.next = nil, nil
}

func (m *Memo[K, V]) pushFront(n *node[K, V]) {
	n.prev, n.next = &m.root, m.root.next
	m.root.next.prev = n
	m.root.next = n
}

func (m *Memo[K, V]) moveToFront(n *node[K, V]) {
	if m.root.next == n {
		return
	}
	m.unlink(n)
	m.pushFront(n)
}
