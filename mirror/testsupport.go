package mirror

import (
	"context"

	"github.com/tfmirror/tfmirror/internal/testhooks"
)

// What tests in other packages need of an engine and production code must
// not call, handed to internal/enginetest (see package testhooks).
func init() {
	testhooks.EngineWait = func(ctx context.Context, e any) error { return e.(*Engine).wait(ctx) }
}
