package retention

// The versions the engine holds as retention sees them, with their cached
// archives and their pins.

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/cache"
	mirrorheld "github.com/tfmirror/tfmirror/v2/mirror/inventory"
)

// held is one cached version as retention sees it.
type held struct {
	mirrorheld.Record
	cached     map[string]int64 // cached archives and their sizes
	keptCached map[string]int64 // cached archives of SetAside and their sizes
	newest     time.Time        // when the newest cached archive was stored
	// damaged are archives of the version (or set aside in its record)
	// that the cache holds but no longer serves: a read found them
	// damaged where they are stored (cache.ErrDamaged). They count as
	// cached for nothing but their removal with the version: named by
	// no record once it is gone, nothing would replace them.
	damaged  map[string]bool
	pinnedBy string // the pin's file:line, "" when not pinned
}

// scanHeld calls fn for every version the engine has a record of (of
// providers and modules) and every CLI version (Config.CLI), without its
// pin; fn may keep h. With stat, it asks the store which of each
// version's archives are cached (h.cached, h.newest); without, those are
// left empty.
func (r *Retainer) scanHeld(withStat bool, fn func(h *held)) error {
	visit := func(v mirrorheld.Record) {
		h := &held{Record: v}
		if withStat {
			// stat puts the size of each of shas the cache holds in sizes,
			// marks those it found damaged, and says when each was stored.
			stat := func(shas []string, sizes map[string]int64, stored func(time.Time)) {
				for _, sha := range shas {
					info, err := r.store.StatBlob(sha)
					switch {
					case errors.Is(err, cache.ErrDamaged):
						if h.damaged == nil {
							h.damaged = map[string]bool{}
						}
						h.damaged[sha] = true
					case err == nil:
						sizes[sha] = info.Size
						stored(info.Created)
					}
				}
			}
			h.cached = map[string]int64{}
			stat(h.Archives, h.cached, func(t time.Time) {
				if t.After(h.newest) {
					h.newest = t
				}
			})
			if len(h.SetAside) > 0 {
				h.keptCached = map[string]int64{}
				stat(h.SetAside, h.keptCached, func(time.Time) {})
			}
		}
		fn(h)
	}
	if err := r.eng.ScanVersions(visit); err != nil {
		return err
	}
	if r.cfg.CLI != nil {
		return r.cfg.CLI.ScanVersions(visit)
	}
	return nil
}

// holdings reads every version the engine has a record of, with the
// pins applied.
func (r *Retainer) holdings() ([]*held, error) {
	var out []*held
	if err := r.scanHeld(true, func(h *held) { out = append(out, h) }); err != nil {
		return nil, err
	}
	pins, _ := r.pins.current()
	applyPins(pins, out)
	return out, nil
}

// pinState is the pins as last read from the pin source.
type pinState struct {
	src  PinSource // nil: none
	once sync.Once // the first reading (first)
	// reading is held by a reading from src until its pins are set: the
	// background goroutine and a Prune read them, and the pins of an
	// earlier reading must not replace those of a later one.
	reading sync.Mutex

	mu   sync.Mutex
	pins *Pins
	err  error // of the last reading
}

// first reads the pins once, for whichever needs them first: the
// retention goroutine's first rebuild, or a Prune called before it (a
// `cache prune` on the data directory runs at once).
func (p *pinState) first(log *slog.Logger) { p.once.Do(func() { p.read(log) }) }

// read asks the pin source for changes; it reports whether the pins
// changed.
func (p *pinState) read(log *slog.Logger) bool {
	if p.src == nil {
		return false
	}
	p.reading.Lock()
	defer p.reading.Unlock()
	pins, changed, err := p.src.Pins()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if p.err == nil || p.err.Error() != err.Error() {
			log.Error("reading the pins; the pins read before are kept", "error", err)
		}
		p.err = err
		return false
	}
	p.err = nil
	if changed {
		p.pins = pins
		if pins.Skipped != "" {
			log.Warn("reading the pins; some were not read", "skipped", pins.Skipped)
		}
	}
	return changed
}

// lastErr is why the pins could not be read last time; nil if they could.
func (p *pinState) lastErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// unread is why the pins could not be read when none ever were: the
// rules then do not know what is pinned. nil once a reading succeeded
// (its pins are kept whatever fails after), or without a pin source.
func (p *pinState) unread() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.src == nil || p.pins != nil {
		return nil
	}
	return p.err
}

// current returns the pins, and whether a selection of the newest N
// needs every cached version to be resolved.
func (p *pinState) current() (pins *Pins, latest bool) {
	p.mu.Lock()
	pins = p.pins
	p.mu.Unlock()
	if pins == nil {
		return nil, false
	}
	for _, m := range []map[string][]PinSelection{pins.Providers, pins.Modules, pins.CLIs} {
		for _, sels := range m {
			for _, sel := range sels {
				latest = latest || sel.Latest > 0
			}
		}
	}
	return pins, latest
}

// get returns the pins.
func (p *pinState) get() *Pins {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pins
}

// pinnedBy returns the pin's file:line when version v of addr (kind
// provider or module) is pinned; cached are addr's cached versions, for
// selections of the newest N.
func pinnedBy(sels []PinSelection, v versions.Version, cached versions.List) (string, bool) {
	for _, sel := range sels {
		if !sel.Has(v) {
			continue
		}
		if sel.Latest <= 0 {
			return sel.Where, true
		}
		newer := 0
		for _, c := range cached {
			if sel.Has(c) && c.GreaterThan(v) {
				newer++
			}
		}
		if newer < sel.Latest {
			return sel.Where, true
		}
	}
	return "", false
}

func pinSelections(pins *Pins, h *held) []PinSelection {
	return pins.of(h.Kind, h.Address)
}

// of returns the selections that pin versions of address (kind
// "provider", "module" or "cli").
func (p *Pins) of(kind, address string) []PinSelection {
	if p == nil {
		return nil
	}
	switch kind {
	case "module":
		return p.Modules[address]
	case "cli":
		return p.CLIs[address]
	}
	return p.Providers[address]
}

// applyPins sets each version's pinnedBy from pins; a pin's "latest"
// selections count among the versions of hs that are cached.
func applyPins(pins *Pins, hs []*held) {
	if pins == nil {
		return
	}
	cached := map[string]versions.List{}
	for _, h := range hs {
		if len(h.cached) > 0 {
			cached[h.Kind+" "+h.Address] = append(cached[h.Kind+" "+h.Address], h.Version)
		}
	}
	for _, h := range hs {
		h.pinnedBy, _ = pinnedBy(pinSelections(pins, h), h.Version, cached[h.Kind+" "+h.Address])
	}
}
