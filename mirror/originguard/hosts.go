package originguard

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// HostStore is what Hosts keeps in the cache: the hosts imports loaded
// packages of. *cache.Store implements it.
type HostStore interface {
	PutMeta(key string, v any) error
	ScanMeta(prefix string, fn func(key string, storedAt time.Time, raw json.RawMessage) error) error
}

// Hosts are the engine's provider and module hosts: the allowed origins,
// and the hosts Import or ImportModule loaded packages of, which are
// local-only unless they are allowed origins (served from the cache, never
// contacted). Its methods are safe for concurrent use.
type Hosts struct {
	allowed map[svchost.Hostname]bool // set by NewHosts, read only
	store   HostStore

	mu       sync.RWMutex
	imported map[svchost.Hostname]bool
}

// NewHosts returns the hosts of an engine whose allowed origins are
// allowed (in svchost comparison form), with the imported hosts recorded
// in store before.
func NewHosts(allowed []svchost.Hostname, store HostStore) (*Hosts, error) {
	h := &Hosts{allowed: map[svchost.Hostname]bool{}, store: store, imported: map[svchost.Hostname]bool{}}
	for _, host := range allowed {
		h.allowed[host] = true
	}
	err := store.ScanMeta(records.ImportedHostPrefix, func(key string, _ time.Time, _ json.RawMessage) error {
		if host, err := addrs.ParseHost(strings.TrimPrefix(key, records.ImportedHostPrefix)); err == nil {
			h.imported[host] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the hosts of imported providers: %w", err)
	}
	return h, nil
}

// Allowed reports whether host is an allowed origin.
func (h *Hosts) Allowed(host svchost.Hostname) bool { return h.allowed[host] }

// Check returns nil when host is served (an allowed origin or a
// local-only host), and an error wrapping discovery.ErrHostNotAllowed
// otherwise.
func (h *Hosts) Check(host svchost.Hostname) error {
	if !h.allowed[host] && !h.Local(host) {
		return fmt.Errorf("%w: %s", discovery.ErrHostNotAllowed, host)
	}
	return nil
}

// Record records host as one that Import or ImportModule loaded packages
// of (local-only unless it is an allowed origin).
func (h *Hosts) Record(host svchost.Hostname) error {
	h.mu.RLock()
	known := h.imported[host]
	h.mu.RUnlock()
	if known {
		return nil
	}
	if err := h.store.PutMeta(records.ImportedHostPrefix+string(host), struct{}{}); err != nil {
		return fmt.Errorf("recording imported host %s: %w", host, err)
	}
	h.mu.Lock()
	h.imported[host] = true
	h.mu.Unlock()
	return nil
}
