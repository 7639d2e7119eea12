package modules_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
)

// Many clients, in every spelling of one module version, asking for its
// package and its zip while it is fetched, evicted, and imported: one
// package and one zip.
func TestModuleConcurrentSpellingsOnePackage(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{Config: harness.Config{ScratchDir: t.TempDir()}, Origin: fakeorigin.Options{ModulesAnyCase: true}})
	o := h.Origin
	o.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# one\n"), "sub/x.tf": []byte("x\n")}))
	o.AddModule("acme", "vpc", "aws", "v1.0.0", o.TarballURL("m.tar.gz")+"//sub")
	spell := func(i int) (addrs.Module, string) {
		ns, name := "acme", "vpc"
		if i%3 == 1 {
			ns, name = "ACME", "Vpc"
		}
		m, err := addrs.NewModule(harness.OriginHost, ns, name, "aws")
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			return m, "v1.0.0"
		}
		return m, "1.0.0"
	}
	ctx := context.Background()
	var mu sync.Mutex
	pkgs, zips := map[string]bool{}, map[string]bool{}
	var wg sync.WaitGroup
	var imp []byte
	round := func(withImport bool) {
		for i := range 24 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m, raw := spell(i)
				v := enginetest.MustModuleVersion(t, raw)
				switch {
				case withImport && i%8 == 7:
					_, err := h.Engine.Modules().ImportModule(ctx, modules.Imported{Module: m, Version: raw,
						Location: o.TarballURL("m.tar.gz") + "//sub", SHA256: sha256Hex(imp), Open: opener(imp)})
					if err != nil {
						t.Errorf("import %d: %v", i, err)
					}
				case i%2 == 0:
					p, err := h.Engine.Modules().OpenModule(ctx, m, v)
					if err != nil {
						t.Errorf("package %d: %v", i, err)
						return
					}
					b, _ := io.ReadAll(p.Content())
					p.Close()
					mu.Lock()
					pkgs[fmt.Sprintf("%s/%x", p.SHA256, sha256Hex(b))] = true
					mu.Unlock()
				default:
					z, err := h.Engine.Modules().Zips().OpenModuleZip(ctx, m, v)
					if err != nil {
						t.Errorf("zip %d: %v", i, err)
						return
					}
					z.Close()
					mu.Lock()
					zips[z.Record.SHA256+"/"+z.Record.Package] = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	round(false)
	p, err := h.Engine.Modules().OpenModule(ctx, harness.Module, enginetest.MustModuleVersion(t, "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	imp, _ = io.ReadAll(p.Content())
	p.Close()
	for range 3 {
		cachetest.DeleteBlob(h.Store, sha256Hex(imp))
		round(true)
	}
	if len(pkgs) != 1 || len(zips) != 1 {
		t.Errorf("packages %v, zips %v: want one of each", pkgs, zips)
	}
	n := 0
	h.Engine.Modules().ListCachedModules(func(modules.Cached) error { n++; return nil })
	if n != 1 {
		t.Errorf("%d records", n)
	}
}
