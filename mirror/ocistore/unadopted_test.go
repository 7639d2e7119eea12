package ocistore

import (
	"errors"
	"fmt"
	"testing"
)

// A digest only the shared tier knows is an *Unadopted to the caller that
// adopts it, and unknown to any that does not: never served unadopted.
func TestUnadoptedIsUnknownUnlessAdopted(t *testing.T) {
	unknown := fmt.Errorf("%w: sha256:00 in example.com/a/b", ErrDigestUnknown)
	var err error = &Unadopted{unknown: unknown}
	if !errors.Is(err, ErrDigestUnknown) {
		t.Errorf("%v is not ErrDigestUnknown", err)
	}
	var u *Unadopted
	if !errors.As(fmt.Errorf("resolving: %w", err), &u) {
		t.Errorf("a wrapped Unadopted is not found by errors.As")
	}
}
