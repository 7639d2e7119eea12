package proxy

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/retention"
)

// onePin pins one version, once.
type onePin struct {
	once sync.Once
	pins *retention.Pins
}

func (p *onePin) Pins() (*retention.Pins, bool, error) {
	changed := false
	p.once.Do(func() { changed = true })
	if !changed {
		return nil, false, nil
	}
	return p.pins, true, nil
}

// The status page lists pinned versions, and says when what may not be
// evicted exceeds the size limit.
func TestStatusRetention(t *testing.T) {
	t.Parallel()
	pins := &onePin{pins: &retention.Pins{Providers: map[string][]retention.PinSelection{
		originHost + "/" + ns + "/" + typ: {{Set: versions.Only(versions.MustParseVersion("1.0.0")), Where: "ci.lock.hcl:3"}},
	}}}
	h := newHarness(t, harnessOptions{origin: fakeorigin.Options{},
		ret: retention.Config{MaxBytes: 100, Interval: -1, Pins: pins}})
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
	if r := h.get(archivePath("1.0.0", "linux_amd64")); r.status != 200 || r.err != nil {
		t.Fatalf("archive: status %d err %v", r.status, r.err)
	}
	h.waitCommitted(h.origin.SHA256(ns, typ, "1.0.0", "linux_amd64"))
	if _, err := h.ret.Prune(t.Context(), retention.PruneRequest{}); err != nil { // as a pass: the status follows
		t.Fatal(err)
	}
	var st Status
	h.get("/?format=json").json(t, &st)
	if st.Retention == nil || len(st.Retention.Pinned) != 1 || st.Retention.Pinned[0].Version != "1.0.0" ||
		st.Retention.Pinned[0].Where != "ci.lock.hcl:3" || !st.Retention.LimitUnmet || st.Retention.KeptBytes != st.Bytes {
		t.Errorf("retention %+v, want 1.0.0 pinned and the limit unmet", st.Retention)
	}
	body := string(h.get("/").body)
	for _, want := range []string{`id="limit-unmet"`, "The size limit of 100 B cannot be met", `id="pinned"`, "1.0.0 <small>(provider, pinned by ci.lock.hcl:3)</small>"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
}

// failingPins are pins that could not be read, and say where.
type failingPins struct{}

func (failingPins) Pins() (*retention.Pins, bool, error) {
	return nil, false, errors.New("/etc/tfmirror/pins/payments.hcl:4: provider registry.terraform.io/acmecorp/secretproject is already declared")
}

// Pins that could not be read are said so to everyone; why (the file,
// its line, what it pins) only to a client with a token, when client
// authentication is on, as the pinned versions themselves.
func TestStatusPinsErrorHiddenWithoutToken(t *testing.T) {
	t.Parallel()
	a, err := NewAuth(AuthConfig{TokenHashes: [][32]byte{sha256.Sum256([]byte(testToken))}, SigningKey: bytes.Repeat([]byte{7}, 32), URLTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{cfg: Config{Auth: a}, ret: retention.Config{MaxBytes: 100, Interval: -1, Pins: failingPins{}}})
	// As a pass, which removes nothing until the pins can be read: the
	// status follows.
	if _, err := h.ret.Prune(t.Context(), retention.PruneRequest{}); err == nil {
		t.Fatal("a pass ran with the pins unread")
	}
	var st Status
	h.get("/?format=json", "Authorization", "Bearer "+testToken).json(t, &st)
	if st.Retention == nil || !strings.Contains(st.Retention.PinsError, "payments.hcl:4") {
		t.Fatalf("with a token: retention %+v, want the pins error", st.Retention)
	}
	st = Status{}
	h.get("/?format=json").json(t, &st)
	if st.Retention == nil || st.Retention.PinsError == "" {
		t.Fatalf("without a token: retention %+v, want the pins said unread", st.Retention)
	}
	for _, secret := range []string{"payments", "acmecorp", "/etc/tfmirror"} {
		if strings.Contains(st.Retention.PinsError, secret) || strings.Contains(string(h.get("/").body), secret) {
			t.Errorf("without a token, the page names %q: %q", secret, st.Retention.PinsError)
		}
	}
}
