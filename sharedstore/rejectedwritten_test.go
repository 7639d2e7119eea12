package sharedstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// GetMeta says, of a record that does not authenticate (here a last use
// a replica of release 2.0.0 wrote, in MAC format 1), when the store
// wrote it, with no record, counted as rejected; of an absent record,
// nothing; of one that authenticates, the record.
// Retention counts such a last use from that time, so that a download
// on a replica of the earlier release during a rolling upgrade is not
// taken for none.
func TestGetMetaOfRejectedRecordSaysWhenWritten(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	a := openKeyed(t, srv, key('a'), nil)
	id := mustKeys(t, key('a')).ID()

	const name = "lastuse/package/registry.terraform.io/hashicorp/random/1.0.0"
	if raw, rejected, err := a.GetMeta(ctx, name); err != nil || raw != nil || !rejected.IsZero() {
		t.Errorf("absent: %s, rejected %v, %v; want nothing", raw, rejected, err)
	}
	const at, rec = "2026-11-29T10:00:00Z", `{"at":"2026-11-29T10:00:00Z"}`
	v1 := fmt.Sprintf(`{"stored_at":%q,"record":%s,"key_id":%q,"mac":%q}`, at, rec, id,
		macV1(key('a'), "last_use", "replicas/a/meta/"+name, at, rec))
	before := time.Now().Add(-time.Minute) // the store dates in whole seconds
	putRaw(t, srv, "meta/"+name, []byte(v1))
	raw, rejected, err := a.GetMeta(ctx, name)
	if err != nil || raw != nil {
		t.Fatalf("format 1: %s, %v; want no record", raw, err)
	}
	if rejected.Before(before) || rejected.After(time.Now().Add(time.Minute)) {
		t.Errorf("format 1: written at %v, want about now (the store's time, not the record's %s)", rejected, at)
	}
	if n := a.obs.rejections("last_use"); n != 1 {
		t.Errorf("%d rejections of kind last_use, want 1", n)
	}
	if err := a.PutMeta(ctx, name, map[string]string{"at": at}); err != nil {
		t.Fatal(err)
	}
	if raw, _, err := a.GetMeta(ctx, name); err != nil || raw == nil {
		t.Errorf("written back: %s, %v; want the record", raw, err)
	}
}
