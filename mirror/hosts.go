package mirror

import (
	"fmt"
	"sync"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// hosts are the engine's provider and module hosts: the allowed origins,
// and the hosts Import or ImportModule loaded packages of, which are
// local-only unless they are allowed origins (served from the cache, never
// contacted; see Engine.CheckOrigin).
type hosts struct {
	allowed map[svchost.Hostname]bool // the engine's, set by New
	store   Store

	mu       sync.RWMutex
	imported map[svchost.Hostname]bool
}

// local reports whether host is local-only: not an allowed origin, but a
// host Import has loaded providers of.
func (h *hosts) local(host svchost.Hostname) bool {
	if h.allowed[host] {
		return false
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.imported[host]
}

// record records host as one that Import or ImportModule loaded packages
// of (local-only unless it is an allowed origin).
func (h *hosts) record(host svchost.Hostname) error {
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
