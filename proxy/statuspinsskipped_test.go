package proxy

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/retention"
)

// Pins the source did not read (a pins file nested deeper than it reads)
// are said on the status page, not in the log alone: their versions are
// not kept. Where they are (the pins directory's paths) only to a client
// with a token, when client authentication is on.
func TestStatusPinsSkipped(t *testing.T) {
	t.Parallel()
	a, err := NewAuth(AuthConfig{TokenHashes: [][32]byte{sha256.Sum256([]byte(testToken))}, SigningKey: bytes.Repeat([]byte{7}, 32), URLTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	why := "1 directories deeper than 8 levels under /pins/payments not read, the first /pins/payments/1/2/3/4/5/6/7/8/9"
	pins := &onePin{pins: &retention.Pins{Skipped: why}}
	h := newHarness(t, harnessOptions{cfg: Config{Auth: a}, ret: retention.Config{Interval: -1, Pins: pins}})
	if _, err := h.ret.Prune(t.Context(), retention.PruneRequest{}); err != nil { // reads the pins
		t.Fatal(err)
	}
	withToken := string(h.get("/", "Authorization", "Bearer "+testToken).body)
	if !strings.Contains(withToken, `id="pins-skipped"`) || !strings.Contains(withToken, why) {
		t.Errorf("with a token, the page does not say what the pins source did not read:\n%s", withToken)
	}
	if js := string(h.get("/?format=json", "Authorization", "Bearer "+testToken).body); !strings.Contains(js, why) {
		t.Errorf("with a token, the JSON status does not say what the pins source did not read:\n%s", js)
	}
	without := string(h.get("/").body)
	if !strings.Contains(without, `id="pins-skipped"`) || strings.Contains(without, "payments") {
		t.Errorf("without a token, the page says nothing of the pins not read, or names where they are:\n%s", without)
	}
}
