package sharedstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// keyed is a replica of the test bucket with its own keys, observer and
// log.
type keyed struct {
	*sharedstore.Store
	obs *observer
	log *logbuf.Buffer
}

func openKeyed(t *testing.T, srv *s3test.Server, current, previous []byte) keyed {
	t.Helper()
	keys, err := sharedstore.NewKeys(current, previous)
	if err != nil {
		t.Fatal(err)
	}
	k := keyed{obs: &observer{}, log: &logbuf.Buffer{}}
	k.Store = openWith(t, srv, sharedstore.Config{Holder: "h", Keys: keys, Observer: k.obs,
		Logger: slog.New(slog.NewTextHandler(k.log, nil))})
	return k
}

func key(c byte) []byte { return bytes.Repeat([]byte{c}, sharedstore.MinKeyBytes) }

// A record of every kind, as the engine names them (the "record" kind
// takes any other name).
var recordsByKind = map[string]string{
	"package":         "package/registry.terraform.io/hashicorp/random/1.0.0",
	"versions":        "versions/registry.terraform.io/hashicorp/random",
	"module":          "module/registry.terraform.io/acme/net/aws/1.1.0",
	"module_versions": "modversions/registry.terraform.io/acme/net/aws",
	"module_zip":      "modzip/registry.terraform.io/acme/net/aws/1.1.0",
	"release_time":    "release/signed/registry.terraform.io/hashicorp/random/1.0.0",
	"oci_version":     "oci/version/registry.terraform.io/hashicorp/random/1.0.0",
	"oci_digest":      "oci/digest/registry.terraform.io/hashicorp/random/sha256:" + strings.Repeat("a", 64),
	"last_use":        "lastuse/package/registry.terraform.io/hashicorp/random/1.0.0",
	"record":          "something/else",
}

func TestKindsAreCovered(t *testing.T) {
	for _, k := range sharedstore.Kinds {
		if _, ok := recordsByKind[k]; !ok && k != "archive" {
			t.Errorf("kind %s has no case here", k)
		}
	}
}

func rawObject(t *testing.T, srv *s3test.Server, name string) []byte {
	t.Helper()
	o, err := srv.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("tfm"), Key: aws.String("replicas/a/" + name)})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Body.Close()
	b, err := io.ReadAll(o.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// putRaw writes body under name as a writer of the bucket without the key
// does.
func putRaw(t *testing.T, srv *s3test.Server, name string, body []byte) {
	t.Helper()
	if _, err := srv.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("tfm"),
		Key: aws.String("replicas/a/" + name), Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
}

// wantRejected checks that r reads no record under name, that it counted
// one more rejection of kind, and that it logged the object once.
func wantRejected(t *testing.T, r keyed, kind, name string, before int) {
	t.Helper()
	for range 2 {
		if raw, _, err := r.GetMeta(context.Background(), name); err != nil || raw != nil {
			t.Errorf("%s: read %s, %v; want nothing", name, raw, err)
		}
	}
	if n := r.obs.rejections(kind); n != before+2 {
		t.Errorf("%s: %d rejections of kind %s, want %d", name, n, kind, before+2)
	}
	if n := strings.Count(r.log.String(), "/meta/"+name+" "); n != 1 {
		t.Errorf("%s: logged %d times, want once:\n%s", name, n, r.log.String())
	}
}

// Every kind of record is read back as written, and refused, counted by
// kind and logged once when its content was changed, when it was moved
// from another name, when another key signed it, and when it has no MAC
// (as an earlier release wrote it, or anyone writing without the key).
func TestRecordsAuthenticated(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	a := openKeyed(t, srv, key('a'), nil)
	stranger := openKeyed(t, srv, key('s'), nil)
	for kind, name := range recordsByKind {
		t.Run(kind, func(t *testing.T) {
			rec := map[string]string{"schema": "2", "at": "2020-01-01T00:00:00Z", "html": "<a&b>"}
			if err := a.PutMeta(ctx, name, rec); err != nil {
				t.Fatal(err)
			}
			raw, _, err := a.GetMeta(ctx, name)
			var got map[string]string
			if err != nil || json.Unmarshal(raw, &got) != nil || got["html"] != "<a&b>" {
				t.Fatalf("read back %s, %v", raw, err)
			}
			good := rawObject(t, srv, "meta/"+name)

			// Changed content, MAC kept: a backdated release time, say.
			putRaw(t, srv, "meta/"+name, bytes.Replace(good, []byte("2020-01-01"), []byte("1999-01-01"), 1))
			wantRejected(t, a, kind, name, 0)

			// Moved: the good object under another name of the same kind.
			moved := name + "-moved"
			putRaw(t, srv, "meta/"+moved, good)
			wantRejected(t, a, kind, moved, 2)

			// Another key's: a replica (or anyone) without the replicas' key.
			theirs := name + "-theirs"
			if err := stranger.PutMeta(ctx, theirs, rec); err != nil {
				t.Fatal(err)
			}
			wantRejected(t, a, kind, theirs, 4)

			// Unauthenticated: the format of an earlier release.
			old := name + "-old"
			putRaw(t, srv, "meta/"+old, []byte(`{"stored_at":"2026-01-02T03:04:05Z","record":{"schema":2}}`))
			wantRejected(t, a, kind, old, 6)

			// Written back by a replica with the key, it is read again.
			if err := a.PutMeta(ctx, old, rec); err != nil {
				t.Fatal(err)
			}
			if raw, _, err := a.GetMeta(ctx, old); err != nil || raw == nil {
				t.Errorf("written back: %s, %v", raw, err)
			}
		})
	}
}

func mustKeys(t *testing.T, k []byte) *sharedstore.Keys {
	t.Helper()
	keys, err := sharedstore.NewKeys(k, nil)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// A record read under a key of its kind but written under another kind's
// name fails: the kind is bound.
func TestRecordKindBound(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	a := openKeyed(t, srv, key('a'), nil)
	if err := a.PutMeta(ctx, "lastuse/x", map[string]int{"schema": 2}); err != nil {
		t.Fatal(err)
	}
	putRaw(t, srv, "meta/release/x", rawObject(t, srv, "meta/lastuse/x"))
	wantRejected(t, a, "release_time", "release/x", 0)
}

// Rotation: a replica given the new key as its previous one reads what
// the new key signs while still signing with the old; then, given the new
// key as current and the old as previous, it reads both and signs with
// the new; without the old key, what the old one signed is refused.
func TestKeyRotation(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	oldK, newK := key('o'), key('n')
	before := openKeyed(t, srv, oldK, nil)
	if err := before.PutMeta(ctx, "package/old", map[string]int{"v": 1}); err != nil {
		t.Fatal(err)
	}
	data := []byte("archive signed under the old key")
	if err := before.PutArchive(ctx, shaOf(data), bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}

	// Step 1: the new key accepted, the old one still signing.
	step1 := openKeyed(t, srv, oldK, newK)
	// Step 2: the new key signing, the old one still accepted.
	step2 := openKeyed(t, srv, newK, oldK)
	if err := step2.PutMeta(ctx, "package/new", map[string]int{"v": 2}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []keyed{step1, step2} {
		for _, name := range []string{"package/old", "package/new"} {
			if raw, _, err := r.GetMeta(ctx, name); err != nil || raw == nil {
				t.Errorf("%s: %s, %v", name, raw, err)
			}
		}
		body, _, err := r.OpenArchive(ctx, shaOf(data))
		if err != nil || body == nil {
			t.Fatalf("archive: %v", err)
		}
		if got, err := io.ReadAll(body); err != nil || !bytes.Equal(got, data) {
			t.Errorf("archive: %q, %v", got, err)
		}
		body.Close()
	}
	if !strings.Contains(string(rawObject(t, srv, "meta/package/new")), `"key_id":"`+mustKeys(t, newK).ID()+`"`) {
		t.Error("step 2 does not sign with the new key")
	}
	// A replica still on the old key alone refuses what the new key signed.
	wantRejected(t, before, "package", "package/new", 0)
	// Step 3: the old key gone: what it signed is refused (and re-derived).
	after := openKeyed(t, srv, newK, nil)
	wantRejected(t, after, "package", "package/old", 0)
	if body, _, err := after.OpenArchive(ctx, shaOf(data)); err != nil || body != nil {
		t.Errorf("archive signed by the removed key: %v, %v", body, err)
	}
	if after.obs.rejections("archive") != 1 {
		t.Errorf("%d archive rejections", after.obs.rejections("archive"))
	}
}

// An archive is read only with a header that the replicas' key signed
// for its name, sha256 and size, and only its own bytes end in io.EOF.
func TestArchivesAuthenticated(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	a := openKeyed(t, srv, key('a'), nil)
	stranger := openKeyed(t, srv, key('s'), nil)
	data := bytes.Repeat([]byte("provider archive "), 1000)
	sha := shaOf(data)
	other := bytes.Repeat([]byte("other archive "), 1000)
	osha := shaOf(other)
	read := func(sha string) ([]byte, bool, error) {
		body, _, err := a.OpenArchive(ctx, sha)
		if err != nil || body == nil {
			return nil, false, err
		}
		defer body.Close()
		b, err := io.ReadAll(body)
		return b, true, err
	}
	n := 0
	rejected := func(what string) {
		t.Helper()
		n++
		if got := a.obs.rejections("archive"); got != n {
			t.Errorf("%s: %d archive rejections, want %d", what, got, n)
		}
	}

	// Old format: the archive without a header, as an earlier release
	// stored it.
	putRaw(t, srv, "archives/"+sha, data)
	if _, found, err := read(sha); found || err != nil {
		t.Errorf("an archive without header was read: %v", err)
	}
	rejected("no header")
	// A replica with the key writes it back, with its header.
	if err := a.PutArchive(ctx, sha, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if got, found, err := read(sha); !found || err != nil || !bytes.Equal(got, data) {
		t.Fatalf("written back: %v, %v", found, err)
	}

	// Another key's header.
	if err := stranger.PutArchive(ctx, osha, bytes.NewReader(other), int64(len(other))); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := read(osha); found {
		t.Error("an archive whose header another key signed was read")
	}
	rejected("another key")

	// A good header moved from another archive.
	putRaw(t, srv, "archive-auth/"+osha, rawObject(t, srv, "archive-auth/"+sha))
	if _, found, _ := read(osha); found {
		t.Error("an archive under a header moved from another was read")
	}
	rejected("moved header")

	// Other bytes of the same size under the good header: read, but the
	// body ends in an error, not io.EOF.
	forged := bytes.Clone(data)
	forged[10] ^= 1
	putRaw(t, srv, "archives/"+sha, forged)
	if _, found, err := read(sha); !found || err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Errorf("forged bytes: found %v, error %v; want an error", found, err)
	}
	rejected("forged bytes")
	// Bytes of another size: refused before a byte is read.
	putRaw(t, srv, "archives/"+sha, append(bytes.Clone(data), 'x'))
	if _, found, _ := read(sha); found {
		t.Error("an archive of another size was read")
	}
	rejected("size")
	// The next put replaces the bad object, although one is there.
	if err := a.PutArchive(ctx, sha, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if got, found, err := read(sha); !found || err != nil || !bytes.Equal(got, data) {
		t.Errorf("after the replacing put: %v, %v", found, err)
	}
	if n := strings.Count(a.log.String(), "/archives/"+sha+" "); n != 1 {
		t.Errorf("archive logged %d times, want once", n)
	}
}

// An object is bound to its key in the bucket, prefix included: the same
// object under another prefix (another deployment on the same key, say)
// is refused.
func TestObjectBoundToPrefix(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	a := openKeyed(t, srv, key('a'), nil)
	if err := a.PutMeta(ctx, "package/p", map[string]int{"v": 1}); err != nil {
		t.Fatal(err)
	}
	keys, err := sharedstore.NewKeys(key('a'), nil)
	if err != nil {
		t.Fatal(err)
	}
	obs := &observer{}
	b, err := sharedstore.Open(ctx, sharedstore.Config{URL: srv.URL("tfm", "replicas/b"), Keys: keys, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("tfm"), Key: aws.String("replicas/b/meta/package/p"),
		Body: bytes.NewReader(rawObject(t, srv, "meta/package/p"))}); err != nil {
		t.Fatal(err)
	}
	if raw, _, err := b.GetMeta(ctx, "package/p"); err != nil || raw != nil || obs.rejections("package") != 1 {
		t.Errorf("an object moved to another prefix was read: %s, %v", raw, err)
	}
}

func TestKeysRefused(t *testing.T) {
	if _, err := sharedstore.NewKeys(make([]byte, sharedstore.MinKeyBytes-1), nil); err == nil {
		t.Error("a short key was taken")
	}
	if _, err := sharedstore.NewKeys(key('a'), key('a')); err == nil {
		t.Error("the previous key the same as the current was taken")
	}
	if _, err := sharedstore.Open(context.Background(), sharedstore.Config{URL: "s3://b/p"}); err == nil {
		t.Error("a store opened without keys")
	}
	a, b := mustKeys(t, key('a')), mustKeys(t, key('b'))
	if a.ID() == b.ID() || len(a.ID()) != 16 || strings.Contains(a.ID(), string(key('a')[:4])) {
		t.Errorf("key IDs %q, %q", a.ID(), b.ID())
	}
}

// LoadKeys reads the current and the previous key from their files, as
// they are, and refuses a missing or short one.
func TestLoadKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cur, prev := write("cur", key('c')), write("prev", key('p'))
	k, err := sharedstore.LoadKeys(cur, prev)
	if err != nil || k.ID() != mustKeys(t, key('c')).ID() || k.PreviousID() != mustKeys(t, key('p')).ID() {
		t.Fatalf("LoadKeys: %v", err)
	}
	if k, err := sharedstore.LoadKeys(cur, ""); err != nil || k.PreviousID() != "" {
		t.Errorf("without a previous key: %v", err)
	}
	for _, bad := range [][2]string{{dir + "/none", ""}, {cur, dir + "/none"}, {write("short", []byte("short\n")), ""}} {
		if _, err := sharedstore.LoadKeys(bad[0], bad[1]); err == nil {
			t.Errorf("LoadKeys(%q, %q): no error", bad[0], bad[1])
		}
	}
	// The error names the file at fault, and says which key it holds: a
	// short previous key is not the current key's file.
	short := write("short-prev", []byte("short\n"))
	_, err = sharedstore.LoadKeys(cur, short)
	if err == nil || !strings.HasPrefix(err.Error(), "shared store previous key: ") || !strings.Contains(err.Error(), short) || strings.Contains(err.Error(), cur) {
		t.Errorf("a short previous key: %v; want an error of the previous key naming %s alone", err, short)
	}
	if _, err := sharedstore.LoadKeys(write("short-cur", []byte("short\n")), prev); err == nil || !strings.HasPrefix(err.Error(), "shared store key: ") || strings.Contains(err.Error(), prev) {
		t.Errorf("a short current key: %v", err)
	}
}

// A record put back in the bucket long after a replica wrote it is
// refused, as any object that fails: a copy a writer of the bucket kept,
// replayed to roll a version list back by months (and so give a replica
// that lists anew an old listing to date the versions published since
// by, passing them through a minimum release age). What vouches for the
// time is the store's: its Last-Modified, which a writer of the bucket
// cannot set, later than the time of storing under the MAC by more than
// clocks disagree. A record of a replica whose clock is minutes behind
// the store's is read; one of a replica whose clock is hours ahead (a
// record stamped later than the bucket wrote it, which the others would
// take for fresh as long) is refused, and one minutes ahead is read.
func TestReplayedRecordRejected(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	a := openKeyed(t, srv, key('a'), nil)
	keys := mustKeys(t, key('a'))
	name := recordsByKind["module_versions"]
	rec := map[string]any{"schema": 2, "versions": []string{"1.0.0"}}

	// What a replica wrote months ago, kept, and put back now.
	then := openWith(t, srv, sharedstore.Config{Holder: "then", Keys: keys, Now: skewed(-90 * 24 * time.Hour)})
	if err := then.PutMeta(ctx, name, rec); err != nil {
		t.Fatal(err)
	}
	kept := rawObject(t, srv, "meta/"+name)
	if err := a.PutMeta(ctx, name, rec); err != nil {
		t.Fatal(err)
	}
	putRaw(t, srv, "meta/"+name, kept)
	wantRejected(t, a, "module_versions", name, 0)

	// Written back, it is read again.
	if err := a.PutMeta(ctx, name, rec); err != nil {
		t.Fatal(err)
	}
	if raw, _, err := a.GetMeta(ctx, name); err != nil || raw == nil {
		t.Errorf("written back: %s, %v", raw, err)
	}

	// A replica whose clock is five minutes behind the store's.
	behind := openWith(t, srv, sharedstore.Config{Holder: "behind", Keys: keys, Now: skewed(-5 * time.Minute)})
	other := recordsByKind["versions"]
	if err := behind.PutMeta(ctx, other, rec); err != nil {
		t.Fatal(err)
	}
	if raw, _, err := a.GetMeta(ctx, other); err != nil || raw == nil {
		t.Errorf("a record of a replica five minutes behind: %s, %v", raw, err)
	}

	// A replica whose clock runs six hours ahead: its record would be
	// taken for fresh for six hours (a version list the others never
	// refresh), and is refused; five minutes ahead, it is read.
	ahead := openWith(t, srv, sharedstore.Config{Holder: "ahead", Keys: keys, Now: skewed(6 * time.Hour)})
	if err := ahead.PutMeta(ctx, other, rec); err != nil {
		t.Fatal(err)
	}
	wantRejected(t, a, "versions", other, 0)
	slightly := openWith(t, srv, sharedstore.Config{Holder: "slightly", Keys: keys, Now: skewed(5 * time.Minute)})
	if err := slightly.PutMeta(ctx, other, rec); err != nil {
		t.Fatal(err)
	}
	if raw, _, err := a.GetMeta(ctx, other); err != nil || raw == nil {
		t.Errorf("a record of a replica five minutes ahead: %s, %v", raw, err)
	}
}

// A bucket that keeps the older versions of its objects lets whoever may
// delete versions make a record of months ago current again, which the
// put-back check cannot tell from one just written: the replica says so
// once, at its first write, with what to configure; one writing to a
// bucket without versioning says nothing.
func TestVersionedBucketWarned(t *testing.T) {
	srv := s3test.StartVersioning(t)
	srv.SetEnv(t)
	srv.CreateBucket("tfm")
	ctx := context.Background()
	plain := openKeyed(t, srv, key('a'), nil)
	if err := plain.PutMeta(ctx, recordsByKind["versions"], map[string]int{"schema": 2}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.log.String(), "keeps the older versions") {
		t.Errorf("warned of versions on a bucket without versioning: %s", plain.log.String())
	}

	srv.EnableVersioning("tfm")
	a := openKeyed(t, srv, key('a'), nil)
	for _, name := range []string{recordsByKind["versions"], recordsByKind["package"]} {
		if err := a.PutMeta(ctx, name, map[string]int{"schema": 2}); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(a.log.String(), "keeps the older versions of its objects"); n != 1 {
		t.Errorf("warned %d times of a bucket with versioning, want once: %s", n, a.log.String())
	}
	if !strings.Contains(a.log.String(), "s3:DeleteObjectVersion") {
		t.Errorf("the warning does not say what to deny: %s", a.log.String())
	}
}

// An object larger than any a replica writes, under a record's name or as
// an archive's header, is rejected as any object that fails: nothing read,
// no error, counted and logged once. It is no failure of the store's: the
// breaker stays closed, and what the replicas wrote is read on.
func TestOversizedObjectRejected(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	a := openKeyed(t, srv, key('a'), nil) // the breaker opens after 2 failures (openWith)
	good := recordsByKind["package"]
	if err := a.PutMeta(ctx, good, map[string]int{"schema": 2}); err != nil {
		t.Fatal(err)
	}
	data := []byte("provider archive")
	sha := shaOf(data)
	if err := a.PutArchive(ctx, sha, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	huge := bytes.Repeat([]byte(" "), 16<<20+1)

	name := recordsByKind["versions"]
	putRaw(t, srv, "meta/"+name, huge)
	wantRejected(t, a, "versions", name, 0)

	putRaw(t, srv, "archive-auth/"+sha, huge)
	for range 2 {
		if body, _, err := a.OpenArchive(ctx, sha); err != nil || body != nil {
			t.Errorf("archive under an oversized header: %v, %v; want nothing", body, err)
		}
	}
	if n := a.obs.rejections("archive"); n != 2 {
		t.Errorf("%d archive rejections, want 2", n)
	}
	if n := strings.Count(a.log.String(), "/archives/"+sha+" "); n != 1 {
		t.Errorf("archive logged %d times, want once:\n%s", n, a.log.String())
	}

	if a.Status() != nil || a.obs.down.Load() {
		t.Errorf("the breaker opened on oversized objects: %v", a.Status())
	}
	if raw, _, err := a.GetMeta(ctx, good); err != nil || raw == nil {
		t.Errorf("a record the replicas wrote: %s, %v", raw, err)
	}
}

// The reason logged for a rejected object quotes no more than a bounded
// prefix of what the object holds, and says it was cut: a key ID, a
// header's name, a number that fits no field, each of megabytes, make
// lines of a few hundred bytes.
func TestRejectionReasonBounded(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	a := openKeyed(t, srv, key('a'), nil)
	long := strings.Repeat(`\u0001`, 2<<20) // 12 MiB, each byte quoted as \x01

	putRaw(t, srv, "meta/"+recordsByKind["versions"],
		[]byte(`{"stored_at":"2026-01-01T00:00:00Z","record":{},"format":2,"key_id":"`+long+`","mac":"x"}`))
	putRaw(t, srv, "meta/"+recordsByKind["package"],
		[]byte(`{"stored_at":"2026-01-01T00:00:00Z","record":{},"format":1`+strings.Repeat("0", 4<<20)+`}`))
	data := []byte("provider archive")
	sha := shaOf(data)
	putRaw(t, srv, "archives/"+sha, data)
	putRaw(t, srv, "archive-auth/"+sha, []byte(`{"name":"`+long+`","sha256":"`+sha+`","size":16}`))

	for _, kind := range []string{"versions", "package"} {
		if raw, _, err := a.GetMeta(ctx, recordsByKind[kind]); err != nil || raw != nil {
			t.Errorf("%s: read %s, %v; want nothing", kind, raw, err)
		}
	}
	if body, _, err := a.OpenArchive(ctx, sha); err != nil || body != nil {
		t.Errorf("archive: %v, %v; want nothing", body, err)
	}
	lines := strings.Split(strings.TrimSpace(a.log.String()), "\n")
	for _, line := range lines {
		if len(line) > 8<<10 {
			t.Errorf("a log line of %d bytes: %.300s", len(line), line)
		}
	}
	if n := strings.Count(a.log.String(), "(cut"); n != 3 {
		t.Errorf("%d reasons say they were cut, want 3", n)
	}
}

// ListMeta, the retention pass's listing, hands out the records that
// authenticate, each read as it is listed,
// and leaves out the others, saying how many, without counting them
// (Observer.SharedStoreRejected) or logging them: the pass finds them
// again every hour and nothing writes them back, so they would be
// counted at every pass, and take the lines kept for the objects the
// replicas read to serve.
func TestListMetaReadsAsItLists(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	a := openKeyed(t, srv, key('a'), nil)
	stranger := openKeyed(t, srv, key('s'), nil)
	for _, v := range []string{"1.0.0", "2.0.0"} {
		if err := a.PutMeta(ctx, "package/p/"+v, map[string]string{"v": v}); err != nil {
			t.Fatal(err)
		}
	}
	if err := stranger.PutMeta(ctx, "package/p/0.9.0", map[string]int{"v": 0}); err != nil {
		t.Fatal(err)
	}
	putRaw(t, srv, "meta/package/p/0.8.0", []byte(`{"record":{"v":0}}`))        // an earlier release's
	putRaw(t, srv, "meta/package/p/0.7.0", bytes.Repeat([]byte(" "), 16<<20+1)) // oversized
	for pass := range 2 {
		got := map[string]string{}
		n, err := a.ListMeta(ctx, "package/", func(key string, record json.RawMessage) error {
			got[key] = string(record)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"package/p/1.0.0": `{"v":"1.0.0"}`, "package/p/2.0.0": `{"v":"2.0.0"}`}
		if n != 3 || !reflect.DeepEqual(got, want) {
			t.Errorf("pass %d: %v and %d left out; want %v and 3", pass, got, n, want)
		}
	}
	if a.Rejected() != 0 || strings.Contains(a.log.String(), "failed authentication") {
		t.Errorf("the listing counted %d rejections, logged:\n%s", a.Rejected(), a.log.String())
	}
	// The replicas' reads still count and log them.
	wantRejected(t, a, "package", "package/p/0.9.0", 0)
}

// Records read at once share one budget of memory: an object just under
// the bound (a bucket writer without the key may write many) waits for
// room, while a record of the size the replicas write reads on. A
// replica serving sixty requests for versions whose records had been
// replaced by 16 MiB objects had taken gigabytes, and died of it.
func TestLargeObjectsReadWithinABudget(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	a := openKeyed(t, srv, key('a'), nil)
	good, large := goodAndLarge(t, srv, a.Store)

	release := a.HoldSmallReads(sharedstore.SmallReadBudget - 1<<20)
	if raw, _, err := a.GetMeta(ctx, good); err != nil || raw == nil {
		t.Errorf("a record the replicas wrote, with the budget nearly taken: %s, %v", raw, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if raw, _, err := a.GetMeta(ctx, large); err != nil || raw != nil {
			t.Errorf("the large object: %s, %v; want it rejected", raw, err)
		}
	}()
	select {
	case <-done:
		t.Fatal("the large object was read past the budget")
	case <-time.After(300 * time.Millisecond):
	}
	release()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the large object was not read once the budget had room")
	}
	wantRejected(t, a, "versions", large, 1)
}

// goodAndLarge writes, through a, a record the replicas write (good),
// and beside it, as a writer of the bucket without the key, an object
// of 15 MiB where a version list belongs (large); it returns their names.
func goodAndLarge(t *testing.T, srv *s3test.Server, a *sharedstore.Store) (good, large string) {
	t.Helper()
	good, large = recordsByKind["package"], recordsByKind["versions"]
	if err := a.PutMeta(context.Background(), good, map[string]int{"schema": 2}); err != nil {
		t.Fatal(err)
	}
	putRaw(t, srv, "meta/"+large, bytes.Repeat([]byte(" "), 15<<20))
	return good, large
}

// An archive a writer of the bucket replaced with other bytes is written
// again by the next replica that shares it, though that replica never
// read it (a module package whose record was rejected is fetched from
// the origin without the store's copy being opened): the store's copy,
// of another length, is replaced by the verified bytes. It had been
// kept, its header written anew over it, and a sealed replica failed on
// it for good.
func TestSpoiledArchiveReplacedWhenShared(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	a := openKeyed(t, srv, key('a'), nil)
	data := bytes.Repeat([]byte("module package "), 100)
	sha := shaOf(data)
	if err := a.PutArchive(ctx, sha, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	putRaw(t, srv, "archives/"+sha, []byte("xx"))

	b := openKeyed(t, srv, key('a'), nil) // another replica, which read nothing
	if err := b.PutArchive(ctx, sha, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if got := rawObject(t, srv, "archives/"+sha); !bytes.Equal(got, data) {
		t.Errorf("the store holds %q, want the archive written again", got)
	}
	body, _, err := a.OpenArchive(ctx, sha)
	if err != nil || body == nil {
		t.Fatalf("the archive written again: %v", err)
	}
	got, err := io.ReadAll(body)
	body.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("read back: %d bytes, %v", len(got), err)
	}
}

// A read that waits for the budget of reads at once (a flood of objects
// just under the bound, which a bucket writer can make) past the call's
// timeout is no failure of the store, which answered: it fails that
// read alone and leaves the circuit breaker closed. Each had counted as
// a failed call, and a few such reads in a row shut every replica's
// store off for the cooldown.
func TestBudgetWaitIsNoStoreFailure(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	keys, err := sharedstore.NewKeys(key('a'), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The call's time, five seconds, and a breaker opened by two
	// failures in a row (openWith).
	a := openWith(t, srv, sharedstore.Config{Holder: "h", Keys: keys, Logger: slog.New(slog.NewTextHandler(&logbuf.Buffer{}, nil))})
	good, large := goodAndLarge(t, srv, a)

	release := a.HoldSmallReads(sharedstore.SmallReadBudget - 1<<20)
	for i := range 3 {
		if raw, _, err := a.GetMeta(ctx, large); err == nil || raw != nil {
			t.Errorf("read %d of the large object with the budget taken: %d bytes, %v; want an error", i, len(raw), err)
		}
	}
	if err := a.Status(); err != nil {
		t.Errorf("after reads waiting for the budget: %v, want the store in use", err)
	}
	release()
	if raw, _, err := a.GetMeta(ctx, good); err != nil || raw == nil {
		t.Errorf("a record the replicas wrote, after: %s, %v", raw, err)
	}
}
