package cache

import "github.com/tfmirror/tfmirror/v2/internal/memo"

// statMemoMax bounds the blob records (and known absences) kept in memory.
const statMemoMax = 16384 // about 4 MiB

// statMemo remembers, per sha256, the commit record StatBlob last read, or
// that there was none, so that warm VERSION.json requests (which ask about
// every platform's archive) do not read Badger each time. Commit and
// deleteBlob call Forget after changing a record; a lookup that raced with
// such a change is not remembered (the memo's generation rule), so the
// memo never answers with something older than Badger's state. The least
// recently used records are dropped beyond statMemoMax.
type statMemo = memo.Memo[string, statEntry]

func newStatMemo() *statMemo { return memo.New[string, statEntry](statMemoMax) }

type statEntry struct {
	info    BlobInfo
	found   bool
	damaged bool // the record carries the mark of damage found (blobRecord.Damaged)
}
