// Metadata records: JSON documents under a key, with the time they were
// stored.

package cache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode"

	"github.com/dgraph-io/badger/v4"
)

// Records is the metadata record store of a Store: small JSON documents
// under printable keys, each stored with the time it was stored. It is
// not for archives (Blobs), and it does not interpret what it stores.
type Records struct {
	db      *database
	writers *writerGate
	// failWrites (Options.FailWrites, tests) is called before each
	// document is written; an error it returns fails the write.
	failWrites func() error
}

// envelope is a stored metadata document.
type envelope struct {
	StoredAt time.Time       `json:"t"`
	Value    json.RawMessage `json:"v"`
}

// Envelopes as PutMeta writes them: {"t":"TIME","v":DOCUMENT}.
var (
	envelopeHead = []byte(`{"t":"`)
	envelopeMid  = []byte(`","v":`)
)

// decodeEnvelope reads val, an envelope, into env. One as PutMeta writes
// it is split where its parts are, without a scan of the document: the
// caller decodes the document, which checks it (a scan of every record
// read at start-up costs half as much so). Anything else is decoded as
// JSON.
func decodeEnvelope(val []byte, env *envelope) error {
	if rest, ok := bytes.CutPrefix(val, envelopeHead); ok && len(rest) > 0 && rest[len(rest)-1] == '}' {
		if at, doc, ok := bytes.Cut(rest[:len(rest)-1], envelopeMid); ok && len(doc) > 0 && !bytes.ContainsAny(at, `"\`) {
			if t, err := time.Parse(time.RFC3339Nano, string(at)); err == nil {
				env.StoredAt, env.Value = t, bytes.Clone(doc)
				return nil
			}
		}
	}
	return json.Unmarshal(val, env)
}

func metaKey(key string) ([]byte, error) {
	if key == "" || len(key) > 1024 {
		return nil, fmt.Errorf("cache: invalid metadata key %q", key)
	}
	for _, r := range key {
		if !unicode.IsPrint(r) {
			return nil, fmt.Errorf("cache: metadata key %q has a non-printable character", key)
		}
	}
	return []byte("m/" + key), nil
}

// Sync makes what was written to the store so far (records and
// archives) durable, so that a power loss after it returns loses none of
// it. It writes nothing itself: below the disk reserve it syncs as ever,
// and a store opened read-only, which wrote nothing, has nothing to sync.
func (r *Records) Sync() error { return r.db.syncWritten() }

// PutMeta stores v, JSON-encoded, under key with the current time. It
// fails with ErrClosed once Shutdown or Close began.
func (r *Records) PutMeta(key string, v any) error {
	return r.PutMetaAt(key, v, time.Now())
}

// PutMetaAt is PutMeta with the time of storing given, at: for a record
// stored again with a change that leaves its age as it was (GetMeta
// returns at).
func (r *Records) PutMetaAt(key string, v any, at time.Time) error {
	k, err := metaKey(key)
	if err != nil {
		return err
	}
	if r.writers.refusing() {
		return fmt.Errorf("storing %s: %w", key, ErrClosed)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("cache: encoding %s: %w", key, err)
	}
	doc, err := json.Marshal(envelope{StoredAt: at.UTC(), Value: raw})
	if err != nil {
		return err
	}
	if err := r.db.fits(key, doc); err != nil {
		return err
	}
	if h := r.failWrites; h != nil {
		if err := h(); err != nil {
			return fmt.Errorf("cache: storing %s: %w", key, err)
		}
	}
	if err := r.db.update(entryCost(len(k), len(doc)), func(txn *badger.Txn) error { return txn.Set(k, doc) }); err != nil {
		return fmt.Errorf("cache: storing %s: %w", key, err)
	}
	return nil
}

// PutMetas stores each document of docs, JSON-encoded, under its key with
// the current time, as PutMeta does, in one transaction: all of them, or
// none when it fails, so that documents that name each other are never
// found half written. It fails with ErrClosed once Shutdown or Close
// began.
func (r *Records) PutMetas(docs map[string]any) error {
	if len(docs) == 0 {
		return nil
	}
	if r.writers.refusing() {
		return fmt.Errorf("storing %d documents: %w", len(docs), ErrClosed)
	}
	type entry struct{ key, doc []byte }
	entries := make([]entry, 0, len(docs))
	var cost int64
	now := time.Now().UTC()
	for key, v := range docs {
		k, err := metaKey(key)
		if err != nil {
			return err
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("cache: encoding %s: %w", key, err)
		}
		doc, err := json.Marshal(envelope{StoredAt: now, Value: raw})
		if err != nil {
			return err
		}
		if err := r.db.fits(key, doc); err != nil {
			return err
		}
		if h := r.failWrites; h != nil {
			if err := h(); err != nil {
				return fmt.Errorf("cache: storing %s: %w", key, err)
			}
		}
		entries = append(entries, entry{k, doc})
		cost += entryCost(len(k), len(doc))
	}
	err := r.db.update(cost, func(txn *badger.Txn) error {
		for _, e := range entries {
			if err := txn.Set(e.key, e.doc); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cache: storing %d documents: %w", len(docs), err)
	}
	return nil
}

// GetMeta decodes the document stored under key into v and returns when
// it was stored, or ErrNotFound.
func (r *Records) GetMeta(key string, v any) (time.Time, error) {
	k, err := metaKey(key)
	if err != nil {
		return time.Time{}, err
	}
	var env envelope
	err = r.db.view(func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if err != nil {
			return err
		}
		return item.Value(func(val []byte) error { return decodeEnvelope(val, &env) })
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return time.Time{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("cache: reading %s: %w", key, err)
	}
	if err := json.Unmarshal(env.Value, v); err != nil {
		return time.Time{}, fmt.Errorf("cache: decoding %s: %w", key, err)
	}
	return env.StoredAt, nil
}

// DeleteMeta removes the document under key, if any. It fails with
// ErrClosed once Shutdown or Close began.
func (r *Records) DeleteMeta(key string) error {
	k, err := metaKey(key)
	if err != nil {
		return err
	}
	if r.writers.refusing() {
		return fmt.Errorf("deleting %s: %w", key, ErrClosed)
	}
	return r.db.update(entryCost(len(k), 0), func(txn *badger.Txn) error { return txn.Delete(k) })
}

// scanBatch is the most documents ScanMeta reads per read transaction;
// the first transaction reads scanFirstBatch, and each next one twice as
// many as the last, so that a scan that fn stops early (a page of a
// listing) reads little more than it uses.
const (
	scanBatch      = 256
	scanFirstBatch = 16
)

// ScanMeta calls fn for every document whose key starts with prefix, in
// key order, until fn returns an error. fn runs outside any transaction
// or lock of the store, so it may call the store itself: documents are
// read in batches, each in a transaction of its own, so a document
// written during the scan may or may not be seen.
func (r *Records) ScanMeta(prefix string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error {
	return r.ScanMetaAfter(prefix, "", fn)
}

// ScanMetaAfter is ScanMeta of the documents whose key is greater than
// after (a key, or "": from the start), so that a listing can resume
// where an earlier one stopped: its cost is that of the documents it
// reads, not of those before them.
func (r *Records) ScanMetaAfter(prefix, after string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error {
	type doc struct {
		key string
		env envelope
	}
	p := []byte("m/" + prefix)
	start := p
	if after != "" {
		if a := []byte("m/" + after + "\x00"); bytes.Compare(a, start) > 0 {
			start = a
		}
	}
	return scanBatched(r.db, p, start, scanFirstBatch, func(key, val []byte) (doc, error) {
		d := doc{key: string(key[len("m/"):])}
		return d, decodeEnvelope(val, &d.env)
	}, func(d doc) error { return fn(d.key, d.env.StoredAt, d.env.Value) })
}

// scanBatched decodes the entries whose key starts with prefix, from
// start on, in key order, and calls fn with each. Entries are read in
// batches (the first of first entries, each next one twice as large, up
// to scanBatch), each in a read transaction of its own, and fn runs
// outside them, so that it may call the store: an entry written during
// the scan may or may not be seen. A store without a database holds
// nothing to scan; one whose database goes during the scan fails it.
func scanBatched[T any](d *database, prefix, start []byte, first int, decode func(key, val []byte) (T, error), fn func(T) error) error {
	size := first
	read := false // a batch was read: the database was open
	for {
		var batch []T
		err := d.view(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: false})
			defer it.Close()
			for it.Seek(start); it.Valid() && len(batch) < size; it.Next() {
				item := it.Item()
				var v T
				err := item.Value(func(val []byte) (err error) {
					v, err = decode(item.Key(), val)
					return err
				})
				if err != nil {
					return err
				}
				batch = append(batch, v)
				if len(batch) == size { // the next batch resumes just after it
					start = append(item.KeyCopy(nil), 0)
				}
			}
			return nil
		})
		if errors.Is(err, errNoDB) && !read {
			return nil
		}
		if errors.Is(err, errNoDB) {
			// Gone since the scan began (a read-write reopen that failed):
			// what it did not read is not known to be absent.
			return fmt.Errorf("cache: the database closed during a scan of %q, cut short", prefix)
		}
		if err != nil {
			return err
		}
		read = true
		for _, v := range batch {
			if err := fn(v); err != nil {
				return err
			}
		}
		if len(batch) < size {
			return nil
		}
		size = min(2*size, scanBatch)
	}
}
