package admin

import (
	"encoding/json"
	"testing"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	engineharness "github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/retention"
)

// tfmirror cache prune of a provider of an IDN host (with a port, too)
// sends its address in the normal form, punycode, as it does any
// address: the API takes it.
func TestAdminPruneIDNProvider(t *testing.T) {
	h := newHarness(t, harnessOptions{retention: retention.Config{Interval: -1}})
	a := h.newAPI(t, nil, nil, Options{})
	_, post := socket(t, a)
	for _, host := range []string{"xn--bcher-kva.example", "xn--bcher-kva.example:8443"} {
		p := addrs.Provider{Hostname: svchost.Hostname(host), Namespace: "acme", Type: "thing"}
		for _, v := range []string{"1.0.0", "2.0.0"} {
			in, _ := engineharness.UnsignedImport(t, p, v)
			if _, err := h.engine.AirGap().Import(t.Context(), in); err != nil {
				t.Fatal(err)
			}
		}
		code, raw := post("/v1/prune", `{"provider":"`+p.String()+`","versions":["1.0.0"]}`)
		var out Pruned
		if code == 200 {
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatal(err)
			}
		}
		if code != 200 || out.Versions != 1 {
			t.Errorf("prune of %s 1.0.0: %d %s", p, code, raw)
		}
	}
}
