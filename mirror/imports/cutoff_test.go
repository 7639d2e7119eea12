package imports_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
)

// heldRecords holds the first write of a package record until release is
// closed, saying so on entered.
type heldRecords struct {
	harness.Store
	once             sync.Once
	entered, release chan struct{}
}

func (s *heldRecords) PutMeta(key string, v any) error {
	if strings.HasPrefix(key, "package/") {
		s.once.Do(func() {
			close(s.entered)
			<-s.release
		})
	}
	return s.Store.PutMeta(key, v)
}

// An import whose caller goes away (tfmirror import interrupted, the
// admin request cut off at the shutdown's deadline) while its package
// record is being written answers with that write's outcome. It answered
// with its caller's context's error at once, and ended (it let go of the
// import lock, and told retention no record it wrote named its archives)
// while the record, naming archives that cannot be fetched again, was
// still to be written.
func TestImportCutOffWhileItsRecordIsWritten(t *testing.T) {
	t.Parallel()
	src, v, ev := sourceEvidence(t)
	held := &heldRecords{entered: make(chan struct{}), release: make(chan struct{})}
	dst := harness.New(t, harness.Options{Config: harness.Config{Offline: true},
		Wrap: func(s harness.Store) harness.Store { held.Store = s; return held }})
	in := enginetest.ImportedFrom(ev, func(pl string) []byte { return src.Origin.Archive(harness.NS, harness.Type, "1.0.0", pl) })
	in.Version = v
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	res := make(chan error, 1)
	go func() {
		_, err := dst.Engine.AirGap().Import(ctx, in)
		res <- err
	}()
	<-held.entered
	cancel()
	select {
	case err := <-res:
		close(held.release)
		t.Fatalf("Import ended (%v) while its package record was still being written", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(held.release)
	err := <-res // the record written; the version list's write cut off or not
	// Nothing the import wrote lands after it ended.
	listed := func() bool {
		list, _, lerr := dst.Engine.Versions(context.Background(), dst.Provider())
		return lerr == nil && slices.Contains(list.Names(), "1.0.0")
	}
	atEnd := listed()
	dst.WaitIdle()
	if now := listed(); now != atEnd {
		t.Errorf("Import ended (%v) with the version listed: %v; once the engine was idle: %v", err, atEnd, now)
	}
}
