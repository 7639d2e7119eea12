// The database under a store: the Badger handle, and the guards every
// access to it goes through.

package cache

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/tfmirror/tfmirror/v2/cache/internal/disk"
)

// errNoDB is what reads get while the database is not open: a miss.
var errNoDB = fmt.Errorf("%w (the cache could not be opened: disk full at start-up)", ErrNotFound)

// database is the Badger database under a store's Records and Blobs.
// Every access goes through its guards: a read while it is open, a write
// only while the disk has room for it above the reserve, and none once it
// is closed (gate). Badger writes through memory-mapped files, where a
// full disk is not an error but SIGBUS: so every write is admitted only
// while the file system has more free space than Options.DiskReserve plus
// the LSM tree's size, checked cheaply (disk.Space), and below it fails
// with ErrNotWritable without touching Badger. Opened on a disk already
// below the reserve, the database is read-only (or, if Badger cannot
// open it so, missing: every lookup misses) until Store reopens it
// read-write when there is room (writable.go).
type database struct {
	bopts badger.Options
	log   *slog.Logger
	space disk.Space

	// dbmu guards bdb and readOnly: every use of bdb holds it for reading;
	// reopening read-write holds it for writing.
	dbmu     sync.RWMutex
	bdb      *badger.DB // nil: not open (disk full at start-up and not readable)
	readOnly bool       // bdb was opened read-only (disk full at start-up)

	// dirLock keeps other processes out of the directory from Open to
	// close, whether bdb is open read-write, read-only or not at all.
	dirLock *disk.DirLock

	// gate counts the database operations under way and refuses new ones
	// once the store is closed (close.go).
	gate opGate

	// deletes counts the deletions of archive chunks since the value-log
	// GC last settled them (gc.go), and gcKick asks it for a round now;
	// writeMu is held for reading by every write, and for writing while
	// the GC has Badger refuse writes.
	deletes atomic.Int64
	gcKick  chan struct{}
	writeMu sync.RWMutex

	// tablesDamaged says a check of the LSM tree's tables found a block
	// that fails its checksum (checkTables).
	tablesDamaged atomic.Bool
	// tablesChecked is when a check last found the tables whole
	// (UnixNano): a check within tablesCheckEvery of it is not made again.
	tablesChecked atomic.Int64

	// ping is Ping's memo; lastWrite is when a write to Badger last
	// succeeded (UnixNano, 0: none yet), which Ping takes as its answer;
	// writes counts the writes tried (tests).
	ping      pingState
	lastWrite atomic.Int64
	writes    atomic.Int64

	hooks *testHooks
}

func newDatabase(opts Options, hooks *testHooks) *database {
	d := &database{bopts: badgerOptions(opts), log: opts.Logger, gcKick: make(chan struct{}, 1), hooks: hooks}
	d.space = disk.Space{Dir: opts.Dir, Free: opts.FreeSpace, Reserve: opts.DiskReserve,
		Interval: opts.SpaceCheckInterval, Log: opts.Logger, Now: time.Now, Refusal: ErrNotWritable}
	if d.space.Free == nil {
		d.space.Free = disk.Free
	}
	if d.space.Reserve == 0 {
		d.space.Reserve = DefaultDiskReserve
	}
	if d.space.Interval <= 0 {
		d.space.Interval = DefaultSpaceCheckInterval
	}
	if opts.InMemory {
		d.space.Reserve = -1
	}
	return d
}

// ErrRecordTooLarge refuses a record larger than one value of the
// database may be.
var ErrRecordTooLarge = errors.New("cache: record larger than the database stores in one value")

// fits refuses doc, the record to store under key, when it is larger than
// Badger takes in one value (a value-log file's size; in memory, the
// value threshold), saying so in a line: Badger's own error dumps the
// value's first KiB, an origin's answer, into the message.
func (d *database) fits(key string, doc []byte) error {
	most := d.bopts.ValueLogFileSize
	if d.bopts.InMemory {
		most = d.bopts.ValueThreshold
	}
	if int64(len(doc)) > most {
		return fmt.Errorf("storing %s: %w (%d bytes, more than %d)", key, ErrRecordTooLarge, len(doc), most)
	}
	return nil
}

// view runs fn in a read-only transaction.
func (d *database) view(fn func(txn *badger.Txn) error) error {
	return d.withDB(func() error {
		if d.bdb == nil {
			return errNoDB
		}
		return d.bdb.View(fn)
	})
}

// withWritable runs fn on the database while the store is open and
// writable.
func (d *database) withWritable(fn func(db *badger.DB) error) error {
	return d.withDB(func() error {
		if err := d.writableLocked(); err != nil {
			return err
		}
		return fn(d.bdb)
	})
}

// withDB runs fn while the store is open, with the database lock held for
// reading, so that the database is not swapped or closed under fn.
func (d *database) withDB(fn func() error) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.leave()
	if !d.dbmu.TryRLock() {
		if h := d.hooks.dbWaits; h != nil {
			h()
		}
		d.dbmu.RLock()
	}
	defer d.dbmu.RUnlock()
	return fn()
}

// withRoom runs fn on the writable database if the disk has room for
// cost bytes (entryCost) above the reserve; fn must write no more.
func (d *database) withRoom(cost int64, fn func(db *badger.DB) error) error {
	return d.withWritable(func(db *badger.DB) error {
		if err := d.space.Admit(cost); err != nil {
			return err
		}
		d.writeMu.RLock()
		defer d.writeMu.RUnlock()
		defer d.space.Done(cost)
		d.writes.Add(1)
		if err := fn(db); err != nil {
			return err
		}
		d.lastWrite.Store(d.space.Now().UnixNano())
		return nil
	})
}

// update runs fn in a read-write transaction that writes at most cost
// bytes (entryCost), if the disk has room for them above the reserve.
func (d *database) update(cost int64, fn func(txn *badger.Txn) error) error {
	return d.withRoom(cost, func(db *badger.DB) error { return db.Update(fn) })
}

// deleteKeys deletes keys in batches, if the disk has room for the
// tombstones above the reserve.
func (d *database) deleteKeys(keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	var cost int64
	for _, k := range keys {
		cost += entryCost(len(k), 0)
	}
	return d.withRoom(cost, func(db *badger.DB) error {
		wb := db.NewWriteBatch()
		defer wb.Cancel()
		for _, k := range keys {
			if err := wb.Delete(k); err != nil {
				return err
			}
		}
		if err := wb.Flush(); err != nil {
			return err
		}
		d.deletes.Add(1)
		d.kickGC() // the space returns to the disk once the GC settled the deletions
		return nil
	})
}

// sync flushes what was written to disk (writes nothing new).
func (d *database) sync() error {
	return d.withWritable(func(db *badger.DB) error { return db.Sync() })
}

// syncWritten is sync for what was written already, whatever the free
// space now (below the reserve too, where sync refuses as writes do); a
// database not open or read-only wrote nothing to sync.
func (d *database) syncWritten() error {
	return d.withDB(func() error {
		if d.bdb == nil || d.readOnly {
			return nil
		}
		return d.bdb.Sync()
	})
}

// ErrTablesDamaged is returned for what the store does not do once a
// table of its database was found damaged where it is stored
// (checkTables): remove chunks that no record was read for, compact the
// tables, collect the value log's garbage.
var ErrTablesDamaged = errors.New("a table of the cache's database is damaged where it is stored")

// tablesCheckEvery is how long the tables found whole are taken to be
// whole (checkTables): while the size limit or the deletions' compaction
// press (each second), one read of the tables a minute, not one each.
const tablesCheckEvery = time.Minute

// checkTables checks every block of the database's tables against its
// checksum, before the store does what a pass over the tables decides or
// writes them again: Badger's iterators, and so its compactions, end a
// table at a block that fails its checksum without an error, so that a
// pass over the records misses every record after it (whose archive's
// chunks would be taken for an interrupted write's), and a compaction
// writes the table again without what follows it, though each of those
// keys is still read by itself. Once a check failed, it fails without
// reading again, and the damage was logged once; one that passed is not
// made again within tablesCheckEvery. In memory, nothing is checked.
func (d *database) checkTables() error {
	if d.tablesDamaged.Load() {
		return ErrTablesDamaged
	}
	if at := d.tablesChecked.Load(); at != 0 && time.Since(time.Unix(0, at)) < tablesCheckEvery {
		return nil
	}
	err := d.withDB(func() error {
		if d.bdb == nil || d.bopts.InMemory {
			return nil
		}
		return verifyTables(d.bdb)
	})
	if err == nil {
		d.tablesChecked.Store(time.Now().UnixNano())
	}
	if err == nil || errors.Is(err, ErrClosed) {
		return err
	}
	if !d.tablesDamaged.Swap(true) {
		d.log.Error("a table of the cache's database is damaged where it is stored: the records after the damage are missed by passes over the records, so no chunk is removed as an interrupted write's, and the tables are not compacted nor the value log collected, until the store is opened again: check the disk",
			"dir", d.space.Dir, "error", err)
	}
	return fmt.Errorf("%w: %v", ErrTablesDamaged, err)
}

// verifyTables is Badger's check of every block of db's tables. Badger
// 4.9's check panics where it finds a damaged block (it reads the offset
// of the block it could not read): that panic is the check's failure.
func verifyTables(db *badger.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("a block of a table fails its checksum (%v)", r)
		}
	}()
	return db.VerifyChecksum()
}

// openReplaying opens the database read-write. When its write-ahead log
// is replayed (the process before died without closing it), the
// deletions it replays are settled as if this process had made them:
// whatever that process deleted and had not settled yet (archives
// evicted or pruned, interrupted writes removed) stays uncounted in the
// tables otherwise, its space held in the value log until a deletion of
// this process has the GC settle.
func (d *database) openReplaying() (*badger.DB, error) {
	replay := needsReplay(d.bopts)
	db, err := openBadger(d.bopts)
	if err == nil && replay {
		d.deletes.Add(1)
		d.kickGC()
	}
	return db, err
}

// kickGC asks the value-log GC for a round now.
func (d *database) kickGC() {
	select {
	case d.gcKick <- struct{}{}:
	default:
	}
}

// releaseReadPages has the kernel take back the pages of the table files
// this process has read (Store.ReleaseReadPages).
func (d *database) releaseReadPages() {
	if d.space.Dir != "" && !d.bopts.InMemory {
		disk.PageOutTables(d.space.Dir)
	}
}
