package modules_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// A module's version list offers only versions its doors serve: one the
// origin lists that is not a version (addrs.ParseModuleVersion) is left
// out, as the providers' lists leave theirs out. Terraform and OpenTofu
// would take "1.2.0.0" (hashicorp/go-version reads four parts) as the
// newest and ask the door for it, which refuses it: left out, the client
// installs the newest version the mirror serves. Versions in any
// spelling the doors accept stay as the origin spells them.
func TestModuleListOffersWhatTheDoorsServe(t *testing.T) {
	t.Parallel()
	h := harness.New(t, harness.Options{})
	h.Origin.AddTarball("m.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# m\n")}))
	listed := []string{"1.0.0", "v1.1.0", "1.2.0.0", "latest", "1.3.0-", "1.1.0-rc~1", strings.Repeat("9", 300) + ".0.0", "01.4.0"}
	for _, v := range listed {
		h.Origin.AddModule(harness.Module.Namespace, harness.Module.Name, harness.Module.System, v, h.Origin.TarballURL("m.tar.gz"))
	}
	list, _, err := h.Engine.Modules().ModuleVersions(context.Background(), harness.Module)
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Clone(list.Versions)
	slices.Sort(got)
	if want := []string{"01.4.0", "1.0.0", "v1.1.0"}; !slices.Equal(got, want) {
		t.Errorf("listed %q, want %q", got, want)
	}
}
