package originguard

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/discovery"
)

type memHostStore map[string]bool

func (m memHostStore) PutMeta(key string, _ any) error { m[key] = true; return nil }
func (m memHostStore) ScanMeta(prefix string, fn func(string, time.Time, json.RawMessage) error) error {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			if err := fn(k, time.Time{}, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// An imported host is local-only unless it is an allowed origin, is
// remembered across a restart, and any other host is refused.
func TestHosts(t *testing.T) {
	origin, inHouse, other := svchost.Hostname("registry.example"), svchost.Hostname("in-house.example"), svchost.Hostname("other.example")
	store := memHostStore{}
	h, err := NewHosts([]svchost.Hostname{origin}, store)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Check(inHouse); !errors.Is(err, discovery.ErrHostNotAllowed) {
		t.Errorf("Check of a host never imported: %v, want ErrHostNotAllowed", err)
	}
	for _, host := range []svchost.Hostname{origin, inHouse} {
		if err := h.Record(host); err != nil {
			t.Fatal(err)
		}
	}
	if h.Local(origin) || !h.Allowed(origin) || h.Check(origin) != nil {
		t.Error("an allowed origin that imports loaded packages of became local-only")
	}
	if !h.Local(inHouse) || h.Allowed(inHouse) || h.Check(inHouse) != nil {
		t.Error("an imported host that is not an allowed origin is not local-only")
	}
	again, err := NewHosts([]svchost.Hostname{origin}, store)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Local(inHouse) {
		t.Error("the imported host was forgotten across a restart")
	}
	if err := again.Check(other); !errors.Is(err, discovery.ErrHostNotAllowed) {
		t.Errorf("Check of another host: %v, want ErrHostNotAllowed", err)
	}
}

// An imported IDN host (with a port, too), recorded in its normal form,
// punycode, is remembered across a restart: its imported packages stay
// served.
func TestHostsRemembersIDNHosts(t *testing.T) {
	store := memHostStore{}
	h, err := NewHosts(nil, store)
	if err != nil {
		t.Fatal(err)
	}
	hosts := []svchost.Hostname{"xn--bcher-kva.example", "xn--bcher-kva.example:8443"}
	for _, host := range hosts {
		if err := h.Record(host); err != nil {
			t.Fatal(err)
		}
	}
	again, err := NewHosts(nil, store)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range hosts {
		if err := again.Check(host); err != nil {
			t.Errorf("the imported host %s was forgotten across a restart: %v", host, err)
		}
	}
}
