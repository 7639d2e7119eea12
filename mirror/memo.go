package mirror

import (
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/memo"
)

// memoMaxEntries bounds the decoded metadata kept in memory: with more
// documents than this, the least recently used is dropped for every one
// added. A package record with its rendered VERSION.json takes a few KiB
// (up to some tens with the origin's SHA256SUMS, signature and keys),
// a long version list with its index.json tens of KiB, so a busy mirror
// holds at most some tens of MiB here; most hold far less, as few
// providers are in use at a time.
const memoMaxEntries = 4096

// metaMemo keeps metadata documents decoded from the cache in memory, so
// that warm index.json and VERSION.json requests do not read and decode
// them from Badger every time (which was most of their cost). The Server
// is the only writer of these documents, and it calls forget after every
// write; a document read from the store while a write was under way is
// not remembered, so the memo never holds a value older than the store's.
//
// Values are shared between requests and must not be modified.
type metaMemo struct {
	m *memo.Memo[string, memoEntry]
}

type memoEntry struct {
	storedAt time.Time
	val      any
}

func newMetaMemo() *metaMemo {
	return &metaMemo{m: memo.New[string, memoEntry](memoMaxEntries)}
}

// get returns the remembered document under key and when it was stored.
// When there is none, it returns the generation to pass to put after
// reading the document from the store.
func (m *metaMemo) get(key string) (val any, storedAt time.Time, gen uint64, ok bool) {
	e, gen, ok := m.m.Get(key)
	return e.val, e.storedAt, gen, ok
}

// put remembers a document read from the store, unless a write happened
// since get returned gen.
func (m *metaMemo) put(key string, gen uint64, val any, storedAt time.Time) {
	m.m.Put(key, gen, memoEntry{storedAt: storedAt, val: val})
}

// adopt remembers a document that is not in the store (a copy from the
// shared tier), unless a write happened since get returned gen; it
// advances the generation as a write does.
func (m *metaMemo) adopt(key string, gen uint64, val any, storedAt time.Time) {
	m.m.Adopt(key, gen, memoEntry{storedAt: storedAt, val: val})
}

// forget drops key; call it after writing (or failing to write) key.
func (m *metaMemo) forget(key string) { m.m.Forget(key) }
