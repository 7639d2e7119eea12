package ocistore

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/sha256hex"
)

// Remover reads and deletes the cache's records. *cache.Store implements
// it.
type Remover interface {
	GetMeta(key string, v any) (time.Time, error)
	DeleteMeta(key string) error
}

// RemoveVersion deletes the OCI records of version v of p from store: the
// digest entry of every document its record kept and of every archive
// (sha256s) of the version, then its record. It is for a version the
// engine lets go of (mirror/inventory's RemoveVersion), which OCI resolves no
// longer anyway (its package record is gone): what it removes is what
// would otherwise stay in the cache for ever. A later index of the
// version, fetched again, keeps its documents anew (OCI.Forget).
func RemoveVersion(store Remover, p addrs.Provider, v versions.Version, archives []string) error {
	key := ociRecordKey(p, v)
	var rec ociRecord
	if _, err := store.GetMeta(key, &rec); err != nil && !errors.Is(err, cache.ErrNotFound) {
		return fmt.Errorf("reading the OCI record of %s %s: %w", p, v, err)
	}
	var keys []string
	for d := range rec.Documents {
		if dg, err := digest.Parse(d); err == nil {
			keys = append(keys, ociDigestKey(p, dg))
		}
	}
	for _, sha := range archives {
		if sha256hex.Valid(sha) {
			keys = append(keys, ociDigestKey(p, digest.NewDigestFromEncoded(digest.SHA256, sha)))
		}
	}
	for sha := range rec.Sizes {
		if sha256hex.Valid(sha) {
			keys = append(keys, ociDigestKey(p, digest.NewDigestFromEncoded(digest.SHA256, sha)))
		}
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 && k == keys[i-1] {
			continue
		}
		if err := store.DeleteMeta(k); err != nil {
			return fmt.Errorf("deleting an OCI digest of %s %s: %w", p, v, err)
		}
	}
	if err := store.DeleteMeta(key); err != nil {
		return fmt.Errorf("deleting the OCI record of %s %s: %w", p, v, err)
	}
	return nil
}

// Forget drops what o remembers of version v of p, once its records were
// removed (RemoveVersion): its record, with which digests are stored, so
// that an index of the version built again keeps its documents anew,
// and the documents read back by digest. Removals are rare: the
// documents' memo is cleared whole. (An index kept hot by its caller
// ends with the version's package record: see Answer's Holds.)
func (o *OCI) Forget(p addrs.Provider, v versions.Version) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.forgetLocked(p, v)
}

// forgetLocked is Forget, o.mu held.
func (o *OCI) forgetLocked(p addrs.Provider, v versions.Version) {
	o.recs.Forget(ociRecordKey(p, v))
	o.docs.Clear()
	o.dropped.Add(1)
}

// Sides are the OCI sides built on one engine, told of the versions it
// lets go of. The zero Sides has none.
type Sides struct {
	mu   sync.Mutex
	list []*OCI
}

// Add adds o, which tells the others of the records it drops.
func (s *Sides) Add(o *OCI) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, o)
	o.side = s
}

// forgetOthers has every side but o forget version v of p.
func (s *Sides) forgetOthers(o *OCI, p addrs.Provider, v versions.Version) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, other := range s.list {
		if other != o {
			other.Forget(p, v)
		}
	}
}

// Remove deletes the OCI records of version v of p from store (see
// RemoveVersion), and has every side forget them.
func (s *Sides) Remove(store Remover, p addrs.Provider, v versions.Version, archives []string) error {
	err := RemoveVersion(store, p, v, archives)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.list {
		o.Forget(p, v)
	}
	return err
}
