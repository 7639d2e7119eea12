package mirror

import "context"

// WaitIdle returns when no origin fetch or archive download of e runs,
// or ctx is done. Test rigs only (internal/testrig/enginetest, and the tests of
// the front doors): nothing in the shipped binary calls it, so the linker
// leaves it out, which cmd/tfmirror's TestBinaryLinksNoTestHook checks.
func WaitIdle(ctx context.Context, e *Engine) error { return e.wait(ctx) }
