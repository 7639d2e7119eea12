package records

// Module records keyed by a module's normal form. A module address is
// keyed in its normal form (addrs.Module.String: namespace, name and
// system in lowercase), so that every spelling of one module shares its
// records. Releases before that keyed a module's records by its namespace
// and name as the client spelled them: NormalizeModuleKeys moves what they
// wrote under the normal key, once, when the engine starts.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
)

// ModuleKeyPrefixes are the prefixes of the stored keys that a module
// address (HOST/NAMESPACE/NAME/SYSTEM) follows: the module side's version
// lists, records and zip records, the release times the package policy
// dates module versions by (mirror/gate), and the last uses retention
// counts (package retention).
var ModuleKeyPrefixes = []string{"modversions/", "module/", "modzip/", absentModulePrefix, lastUseModulePrefix}

// sharedModuleKeyPrefixes are those of ModuleKeyPrefixes whose records
// the module side shares with other replicas under the same key (the
// tier shared with them reads them by the module's normal form too).
var sharedModuleKeyPrefixes = []string{"modversions/", "module/", "modzip/"}

// ModuleKeyAside is the prefix under which NormalizeModuleKeys keeps a
// record it did not keep under its normal key, because the normal key
// held another of the same version (the module asked for in two
// spellings): ModuleKeyAside + the key it was found under, with "~N"
// after it when one was set aside under that key already (setAside).
// Nothing reads it; it is kept, not thrown away, for the operator.
const ModuleKeyAside = "modcase-aside/"

// NormalModuleKey returns key, a key of prefix (one of
// ModuleKeyPrefixes), with its module address in the normal form, and
// whether that differs from key.
func NormalModuleKey(prefix, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return key, false
	}
	parts := strings.SplitN(rest, "/", 5) // HOST, NAMESPACE, NAME, SYSTEM, the rest
	if len(parts) < 4 {
		return key, false
	}
	for i := 1; i <= 3; i++ {
		parts[i] = strings.ToLower(parts[i])
	}
	normal := prefix + strings.Join(parts, "/")
	return normal, normal != key
}

// KeyStore is what NormalizeModuleKeys needs of the cache. *cache.Store
// implements it.
type KeyStore interface {
	ScanMeta(prefix string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error
	GetMeta(key string, v any) (time.Time, error)
	PutMeta(key string, v any) error
	DeleteMeta(key string) error
	StatBlob(sha string) (cache.BlobInfo, error)
}

// NormalizeModuleKeys moves every document stored under a key of
// ModuleKeyPrefixes whose module address is not in the normal form (an
// earlier release's, of a module asked for in another case) to the normal
// key, with the module named in its record (ModuleRecord.Module) in the
// normal form too (a zip record keeps the name its manifest was made
// with). Nothing is thrown away:
// where the normal key holds a document already (the module was asked for
// in two spellings), the one to serve is kept under it (for a module
// record: the one whose package is cached, else the one that cannot be
// fetched again, an import, else the one there; for a release time or
// a last use: the later, datedByLatest; else the one there) and the
// other under
// ModuleKeyAside. A document moved is stored anew: a version list moved
// counts as fresh from then on. What is kept under a normal key of the
// module side's records (sharedModuleKeyPrefixes) is handed to share
// (mirror/stored.Source.Share; nil for none), so that the replicas
// sharing a store, which read it by the normal key, find what this one
// kept under another. It returns how many documents it moved; a document
// that could not be moved stays where it was, and is moved at the next
// start.
func NormalizeModuleKeys(store KeyStore, share func(key string, doc any), log *slog.Logger) (int, error) {
	moved := 0
	var errs []error
	for _, prefix := range ModuleKeyPrefixes {
		type found struct {
			key string
			raw json.RawMessage
		}
		var todo []found
		err := store.ScanMeta(prefix, func(key string, _ time.Time, raw json.RawMessage) error {
			if _, differs := NormalModuleKey(prefix, key); differs {
				todo = append(todo, found{key, append(json.RawMessage(nil), raw...)})
			}
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", prefix, err))
			continue
		}
		for _, f := range todo {
			normal, kept, err := normalizeModuleKey(store, prefix, f.key, f.raw, log)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			moved++
			if share != nil && slices.Contains(sharedModuleKeyPrefixes, prefix) {
				share(normal, kept)
			}
		}
	}
	return moved, errors.Join(errs...)
}

// normalizeModuleKey moves raw, stored under key (of prefix), to its
// normal key, and returns that key and what it keeps there.
func normalizeModuleKey(store KeyStore, prefix, key string, raw json.RawMessage, log *slog.Logger) (normal string, kept json.RawMessage, err error) {
	normal, _ = NormalModuleKey(prefix, key)
	doc := normalModuleField(prefix, raw)
	kept = doc
	var there json.RawMessage
	_, err = store.GetMeta(normal, &there)
	switch {
	case errors.Is(err, cache.ErrNotFound):
		if err := store.PutMeta(normal, doc); err != nil {
			return "", nil, fmt.Errorf("moving %s to %s: %w", key, normal, err)
		}
	case err != nil:
		return "", nil, fmt.Errorf("reading %s: %w", normal, err)
	case sameJSON(doc, there):
		// Moved already, by a start that stopped before it removed it
		// here: nothing to set aside.
	default:
		keep, aside, from := there, doc, key
		if prefix == "module/" && servesBetter(store, doc, there) || datedByLatest(prefix) && laterAt(doc, there) {
			keep, aside, from = doc, there, normal
		}
		asideKey, err := setAside(store, from, aside)
		if err != nil {
			return "", nil, err
		}
		if err := store.PutMeta(normal, keep); err != nil {
			return "", nil, fmt.Errorf("moving %s to %s: %w", key, normal, err)
		}
		kept = keep
		log.Warn("a module's records were kept under two spellings; the one served is kept under the module's normal form, the other set aside",
			"key", normal, "set_aside", asideKey)
	}
	if err := store.DeleteMeta(key); err != nil {
		return "", nil, fmt.Errorf("removing %s, moved to %s: %w", key, normal, err)
	}
	return normal, kept, nil
}

// maxAside bounds the documents set aside of one key: a module version
// asked for in more spellings than that by earlier releases is not
// moved (it stays where it is, and is read again at the next start).
const maxAside = 64

// setAside keeps doc, found under the key from, under ModuleKeyAside+from,
// and returns the key it is kept under. The normal key is from for each
// document that a better one replaces there, one spelling after another
// (a module version kept under three spellings or more): one set aside
// before is never written over, the next takes the first free of
// ModuleKeyAside+from+"~N". A document set aside already (the same
// document, sameJSON, by a start that stopped before it removed what it
// moved) is not set aside twice.
func setAside(store KeyStore, from string, doc json.RawMessage) (string, error) {
	for n := 0; n < maxAside; n++ {
		key := ModuleKeyAside + from
		if n > 0 {
			key += "~" + strconv.Itoa(n)
		}
		var there json.RawMessage
		_, err := store.GetMeta(key, &there)
		switch {
		case errors.Is(err, cache.ErrNotFound):
			if err := store.PutMeta(key, doc); err != nil {
				return "", fmt.Errorf("setting %s aside: %w", from, err)
			}
			return key, nil
		case err != nil:
			return "", fmt.Errorf("reading %s: %w", key, err)
		case sameJSON(there, doc):
			return key, nil
		}
	}
	return "", fmt.Errorf("setting %s aside: %d documents are set aside of it already", from, maxAside)
}

// sameJSON says a and b are the same JSON document: the same values,
// whatever the order of their objects' members and the space between.
func sameJSON(a, b json.RawMessage) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

// normalModuleField returns raw, a document of prefix, with the module
// it names in the normal form, where it names one: a module record. A
// zip record keeps the module as it named it, which its manifest's title
// (and so its digest, once handed out) was made of.
func normalModuleField(prefix string, raw json.RawMessage) json.RawMessage {
	if prefix != "module/" {
		return raw
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return raw
	}
	var m string
	if json.Unmarshal(fields["module"], &m) != nil {
		return raw
	}
	parts := strings.SplitN(m, "/", 4)
	for i := 1; i < len(parts); i++ {
		parts[i] = strings.ToLower(parts[i])
	}
	b, err := json.Marshal(strings.Join(parts, "/"))
	if err != nil {
		return raw
	}
	fields["module"] = b
	out, err := json.Marshal(fields)
	if err != nil {
		return raw
	}
	return out
}

// The prefixes of ModuleKeyPrefixes of a module version's times, each
// {"at": TIME}: its release time as the package policy dates it (the
// latest listing of the origin that did not yet name it, mirror/gate),
// and its last use (package retention's).
const (
	absentModulePrefix  = "release/absent/module/"
	lastUseModulePrefix = "lastuse/module/"
)

// datedByLatest says that of two documents of prefix, of one module
// version under two spellings, the later time is the version's: it was
// released after both listings that lacked it (the earlier would let a
// version younger than the minimum release age through), and last used
// at the later use (the earlier would have retention remove a version
// in use as unused).
func datedByLatest(prefix string) bool {
	return prefix == absentModulePrefix || prefix == lastUseModulePrefix
}

// laterAt says the time of a, {"at": TIME}, is later than b's.
func laterAt(a, b json.RawMessage) bool {
	var ta, tb struct {
		At time.Time `json:"at"`
	}
	_ = json.Unmarshal(a, &ta)
	_ = json.Unmarshal(b, &tb)
	return ta.At.After(tb.At)
}

// servesBetter says the module record a serves the version better than
// b: its package is cached and b's is not, or, both alike, a cannot be
// fetched again (an import) and b can.
func servesBetter(store KeyStore, a, b json.RawMessage) bool {
	var ra, rb ModuleRecord
	_ = json.Unmarshal(a, &ra) // decoded whatever today's rules say of it
	_ = json.Unmarshal(b, &rb)
	cached := func(r ModuleRecord) bool {
		if r.SHA256 == "" {
			return false
		}
		_, err := store.StatBlob(r.SHA256)
		return err == nil
	}
	if ca, cb := cached(ra), cached(rb); ca != cb {
		return ca
	}
	return ra.Provenance != ProvenanceOrigin && rb.Provenance == ProvenanceOrigin
}
