package sharedstore

// The authenticated tier: every object the store writes is bound, with
// HMAC-SHA256 under a key that only the operator's replicas hold, to the
// store's ID (Config.StoreID: by default its bucket and prefix), its kind,
// its name in the store (below the prefix) and its content; every object
// it reads is checked against that binding before anything of it is
// handed out. An object that fails is not there, as far as the callers can
// tell: they take it from the origin and write it back, authenticated.
// Whoever can write the bucket without the key can delete, hide or replay
// (within minutes, under the same name of the same store; on a bucket with
// versioning, see maxPutBack) what the replicas wrote, never make them take
// other bytes, records or times.
//
// The MAC's format is written beside it (macFormat). Format 1, that of
// release 2.x before the store ID, bound the key in the bucket but not the
// bucket: its records are rejected (and so re-derived from the origins and
// written back in the current format); its archive headers are still
// read, see OpenArchive, and so are its OCI digest entries, see openMeta.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// MinKeyBytes is the shortest key Keys takes.
const MinKeyBytes = 32

// macFormat is the format of the MACs the store writes: format 2 binds
// the store's ID, the kind and the name below the prefix. Format 1 (no
// "format" field) bound the key in the bucket (prefix included) and the
// kind, not the bucket.
const macFormat = 2

// macDomains start every authenticated message, by format: a MAC of this
// store's is no MAC of anything else made with the same key, nor of
// another format.
var macDomains = map[int]string{
	1: "tfmirror shared-store object v1",
	2: "tfmirror shared-store object v2",
}

// MaxStoreIDBytes bounds Config.StoreID.
const MaxStoreIDBytes = 256

// CheckStoreID returns why id cannot be a store's ID: empty, longer than
// MaxStoreIDBytes, or holding a control character or invalid UTF-8.
func CheckStoreID(id string) error {
	switch {
	case id == "":
		return errors.New("the store ID is empty")
	case len(id) > MaxStoreIDBytes:
		return fmt.Errorf("the store ID is %d bytes, more than %d", len(id), MaxStoreIDBytes)
	case !utf8.ValidString(id) || strings.IndexFunc(id, unicode.IsControl) >= 0:
		return fmt.Errorf("the store ID %q holds a control character or is not UTF-8", id)
	}
	return nil
}

// DefaultStoreID is the ID of the store at loc unless Config.StoreID
// names one: s3://BUCKET/PREFIX (the prefix "" or ending in "/"), which
// no other bucket or prefix has. The endpoint is not part of it: a store
// reached under another endpoint (a new DNS name, path style) is the same
// store; two servers holding a bucket of the same name need keys or IDs
// of their own.
func DefaultStoreID(loc Location) string { return loc.Name() }

// Keys are the keys that authenticate the shared store's objects: the
// current one, which signs what the store writes and verifies what it
// reads, and optionally a previous one, which still verifies (during a
// rotation, see docs/scaling-out.md). Every replica sharing a bucket must
// hold the same keys.
type Keys struct {
	current  key
	previous *key
}

type key struct {
	id     string // names the key in the objects, derived from it
	secret []byte
}

// NewKeys returns the keys current and, unless nil, previous; each at
// least MinKeyBytes long.
func NewKeys(current, previous []byte) (*Keys, error) {
	cur, err := newKey(current)
	if err != nil {
		return nil, err
	}
	k := &Keys{current: cur}
	if previous != nil {
		prev, err := newKey(previous)
		if err != nil {
			return nil, fmt.Errorf("previous key: %w", err)
		}
		if prev.id == cur.id {
			return nil, errors.New("the previous key is the current key")
		}
		k.previous = &prev
	}
	return k, nil
}

// MaxKeyFileBytes is the most read of a key file: a key is some 32 bytes.
const MaxKeyFileBytes = 64 << 10

// LoadKeys reads the current key from the file current and the previous
// one, unless previous is "", from the file previous. A key file holds
// the key's bytes as they are (e.g. head -c 32 /dev/urandom > FILE). It
// is read as every operator's file of secrets is
// (internal/inputfile.ReadTrusted): through a link (a mounted Secret's),
// never waiting on a FIFO, no further than MaxKeyFileBytes, and refused
// when users other than its owner may write it.
func LoadKeys(current, previous string) (*Keys, error) {
	cur, err := inputfile.ReadTrusted(current, MaxKeyFileBytes)
	if err != nil {
		return nil, fmt.Errorf("shared store key: %w", err)
	}
	var prev []byte
	if previous != "" {
		if prev, err = inputfile.ReadTrusted(previous, MaxKeyFileBytes); err != nil {
			return nil, fmt.Errorf("shared store previous key: %w", err)
		}
	}
	// Each key checked alone first, so that the error names the file at
	// fault, and which key it holds.
	if _, err := newKey(cur); err != nil {
		return nil, fmt.Errorf("shared store key: %s: %w", current, err)
	}
	if prev != nil {
		if _, err := newKey(prev); err != nil {
			return nil, fmt.Errorf("shared store previous key: %s: %w", previous, err)
		}
	}
	k, err := NewKeys(cur, prev)
	if err != nil {
		return nil, fmt.Errorf("shared store keys %s and %s: %w", current, previous, err)
	}
	return k, nil
}

func newKey(secret []byte) (key, error) {
	if len(secret) < MinKeyBytes {
		return key{}, fmt.Errorf("%d bytes, want at least %d (e.g. head -c 32 /dev/urandom > FILE)", len(secret), MinKeyBytes)
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("tfmirror shared-store key id"))
	return key{id: hex.EncodeToString(m.Sum(nil)[:8]), secret: append([]byte(nil), secret...)}, nil
}

// ID names the current key (in the objects it signs, and in logs); it
// tells nothing of the key.
func (k *Keys) ID() string { return k.current.id }

// PreviousID names the previous key; "" without one.
func (k *Keys) PreviousID() string {
	if k.previous == nil {
		return ""
	}
	return k.previous.id
}

// mac is the MAC under k of fields in format, each length-prefixed so
// that no two lists of fields make one message.
func (k key) mac(format int, fields ...string) []byte {
	m := hmac.New(sha256.New, k.secret)
	var n [8]byte
	for _, f := range append([]string{macDomains[format]}, fields...) {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		m.Write(n[:])
		m.Write([]byte(f))
	}
	return m.Sum(nil)
}

// sign returns the current key's ID and its MAC of fields in the current
// format.
func (k *Keys) sign(fields ...string) (id, mac string) {
	return k.current.id, base64.StdEncoding.EncodeToString(k.current.mac(macFormat, fields...))
}

// verify checks mac, made by the key named id, of fields in format.
func (k *Keys) verify(format int, id, mac string, fields ...string) error {
	if id == "" || mac == "" {
		return errors.New("not authenticated (written by an earlier release, or by something other than a replica)")
	}
	if macDomains[format] == "" {
		return fmt.Errorf("its MAC is of format %d, which this release does not know (written by a later release?)", format)
	}
	var use *key
	switch {
	case id == k.current.id:
		use = &k.current
	case k.previous != nil && id == k.previous.id:
		use = k.previous
	default:
		return fmt.Errorf("signed by key %s, which is neither the current nor the previous key", shown(id))
	}
	got, err := base64.StdEncoding.DecodeString(mac)
	if err != nil || !hmac.Equal(got, use.mac(format, fields...)) {
		return fmt.Errorf("its MAC under key %q does not match (changed, moved from another name, or written to another store than this one)", id)
	}
	return nil
}

// Kinds are the kinds of object the store authenticates, as
// Observer.SharedStoreRejected names them.
var Kinds = []string{"archive", "package", "versions", "module", "module_versions", "module_zip",
	"release_time", "oci_version", "oci_digest", "last_use", "record"}

// kindOf is the kind of the record under key.
func kindOf(key string) string {
	for _, k := range []struct{ prefix, kind string }{
		{"package/", "package"}, {"versions/", "versions"}, {"module/", "module"},
		{"modversions/", "module_versions"}, {"modzip/", "module_zip"}, {"release/", "release_time"},
		{"oci/version/", "oci_version"}, {"oci/digest/", "oci_digest"}, {"lastuse/", "last_use"},
	} {
		if strings.HasPrefix(key, k.prefix) {
			return k.kind
		}
	}
	return "record"
}

// metaDoc is how a record is kept in the store: the record, when it was
// stored, and the MAC binding both to the store, the record's kind and
// name. Format is the MAC's (absent: format 1).
type metaDoc struct {
	StoredAt string          `json:"stored_at"` // RFC 3339, UTC
	Record   json.RawMessage `json:"record"`
	Format   int             `json:"format,omitempty"`
	KeyID    string          `json:"key_id,omitempty"`
	MAC      string          `json:"mac,omitempty"`
}

// fields are what the MAC of the record stored under name (below the
// prefix) of kind binds in the current format.
func (d *metaDoc) fields(storeID, kind, name string) []string {
	return []string{storeID, kind, name, d.StoredAt, string(d.Record)}
}

// errEarlierFormat rejects a record authenticated in format 1, which did
// not bind the bucket: one copied from another bucket read under the same
// key would pass.
var errEarlierFormat = errors.New("authenticated in the format of an earlier release (1), which does not bind the store's ID; taken from the origin and written back in the current format")

// maxPutBack is how much later than a record's time of storing (by its
// writer's clock, under the MAC) the store may have written it (by the
// store's clock, its Last-Modified) and the record still be read: the
// most that a replica's clock and the store's disagree by (an S3 store
// refuses a request signed more than 15 minutes off its clock), plus the
// call that wrote it. A record written later than that was put back: a
// copy of an older record that someone kept, replayed (or one of a
// replica whose clock is that far behind, which the store itself would
// not have let write). A record assembled by a multipart upload, which
// AWS S3 dates at the upload's initiation, is refused before (getSmall,
// errMultipart). So a writer of the bucket without the key can roll
// a record back by minutes at most, never to one of months ago, on a bucket
// that keeps no older versions of its objects: on one with versioning,
// deleting the newest versions makes an older one current again with its
// own Last-Modified (AWS S3 keeps each version's), which this cannot tell
// from one just written, nor can anything else the store answers (a
// version ID included). The deployment keeps that out
// (docs/scaling-out.md, "Bucket versioning").
const maxPutBack = 15 * time.Minute

// GetMeta returns the record under key and when it was stored; a nil
// record when the store has none, or none that authenticates (which is
// counted and logged as rejected, not returned as an error): among them,
// one that the store wrote later than maxPutBack after its time of
// storing, one larger than any record a replica writes, and one assembled
// by a multipart upload (errMultipart). A record the store refuses to
// serve as it is stored (errUnreadable: archived, or encrypted with a
// customer's key) is none either, logged once: the next PutMeta replaces
// it.
//
// With a nil record, a time not zero says that the store holds a record
// under key that does not authenticate (of release 2.0.0's MAC format,
// another key's, changed, put back), and when the store wrote it: its
// Last-Modified, the store's own time, which a writer of the bucket
// cannot set. That it exists, and since when, is all that is known of
// such a record: retention counts a last use that does not authenticate
// as a download at that time, so that one written by a replica of the
// earlier release during a rolling upgrade is not taken for none. One
// larger than any a replica writes, one assembled by a multipart upload
// (which AWS S3 dates at the upload's initiation) and one the store
// refuses to serve give no time.
func (s *Store) GetMeta(ctx context.Context, key string) (record json.RawMessage, at time.Time, err error) {
	name := s.key("meta/" + key)
	raw, modified, release, err := s.getSmall(ctx, "get_meta", name)
	defer release()
	switch {
	case notWritten(err):
		s.rejected.reject(kindOf(key), name, err)
		return nil, time.Time{}, nil
	case errors.Is(err, errUnreadable):
		s.rejected.unreadable(kindOf(key), name, err)
		return nil, time.Time{}, nil
	}
	if err != nil || raw == nil {
		return nil, time.Time{}, err
	}
	record, at, why := s.cfg.Keys.openMeta(s.id, name, key, raw, modified, maxPutBack+s.cfg.CallTimeout)
	if why != nil {
		s.rejected.reject(kindOf(key), name, why)
		return nil, modified, nil
	}
	return record, at, nil
}

// openMeta returns the record that raw, read from the store whose ID is
// storeID under the record key key (bucketName in the bucket) and written
// there by the store at modified (zero: not known), holds, and its time of storing; or why it
// does not authenticate: not a stored record, of an earlier format, not
// made by these keys for that store, kind and name, or written to the
// store more than putBack after its time of storing or before it.
func (k *Keys) openMeta(storeID, bucketName, key string, raw []byte, modified time.Time, putBack time.Duration) (json.RawMessage, time.Time, error) {
	var doc metaDoc
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc.Record) == 0 {
		return nil, time.Time{}, fmt.Errorf("not a stored record: %v", err)
	}
	switch {
	case doc.Format < macFormat && doc.MAC != "" && kindOf(key) == "oci_digest":
		// A digest entry is a hint, never served as it is: the replica
		// builds the document again from the version's package record
		// (checked against its signature) and serves it only if it has
		// the digest (ocistore.Adopt). One of format 1 is read, so that a
		// digest a replica of the earlier release handed out still
		// resolves on this one's, as no origin can give it again.
		if err := k.verify(1, doc.KeyID, doc.MAC, kindOf(key), bucketName, doc.StoredAt, string(doc.Record)); err != nil {
			return nil, time.Time{}, err
		}
	case doc.Format < macFormat && doc.MAC != "":
		return nil, time.Time{}, errEarlierFormat
	default:
		if err := k.verify(doc.Format, doc.KeyID, doc.MAC, doc.fields(storeID, kindOf(key), "meta/"+key)...); err != nil {
			return nil, time.Time{}, err
		}
	}
	at, err := time.Parse(time.RFC3339Nano, doc.StoredAt)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("its time of storing: %w", err)
	}
	if late := modified.Sub(at); !modified.IsZero() && late > putBack {
		return nil, time.Time{}, fmt.Errorf("stored at %s but written to the bucket %s later (%s): put back from an older copy, or written by a replica whose clock is that far behind the store's",
			doc.StoredAt, late.Round(time.Second), modified.UTC().Format(time.RFC3339))
	}
	// A time of storing ahead of the writing is a replica's clock ahead:
	// the record would be taken for fresh for as long (a version list
	// never refreshed), so it is refused past the same bound as one
	// behind (within it, fresh for that much longer at most).
	if early := at.Sub(modified); !modified.IsZero() && early > putBack {
		return nil, time.Time{}, fmt.Errorf("stored at %s but written to the bucket %s earlier (%s): written by a replica whose clock is that far ahead of the store's",
			doc.StoredAt, early.Round(time.Second), modified.UTC().Format(time.RFC3339))
	}
	return doc.Record, at, nil
}

// PutMeta stores record under key, stamped with the time now and
// authenticated, replacing any record there.
func (s *Store) PutMeta(ctx context.Context, key string, record any) error {
	raw, err := json.Marshal(record)
	if err != nil {
		return err
	}
	name := s.key("meta/" + key)
	doc := metaDoc{StoredAt: s.cfg.Now().UTC().Format(time.RFC3339Nano), Record: raw, Format: macFormat}
	doc.KeyID, doc.MAC = s.cfg.Keys.sign(doc.fields(s.id, kindOf(key), "meta/"+key)...)
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return s.putSmall(ctx, "put_meta", name, b)
}

// archiveHeader vouches for the archive stored under Name: its sha256
// and size, bound to the name (and in format 2 to the store's ID) by the
// MAC. Name is the name below the prefix in format 2 (archives/SHA256),
// the key in the bucket in format 1 (no "format" field).
type archiveHeader struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Format int    `json:"format,omitempty"`
	KeyID  string `json:"key_id"`
	MAC    string `json:"mac"`
}

// fields are what the header's MAC binds in its format.
func (h *archiveHeader) fields(storeID string) []string {
	f := []string{"archive", h.Name, h.SHA256, strconv.FormatInt(h.Size, 10)}
	if h.Format < 2 {
		return f
	}
	return append([]string{storeID}, f...)
}

// OpenArchive opens the archive sha; it returns a nil body when the store
// does not have it, or has it without a header that authenticates (which
// is counted and logged as rejected, not returned as an error): among
// them, one whose header is larger than any a replica writes. So too
// when the store refuses to serve the archive or its header as it is
// stored (errUnreadable: archived, or encrypted with a customer's key),
// logged once: the next PutArchive of this store replaces both, where it
// would keep an archive the store has. The body returns a *verify.Error
// instead of its end unless the bytes are the header's size and sha256. The call timeout bounds the wait for the
// answer, ctx the reading of the body. The caller must close the body.
//
// A header in format 1, which does not bind the store's ID, is read: an
// archive is content-addressed, its sha256 comes from a record this
// replica trusts (its own, or one of the current format from the store),
// and every byte is checked against it, so one copied from another bucket
// under the same key is the very archive asked for. Taking it saves
// every replica the download of every archive on the upgrade.
func (s *Store) OpenArchive(ctx context.Context, sha string) (io.ReadCloser, int64, error) {
	if err := checkSHA(sha); err != nil {
		return nil, 0, err
	}
	name := s.key("archives/" + sha)
	body, size, err := s.openObject(ctx, "get_archive", name)
	if errors.Is(err, errUnreadable) {
		s.rejected.unreadableArchive(sha, name, err)
		return nil, 0, nil
	}
	if err != nil || body == nil {
		return nil, 0, err
	}
	header := s.key("archive-auth/" + sha)
	raw, _, release, err := s.getSmall(ctx, "get_archive_header", header)
	defer release()
	if errors.Is(err, errUnreadable) {
		body.Close()
		s.rejected.unreadableArchive(sha, header, err)
		return nil, 0, nil
	}
	if err != nil && !notWritten(err) {
		body.Close()
		return nil, 0, err
	}
	var h archiveHeader
	switch {
	case err != nil:
		err = fmt.Errorf("its header is %w", err)
	case raw == nil:
		err = errors.New("no header vouches for it (written by an earlier release, or by something other than a replica)")
	case json.Unmarshal(raw, &h) != nil:
		err = errors.New("its header is not a header")
	case h.SHA256 != sha || (h.Format < 2 && h.Name != name) || (h.Format >= 2 && h.Name != "archives/"+sha):
		err = fmt.Errorf("its header is the header of %s", shown(h.Name))
	default:
		err = s.cfg.Keys.verify(max(h.Format, 1), h.KeyID, h.MAC, h.fields(s.id)...)
	}
	if err == nil && size >= 0 && size != h.Size {
		err = fmt.Errorf("%d bytes, its header says %d", size, h.Size)
	}
	if err != nil {
		body.Close()
		s.rejected.rejectArchive(sha, name, err)
		return nil, 0, nil
	}
	return &checkedBody{ReadCloser: body, s: s, sha: sha, name: name, size: h.Size, h: sha256.New()}, h.Size, nil
}

// PutArchive stores the archive sha of size bytes read from r, unless the
// store has it already and this store found nothing wrong with it, and its
// header. The store checks the bytes against sha and keeps nothing unless
// they match; ctx (not the call timeout) bounds the upload.
func (s *Store) PutArchive(ctx context.Context, sha string, r io.ReadSeeker, size int64) error {
	if err := checkSHA(sha); err != nil {
		return err
	}
	h := archiveHeader{Name: "archives/" + sha, SHA256: sha, Size: size, Format: macFormat}
	h.KeyID, h.MAC = s.cfg.Keys.sign(h.fields(s.id)...)
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	// The header first: a replica that finds the archive finds its
	// header, and a header without its archive is no archive.
	if err := s.putSmall(ctx, "put_archive_header", s.key("archive-auth/"+sha), b); err != nil {
		return err
	}
	replace := s.rejected.isBad(sha)
	if err := s.putArchive(ctx, sha, r, size, replace); err != nil {
		return err
	}
	if replace {
		s.rejected.clearBad(sha)
	}
	return nil
}

// checkedBody is an archive's body that ends in an error, not io.EOF,
// unless its bytes are the size and sha256 its header vouched for.
type checkedBody struct {
	io.ReadCloser
	s    *Store
	sha  string
	name string
	size int64
	n    int64
	h    hash.Hash
	bad  error
}

func (b *checkedBody) Read(p []byte) (int, error) {
	if b.bad != nil {
		return 0, b.bad
	}
	n, err := b.ReadCloser.Read(p)
	b.h.Write(p[:n])
	b.n += int64(n)
	var why error
	switch {
	case b.n > b.size:
		why = fmt.Errorf("more than the %d bytes its header says", b.size)
	case err == io.EOF && b.n < b.size:
		why = fmt.Errorf("%d bytes, its header says %d", b.n, b.size)
	case err == io.EOF && hex.EncodeToString(b.h.Sum(nil)) != b.sha:
		why = errors.New("its bytes do not have the sha256 it is stored under")
	}
	if why != nil {
		b.s.rejected.rejectArchive(b.sha, b.name, why)
		// A verification failure, which the reader must not mend by
		// taking the rest from elsewhere: the bytes before were wrong too.
		b.bad = &verify.Error{Reason: verify.ReasonChecksum,
			Detail: fmt.Sprintf("the shared store's archive %s: %v", b.sha, why)}
		return n, b.bad
	}
	return n, err
}

// Rejected returns how many objects read from the store failed
// authentication since it was opened.
func (s *Store) Rejected() int64 { return s.rejected.total.Load() }

// maxLogged bounds the rejected objects logged each: beyond it they are
// counted only.
const maxLogged = 1024

// maxShownBytes bounds what an error or a log line quotes of a field of
// an object read from the store before it authenticated (a key ID, a
// header's name): whoever wrote the object chose it, of any length.
const maxShownBytes = 64

// maxReasonBytes bounds the reason logged for a rejected object, whatever
// it quotes (a JSON decoder's error quotes the number it could not take):
// a line each for maxLogged objects.
const maxReasonBytes = 1024

// shown is s quoted (%q) for an error or a log line: at most its first
// maxShownBytes, followed, when cut, by a mark saying so and its length.
func shown(s string) string {
	c, cut := prefix(s, maxShownBytes)
	if !cut {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q... (cut, %d bytes)", c, len(s))
}

// prefix is s cut to at most n bytes, not within a character, and
// whether it was cut.
func prefix(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// rejections remembers the objects rejected, so that each is logged
// once, and the archives whose bytes were wrong, so that the next put
// replaces them.
type rejections struct {
	store string // the store's ID, in the log
	log   *slog.Logger
	obs   Observer // nil: none
	total atomic.Int64

	mu     sync.Mutex
	logged map[string]bool
	full   bool
	bad    map[string]bool
}

// first reports whether the object kind/name is logged now: the first
// time it is rejected, while fewer than maxLogged were. more is true once,
// when the bound is reached.
func (r *rejections) first(kind, name string) (first, more bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := kind + "\x00" + name
	if r.logged[k] {
		return false, false
	}
	if len(r.logged) >= maxLogged {
		more, r.full = !r.full, true
		return false, more
	}
	if r.logged == nil {
		r.logged = make(map[string]bool)
	}
	r.logged[k] = true
	return true, false
}

func (r *rejections) markBad(sha string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bad == nil || len(r.bad) >= maxLogged {
		r.bad = make(map[string]bool)
	}
	r.bad[sha] = true
}

func (r *rejections) isBad(sha string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad[sha]
}

func (r *rejections) clearBad(sha string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.bad, sha)
}

// reject counts the object name of kind as rejected, and logs it the
// first time, with why cut at maxReasonBytes.
func (r *rejections) reject(kind, name string, why error) {
	r.total.Add(1)
	if r.obs != nil {
		r.obs.SharedStoreRejected(kind)
	}
	switch first, more := r.first(kind, name); {
	case first:
		reason, cut := prefix(why.Error(), maxReasonBytes)
		if cut {
			reason += "... (cut)"
		}
		r.log.Warn("shared store object failed authentication; ignored, taken from the origin instead (and written back authenticated)",
			"kind", kind, "object", name, "store_id", r.store, "reason", reason)
	case more:
		r.log.Warn("more shared store objects fail authentication; they are counted (tfmirror_shared_rejected_total), no longer logged each",
			"logged", maxLogged)
	}
}

// rejectArchive rejects the archive sha, stored under name, which the
// next put replaces.
func (r *rejections) rejectArchive(sha, name string, why error) {
	r.markBad(sha)
	r.reject("archive", name, why)
}

// unreadable logs, the first time, that the store refused to serve the
// object name of kind as it is stored (errUnreadable): taken as absent,
// and written again. It is no failure to authenticate (not counted as
// rejected): the store's answers count it
// (Observer.SharedStoreRequest's outcome "unreadable").
func (r *rejections) unreadable(kind, name string, why error) {
	switch first, more := r.first("unreadable\x00"+kind, name); {
	case first:
		r.log.Warn("the shared store refuses to serve an object as it is stored (an archived storage class such as S3 Glacier, or encrypted with a customer-provided key); taken as absent, from the origin instead, and written again readable. Keep the bucket's objects in a storage class served at once (no lifecycle rule archiving them), encrypted with SSE-S3 or SSE-KMS",
			"kind", kind, "object", name, "store_id", r.store, "reason", why.Error())
	case more:
		r.log.Warn("more shared store objects are refused as they are stored or fail authentication; no longer logged each",
			"logged", maxLogged)
	}
}

// unreadableArchive is unreadable for the archive sha (its bytes or its
// header under name), which the next put replaces.
func (r *rejections) unreadableArchive(sha, name string, why error) {
	r.markBad(sha)
	r.unreadable("archive", name, why)
}
