package releases

// The CLI versions the releases side holds, as the retention rules kept
// above it (package retention) see them, as they see the engine's
// provider and module versions (mirror/inventory): Inventory.
//
// A version is one record, its SHA256SUMS (sumsKey); its archives are the
// engine's blobs, cached or not. Removing a version's archives leaves the
// SHA256SUMS: the door fetches the archives again when asked, or, sealed,
// answers that it does not hold them (OpenArchive). A version that cannot
// be fetched again (imported from a bundle: Sums.Provenance; anything on
// a sealed mirror) loses its SHA256SUMS only when a prune names it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/mirror/inventory"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// Kind is the kind of a CLI version in the listings retention reads
// (inventory.Record.Kind), beside "provider" and "module".
const Kind = "cli"

// sumsPrefix keys the stored SHA256SUMS: releases/sums/PUBLISHER/PRODUCT/VERSION.
const sumsPrefix = "releases/sums/"

// PublisherOf is the publisher of a product as manifests and pins name
// it: "tofu" is OpenTofu's, any other name a HashiCorp product.
func PublisherOf(product string) Publisher {
	if product == TofuProduct {
		return OpenTofu
	}
	return HashiCorp
}

// ParseAddress reads an address Address gives (the address the policy
// and retention name a product by).
func ParseAddress(address string) (Publisher, string, bool) {
	if product, ok := strings.CutPrefix(address, "get.opentofu.org/opentofu/"); ok && product == TofuProduct {
		return OpenTofu, product, true
	}
	if product, ok := strings.CutPrefix(address, "releases.hashicorp.com/hashicorp/"); ok && validProduct(product) {
		return HashiCorp, product, true
	}
	return "", "", false
}

// Inventory is what the releases side tells retention of the CLI
// versions it holds: the versions it has a verified SHA256SUMS of, with
// the archives that SHA256SUMS names and whether they can be fetched
// again (ScanVersions), what the door serves (Notify), the removal of a
// version that cannot be fetched again (RemoveVersion), and the package
// policy's verdict on a version it holds (StoredVerdict). It decides
// nothing of what is kept. Releases.Inventory returns it.
type Inventory struct {
	r *Releases
}

// Inventory returns the releases side's Inventory.
func (r *Releases) Inventory() *Inventory { return &Inventory{r: r} }

// notifier holds the Notifier (none until Notify).
type notifier struct {
	n atomic.Pointer[inventory.Notifier]
}

// serving tells the Notifier, if any, that archive sha of a version is
// about to be served.
func (h *notifier) serving(pub Publisher, product, version, sha string) {
	p := h.n.Load()
	if p == nil {
		return
	}
	v, err := versions.ParseVersion(version)
	if err != nil {
		return
	}
	n := *p
	n.Used(sumsKey(pub, product, version))
	n.Serving(Kind, Address(pub, product), v, sha)
}

// Notify makes the releases side tell n which versions it serves from now
// on (Used and Serving, with kind Kind, before an archive is opened). It
// has one Notifier: Notify fails when it has one already.
func (s *Inventory) Notify(n inventory.Notifier) error {
	if n == nil {
		return errors.New("releases: a nil Notifier")
	}
	if !s.r.notify.n.CompareAndSwap(nil, &n) {
		return errors.New("releases: a Notifier is set already")
	}
	return nil
}

// ScanVersions calls fn with every CLI version the cache has a SHA256SUMS
// of: kind Kind, the product's Address, the version, the record's key, the
// sha256s of the archives it lists (by file name), and whether they can be
// fetched again. The records were verified when stored; they are read here
// without verifying their signatures again (nothing is served from this
// listing).
func (s *Inventory) ScanVersions(fn func(inventory.Record)) error {
	return s.r.store.ScanMeta(sumsPrefix, func(key string, _ time.Time, raw json.RawMessage) error {
		if rec, ok := s.versionOfRecord(key, raw); ok {
			fn(rec)
		} else {
			// Of a newer release's schema (after a rollback), or
			// damaged: what it names may not be fetched again.
			fn(unreadableSums(key, raw))
		}
		return nil
	})
}

// unreadableSums is the inventory.KindUnreadable record of the SHA256SUMS
// record raw under key: the sha256s of its text, and of its document's
// (stored in base64) when that still reads.
func unreadableSums(key string, raw json.RawMessage) inventory.Record {
	rec := inventory.Unreadable(key, raw)
	var doc struct {
		Document []byte `json:"document"`
	}
	if json.Unmarshal(raw, &doc) == nil && len(doc.Document) > 0 {
		for _, sha := range inventory.Unreadable(key, doc.Document).Archives {
			if !slices.Contains(rec.Archives, sha) {
				rec.Archives = append(rec.Archives, sha)
			}
		}
	}
	return rec
}

// versionOfRecord is the version of the SHA256SUMS record raw under key;
// false for one that does not read.
func (s *Inventory) versionOfRecord(key string, raw json.RawMessage) (inventory.Record, bool) {
	var sums Sums
	if json.Unmarshal(raw, &sums) != nil || sums.Schema != sumsSchema || key != sumsKey(sums.Publisher, sums.Product, sums.Version) {
		return inventory.Record{}, false
	}
	v, err := versions.ParseVersion(sums.Version)
	if err != nil {
		return inventory.Record{}, false
	}
	files, err := verify.ParseSHA256SUMS(sums.Document)
	if err != nil {
		return inventory.Record{}, false
	}
	sums.files = files
	rec := inventory.Record{Kind: Kind, Address: Address(sums.Publisher, sums.Product), Version: v, Raw: sums.Version, Key: key,
		Refetch: !s.r.cfg.Offline && sums.Provenance == records.ProvenanceOrigin}
	for _, b := range sums.Builds() {
		rec.Archives = append(rec.Archives, b.SHA256)
	}
	return rec, true
}

// RemoveVersion removes version of the product address (kind Kind) from
// the cache: its SHA256SUMS and the files kept beside it, so that it is
// no longer listed sealed and is fetched again, when it can be, before it
// is served. Retention calls it for a version that cannot be fetched
// again, once its archives are removed. It waits for an import under way
// (Releases.imports).
func (s *Inventory) RemoveVersion(kind, address, version string) error {
	r := s.r
	pub, product, ok := ParseAddress(address)
	if kind != Kind || !ok {
		return fmt.Errorf("releases: %s %q is not a CLI product", kind, address)
	}
	if _, err := CanonicalVersion(version); err != nil {
		return err
	}
	r.imports.Lock() // not while an import is under way (Releases.imports)
	defer r.imports.Unlock()
	key := sumsKey(pub, product, version)
	var files []string
	prefix := "releases/file/" + string(pub) + "/" + product + "/" + version + "/"
	if err := r.store.ScanMeta(prefix, func(k string, _ time.Time, _ json.RawMessage) error {
		files = append(files, k)
		return nil
	}); err != nil {
		return err
	}
	for _, k := range append(files, key) {
		if err := r.store.DeleteMeta(k); err != nil && !errors.Is(err, cache.ErrNotFound) {
			return err
		}
	}
	r.mu.Lock()
	delete(r.sums, key)
	r.mu.Unlock()
	return nil
}

// StoredVerdict is the verdict of pol (the package policy in force; nil:
// everything allowed), now, on version of the product address, dated by
// what the cache holds (its SHA256SUMS signature's time and the listing
// rule), as the door's policy layer (mirror/served.Releases) would judge
// it; nothing is fetched. An address that is not a CLI product's is
// allowed (retention asks only of the versions ScanVersions lists).
func (s *Inventory) StoredVerdict(pol *policy.Policy, address, version string) policy.Verdict {
	r := s.r
	pub, product, ok := ParseAddress(address)
	if pol == nil || !ok {
		return policy.Verdict{Allowed: true}
	}
	return pol.Version(policy.Provider, address, version, r.StoredRelease(pub, product, version), r.cfg.Now())
}
