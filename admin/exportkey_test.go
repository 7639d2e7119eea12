package admin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/airgap"
)

// TestExportKeyAnswersThePublicKeyAlone: /v1/export-key answers the
// fingerprint, the public key and the file of the key the serve signs
// with, never its private part; with no key configured it fails.
func TestExportKeyAnswersThePublicKeyAlone(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	key, _ := exportKeyPair(t)
	var public strings.Builder
	if err := key.WritePublic(&public); err != nil {
		t.Fatal(err)
	}
	_, post := socket(t, h.newAPI(t, nil, nil, Options{ExportKey: func() (*airgap.ExportKey, error) { return key, nil }, ExportKeyFile: "/etc/tfmirror/export-key.asc"}))
	status, body := post("/v1/export-key", `{}`)
	if status != 200 {
		t.Fatalf("export-key: %d %s", status, body)
	}
	var info ExportKeyInfo
	if err := json.Unmarshal(body, &info); err != nil {
		t.Fatal(err)
	}
	if info.Fingerprint != key.Fingerprint() || info.Where != "/etc/tfmirror/export-key.asc" || info.PublicKey != public.String() {
		t.Errorf("answer %+v; want fingerprint %s and the public key", info, key.Fingerprint())
	}
	if strings.Contains(string(body), "PRIVATE") {
		t.Errorf("the answer holds a private key:\n%s", body)
	}

	_, none := socket(t, h.newAPI(t, nil, nil, Options{}))
	if status, body := none("/v1/export-key", `{}`); status == 200 {
		t.Errorf("export-key with no key configured: %d %s", status, body)
	}
}
