package modules_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// hostWriteFails is a store whose writes of an imported host's record
// fail while fail is set: the process dies, or the disk fills, between
// the write of an imported module's record and that of its host.
type hostWriteFails struct {
	harness.Store
	fail *atomic.Bool
}

func (s hostWriteFails) PutMeta(key string, v any) error {
	if s.fail.Load() && strings.HasPrefix(key, records.ImportedHostPrefix) {
		return errors.New("killed before the host was recorded")
	}
	return s.Store.PutMeta(key, v)
}

// An import of a module under a host that is no allowed origin that
// stopped once the module's record was written, before its host was
// recorded local-only, is completed by importing it again: the package
// is present, and the host is recorded, so the mirror serves the module
// (before, the import again said the package was present and recorded
// nothing, and the module's host stayed refused for good).
func TestImportModuleAgainRecordsItsHost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var fail atomic.Bool
	opts := harness.Options{CacheDir: dir, Config: harness.Config{ScratchDir: t.TempDir()},
		Wrap: func(s harness.Store) harness.Store { return hostWriteFails{Store: s, fail: &fail} }}
	h := harness.New(t, opts)
	m := addrs.Module{Hostname: "modules.internal.example", Namespace: "acme", Name: "net", System: "aws"}
	pkg := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one\n")})
	in := modules.Imported{Module: m, Version: "1.0.0", Location: "https://modules.internal.example/net-1.0.0.tar.gz",
		SHA256: sha256Hex(pkg), Open: opener(pkg)}
	ctx := context.Background()

	fail.Store(true)
	if _, err := h.Engine.Modules().ImportModule(ctx, in); err == nil {
		t.Fatal("ImportModule succeeded though its host could not be recorded")
	}
	fail.Store(false)
	// The process starts again on the same data directory.
	h.Stop()
	h.Start(opts)

	res, err := h.Engine.Modules().ImportModule(ctx, in)
	if err != nil {
		t.Fatalf("importing again: %v", err)
	}
	if !res.Present {
		t.Errorf("importing again: %+v, want the package present", res)
	}
	list, _, err := h.Engine.Modules().ModuleVersions(ctx, m)
	if err != nil {
		t.Fatalf("the versions of the module imported again: %v", err)
	}
	if len(list.Versions) != 1 || list.Versions[0] != "1.0.0" {
		t.Errorf("the versions of the module imported again: %+v, want 1.0.0", list)
	}
	p, err := h.Engine.Modules().OpenModule(ctx, m, enginetest.MustModuleVersion(t, "1.0.0"))
	if err != nil {
		t.Fatalf("the module imported again: %v", err)
	}
	p.Close()
}
