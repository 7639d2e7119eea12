package proxy

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/tfmirror/tfmirror/discovery"
)

// TestStatusOfHostNotAllowed: the origin client's own refusal of a host
// outside the allowed origins answers like the proxy's early check, 404,
// not a server or gateway error.
func TestStatusOfHostNotAllowed(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("%w: %q", discovery.ErrHostNotAllowed, "evil.example"),
		fmt.Errorf("fetching versions: %w", fmt.Errorf("%w: %q", discovery.ErrHostNotAllowed, "evil.example")),
	} {
		if got := statusOf(err); got != http.StatusNotFound {
			t.Errorf("statusOf(%v) = %d, want 404", err, got)
		}
	}
}
