package cache

import "sync"

// statMemoMax bounds the blob records (and known absences) kept in memory.
const statMemoMax = 16384 // about 4 MiB

// statMemo remembers, per sha256, the commit record StatBlob last read, or
// that there was none, so that warm VERSION.json requests (which ask about
// every platform's archive) do not read Badger each time. Commit and
// DeleteBlob call forget after changing a record; a lookup that raced with
// such a change is not remembered (generation check), so the memo never
// answers with something older than Badger's state.
type statMemo struct {
	mu  sync.Mutex
	gen uint64
	m   map[string]statEntry
}

type statEntry struct {
	info  BlobInfo
	found bool
}

func (m *statMemo) get(sha string) (e statEntry, gen uint64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok = m.m[sha]
	return e, m.gen, ok
}

func (m *statMemo) put(sha string, gen uint64, e statEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if gen != m.gen {
		return
	}
	if m.m == nil {
		m.m = make(map[string]statEntry)
	}
	if _, ok := m.m[sha]; !ok && len(m.m) >= statMemoMax {
		for k := range m.m {
			delete(m.m, k)
			break
		}
	}
	m.m[sha] = e
}

func (m *statMemo) forget(sha string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	delete(m.m, sha)
}

// reset forgets everything (the database was reopened).
func (m *statMemo) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	clear(m.m)
}
