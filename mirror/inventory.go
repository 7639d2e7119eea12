package mirror

// What the engine tells retention of the versions it holds: their
// listings and removals (package mirror/inventory), what it does with them
// (inventory.Notifier), and the engine's configuration.

import (
	"context"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/inventory"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// Held is what the engine tells of the versions it holds, and lets go
// of, for the retention rules kept above it: its listings (ScanVersions,
// VersionOfRecord), removals (RemoveVersion, DropSetAside) and the
// package policy's view of what it holds (Policy, KnownRelease,
// StoredVerdict) of inventory.Inventory, its notifications (Notify) and its
// configuration.
// Engine.Held returns it.
type Inventory struct {
	*inventory.Inventory
	e *Engine // the notifier and the configuration
}

// Config returns the engine's configuration in effect (Engine.Config),
// which retention reads its clock, logger and tiers from.
func (s *Inventory) Config() Config { return s.e.Config() }

// Notify makes the engine tell n what it serves and imports from now on.
// An engine has one Notifier: Notify fails when it has one already.
func (s *Inventory) Notify(n inventory.Notifier) error {
	return s.e.life.SetNotifier(n)
}

// inventoryEngine is the engine as Held uses it (inventory.Engine).
type inventoryEngine struct{ e *Engine }

func (m inventoryEngine) Offline() bool                             { return m.e.cfg.Offline }
func (m inventoryEngine) Local(host svchost.Hostname) bool          { return m.e.hosts.local(host) }
func (m inventoryEngine) Forget(key string)                         { m.e.memo.Forget(key) }
func (m inventoryEngine) ForgetWithheld(p addrs.Provider, v string) { m.e.withholding.Forget(p, v) }
func (m inventoryEngine) CachedVersions(key string) (*records.VersionList, time.Time, error) {
	return m.e.memo.CachedVersions(key)
}
func (m inventoryEngine) RemoveOCI(p addrs.Provider, v versions.Version, archives []string) error {
	return m.e.oci.Remove(m.e.store, p, v, archives)
}
func (m inventoryEngine) Policy() *policy.Policy { return m.e.gate.Current() }
func (m inventoryEngine) Now() time.Time         { return m.e.cfg.Now() }
func (m inventoryEngine) KnownRelease(ctx context.Context, kind policy.Kind, address, version string, window time.Duration) (policy.Release, error) {
	return m.e.gate.KnownRelease(ctx, kind, address, version, window)
}
