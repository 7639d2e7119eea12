package mirror

import (
	"context"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// machinery is the engine's machinery as the module side uses it
// (modules.Engine): detached work and its coalescing, the shared tier's
// records and leases, the notifier, the import lock, the hosts, and the
// package policy (mirror/gate).
type machinery struct{ e *Engine }

var _ modules.Engine = machinery{}

func (m machinery) Allowed(host svchost.Hostname) bool { return m.e.hosts.Allowed(host) }
func (m machinery) Local(host svchost.Hostname) bool   { return m.e.hosts.Local(host) }
func (m machinery) RecordImportedHost(host svchost.Hostname) error {
	return m.e.hosts.Record(host)
}

func (m machinery) FilterModules(mod addrs.Module, list *records.ModuleVersionList) (*records.ModuleVersionList, error) {
	out, _, err := m.e.gate.FilterModules(mod, list)
	return out, err
}
func (m machinery) CheckModule(ctx context.Context, mod addrs.Module, version string, relist func(context.Context) error) error {
	return m.e.gate.CheckModule(ctx, mod, version, relist)
}
func (m machinery) NoteListing(ctx context.Context, kind, address string, prev []string, prevAt time.Time, next []string) {
	m.e.gate.NoteListing(ctx, kind, address, prev, prevAt, next)
}
