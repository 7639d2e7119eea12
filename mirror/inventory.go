package mirror

// What the engine tells retention of the versions it holds: their
// listings and removals (package mirror/inventory), what it does with them
// (inventory.Notifier), and the engine's configuration.

import (
	"github.com/tfmirror/tfmirror/v2/mirror/inventory"
	"github.com/tfmirror/tfmirror/v2/mirror/lifetime"
)

// Inventory is what the engine tells of the versions it holds, and lets go
// of, for the retention rules kept above it: its listings (ScanVersions,
// VersionOfRecord), removals (RemoveVersion, DropSetAside) and the
// package policy's view of what it holds (Policy, KnownRelease,
// StoredVerdict) of inventory.Inventory, its notifications (Notify) and its
// configuration. Engine.Inventory returns it.
type Inventory struct {
	*inventory.Inventory
	life *lifetime.Lifetime // holds the notifier
	cfg  Config             // the engine's, in effect
}

// Config returns the engine's configuration in effect (Engine.Config),
// which retention reads its clock, logger and tiers from.
func (s *Inventory) Config() Config { return s.cfg.clone() }

// Notify makes the engine tell n what it serves and imports from now on.
// An engine has one Notifier: Notify fails when it has one already.
func (s *Inventory) Notify(n inventory.Notifier) error {
	return s.life.SetNotifier(n)
}
