package sharedstore_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// openStore opens bucket/prefix of srv under key k, with storeID unless "".
func openStore(t *testing.T, srv *s3test.Server, bucket, prefix, storeID string, k []byte) keyed {
	t.Helper()
	r := keyed{obs: &observer{}, log: &logbuf.Buffer{}}
	s, err := sharedstore.Open(context.Background(), sharedstore.Config{URL: srv.URL(bucket, prefix), StoreID: storeID,
		Keys: mustKeys(t, k), Observer: r.obs, Logger: slog.New(slog.NewTextHandler(r.log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r.Store = s
	return r
}

// copyObject copies bucket/key to toBucket/toKey as a writer of both
// buckets without the replicas' key does.
func copyObject(t *testing.T, srv *s3test.Server, bucket, key, toBucket, toKey string) {
	t.Helper()
	ctx := context.Background()
	o, err := srv.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(o.Body)
	o.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(toBucket), Key: aws.String(toKey),
		Body: bytes.NewReader(b)}); err != nil {
		t.Fatal(err)
	}
}

func readArchive(t *testing.T, r keyed, sha string) ([]byte, bool) {
	t.Helper()
	body, _, err := r.OpenArchive(context.Background(), sha)
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		return nil, false
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatalf("archive %s: %v", sha, err)
	}
	return b, true
}

// An operator who gives two stores the same key (staging and production
// buckets, with the same prefix) cannot have an object of one taken by
// the other: every object is bound to the ID of the store that wrote it
// (by default its bucket and prefix). A writer of both buckets who copies
// a record, or an archive with its header, from one to the other gets
// them rejected, counted and logged, as any object that fails.
func TestObjectBoundToStore(t *testing.T) {
	srv := startServer(t)
	srv.CreateBucket("tfm-staging")
	ctx := context.Background()
	staging := openStore(t, srv, "tfm-staging", "replicas/a", "", key('a'))
	prod := openStore(t, srv, "tfm", "replicas/a", "", key('a'))
	prodID := sharedstore.DefaultStoreID(prod.Location())
	if sharedstore.DefaultStoreID(staging.Location()) == prodID {
		t.Fatalf("two buckets under one store ID %q", prodID)
	}
	for kind, name := range recordsByKind {
		if err := staging.PutMeta(ctx, name, map[string]int{"schema": 2}); err != nil {
			t.Fatal(err)
		}
		copyObject(t, srv, "tfm-staging", "replicas/a/meta/"+name, "tfm", "replicas/a/meta/"+name)
		wantRejected(t, prod, kind, name, 0)
		if n := bytes.Count([]byte(prod.log.String()), []byte("store_id="+prodID)); n < 2 {
			t.Errorf("%s: the log does not name the store's ID %q:\n%s", kind, prodID, prod.log.String())
		}
	}

	data := []byte("an archive of the staging store")
	sha := shaOf(data)
	if err := staging.PutArchive(ctx, sha, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"archive-auth/", "archives/"} {
		copyObject(t, srv, "tfm-staging", "replicas/a/"+o+sha, "tfm", "replicas/a/"+o+sha)
	}
	if _, found := readArchive(t, prod, sha); found {
		t.Error("an archive whose header another store wrote was read")
	}
	if n := prod.obs.rejections("archive"); n != 1 {
		t.Errorf("%d archive rejections, want 1", n)
	}
	if got, found := readArchive(t, staging, sha); !found || !bytes.Equal(got, data) {
		t.Error("the staging store does not read its own archive")
	}
}

// The store's ID is the operator's to choose: a bucket moved to another
// name (objects copied, the old ID kept) reads what it held; the same
// store ID on two stores under one key makes them one store, which is
// why the ID defaults to the bucket and prefix.
func TestStoreIDKeptAcrossRename(t *testing.T) {
	srv := startServer(t)
	srv.CreateBucket("tfm-renamed")
	ctx := context.Background()
	old := openStore(t, srv, "tfm", "replicas/a", "", key('a'))
	oldID := sharedstore.DefaultStoreID(old.Location())
	if want := "s3://tfm/replicas/a/"; oldID != want {
		t.Errorf("default store ID %q, want %q", oldID, want)
	}
	const name = "package/registry.terraform.io/hashicorp/random/1.0.0"
	if err := old.PutMeta(ctx, name, map[string]int{"schema": 2}); err != nil {
		t.Fatal(err)
	}
	data := []byte("an archive moved with its bucket")
	sha := shaOf(data)
	if err := old.PutArchive(ctx, sha, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"meta/" + name, "archive-auth/" + sha, "archives/" + sha} {
		copyObject(t, srv, "tfm", "replicas/a/"+o, "tfm-renamed", "mirror/"+o)
	}

	moved := openStore(t, srv, "tfm-renamed", "mirror", oldID, key('a'))
	if raw, _, err := moved.GetMeta(ctx, name); err != nil || raw == nil {
		t.Errorf("record in the renamed bucket under the old ID: %s, %v", raw, err)
	}
	if got, found := readArchive(t, moved, sha); !found || !bytes.Equal(got, data) {
		t.Error("archive in the renamed bucket under the old ID not read")
	}

	// Without the old ID the renamed bucket is another store.
	other := openStore(t, srv, "tfm-renamed", "mirror", "", key('a'))
	wantRejected(t, other, "package", name, 0)
}

// Within one store an object cannot stand in for another: a record of
// version 1.0.0 copied over 2.0.0's, a release time moved to another
// version, a version list of one provider put under another's name, an
// archive's header put beside another archive; each is rejected.
func TestRecordReplayWithinStore(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	a := openKeyed(t, srv, key('a'), nil)
	for _, c := range []struct{ kind, from, to string }{
		{"package", "package/registry.terraform.io/hashicorp/random/1.0.0", "package/registry.terraform.io/hashicorp/random/2.0.0"},
		{"release_time", "release/signed/registry.terraform.io/hashicorp/random/1.0.0", "release/signed/registry.terraform.io/hashicorp/random/2.0.0"},
		{"versions", "versions/registry.terraform.io/hashicorp/random", "versions/registry.terraform.io/hashicorp/null"},
		{"module_versions", "modversions/registry.terraform.io/acme/net/aws", "modversions/registry.terraform.io/acme/vpc/aws"},
		{"module", "module/registry.terraform.io/acme/net/aws/1.0.0", "module/registry.terraform.io/acme/net/aws/1.1.0"},
		{"oci_digest", "oci/digest/registry.terraform.io/hashicorp/random/sha256:" + string(bytes.Repeat([]byte("a"), 64)),
			"oci/digest/registry.terraform.io/hashicorp/random/sha256:" + string(bytes.Repeat([]byte("b"), 64))},
	} {
		if err := a.PutMeta(ctx, c.from, map[string]string{"from": c.from}); err != nil {
			t.Fatal(err)
		}
		if err := a.PutMeta(ctx, c.to, map[string]string{"from": c.to}); err != nil {
			t.Fatal(err)
		}
		putRaw(t, srv, "meta/"+c.to, rawObject(t, srv, "meta/"+c.from))
		wantRejected(t, a, c.kind, c.to, 0)
	}
}

// macV1 is the MAC of format 1 (the release before the store ID) under
// key k of fields, as that release computed it.
func macV1(k []byte, fields ...string) string {
	m := hmac.New(sha256.New, k)
	var n [8]byte
	for _, f := range append([]string{"tfmirror shared-store object v1"}, fields...) {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		m.Write(n[:])
		m.Write([]byte(f))
	}
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// A bucket the previous release wrote (MACs of format 1, which bind the
// key in the bucket but not the bucket): its records are rejected as
// unauthenticated, counted and logged with the reason, and read again
// once a replica wrote them back in the current format; its archive
// headers are read (an archive is content-addressed and checked byte by
// byte), so an upgrade downloads no archive again. A MAC of a format this
// release does not know is rejected.
func TestEarlierFormatObjects(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	a := openKeyed(t, srv, key('a'), nil)
	id := mustKeys(t, key('a')).ID()

	const name = "versions/registry.terraform.io/hashicorp/random"
	const at, rec = "2026-11-29T10:00:00Z", `{"schema":2,"versions":["1.0.0"]}`
	v1 := fmt.Sprintf(`{"stored_at":%q,"record":%s,"key_id":%q,"mac":%q}`, at, rec, id,
		macV1(key('a'), "versions", "replicas/a/meta/"+name, at, rec))
	putRaw(t, srv, "meta/"+name, []byte(v1))
	wantRejected(t, a, "versions", name, 0)
	if !strings.Contains(a.log.String(), "format of an earlier release") {
		t.Errorf("the log does not say why:\n%s", a.log.String())
	}
	if err := a.PutMeta(ctx, name, map[string]int{"schema": 2}); err != nil {
		t.Fatal(err)
	}
	if raw, _, err := a.GetMeta(ctx, name); err != nil || raw == nil {
		t.Errorf("written back: %s, %v", raw, err)
	}
	if !strings.Contains(string(rawObject(t, srv, "meta/"+name)), `"format":2`) {
		t.Errorf("written back without its format: %s", rawObject(t, srv, "meta/"+name))
	}

	// A later format: rejected, not guessed at.
	const next = "versions/registry.terraform.io/hashicorp/null"
	if err := a.PutMeta(ctx, next, map[string]int{"schema": 2}); err != nil {
		t.Fatal(err)
	}
	later := strings.Replace(string(rawObject(t, srv, "meta/"+next)), `"format":2`, `"format":3`, 1)
	putRaw(t, srv, "meta/"+next, []byte(later))
	wantRejected(t, a, "versions", next, 2)
	if !strings.Contains(a.log.String(), "format 3") {
		t.Errorf("the log does not name the unknown format:\n%s", a.log.String())
	}

	// An archive with a header of format 1.
	data := []byte("an archive stored by the previous release")
	sha := shaOf(data)
	size := strconv.Itoa(len(data))
	header := fmt.Sprintf(`{"name":%q,"sha256":%q,"size":%s,"key_id":%q,"mac":%q}`, "replicas/a/archives/"+sha, sha, size, id,
		macV1(key('a'), "archive", "replicas/a/archives/"+sha, sha, size))
	putRaw(t, srv, "archive-auth/"+sha, []byte(header))
	putRaw(t, srv, "archives/"+sha, data)
	if got, found := readArchive(t, a, sha); !found || !bytes.Equal(got, data) {
		t.Errorf("archive under a header of format 1: found %v", found)
	}
	// Its bytes are still checked against it.
	forged := bytes.Clone(data)
	forged[3] ^= 1
	putRaw(t, srv, "archives/"+sha, forged)
	body, _, err := a.OpenArchive(ctx, sha)
	if err != nil || body == nil {
		t.Fatalf("forged archive: %v", err)
	}
	if _, err := io.ReadAll(body); err == nil {
		t.Error("forged bytes under a header of format 1 read to their end")
	}
	body.Close()
	// A header of format 1 under another prefix's name is refused.
	putRaw(t, srv, "archive-auth/"+sha, []byte(strings.ReplaceAll(header, "replicas/a/", "replicas/b/")))
	putRaw(t, srv, "archives/"+sha, data)
	if _, found := readArchive(t, a, sha); found {
		t.Error("a header of format 1 naming another prefix was read")
	}
}

// A version list put back under its own name within minutes of its
// writing is read, as TestReplayedRecordRejected allows: with the time of
// storing under its MAC, the older one, which is what a replica compares
// with its own copy before it takes the store's (it takes only a newer
// one). The writer can hold back a version for those minutes at most,
// never make a replica take other versions, another provider's or another
// store's list.
func TestVersionListRollbackWithinMinutes(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	c := &clock{now: time.Now()}
	a := openWith(t, srv, sharedstore.Config{Holder: "a", Keys: mustKeys(t, key('a')), Now: c.Now})
	name := recordsByKind["versions"]
	if err := a.PutMeta(ctx, name, map[string][]string{"versions": {"1.0.0"}}); err != nil {
		t.Fatal(err)
	}
	older := rawObject(t, srv, "meta/"+name)
	_, olderAt, _ := a.GetMeta(ctx, name)
	c.Add(time.Minute)
	if err := a.PutMeta(ctx, name, map[string][]string{"versions": {"1.0.0", "2.0.0"}}); err != nil {
		t.Fatal(err)
	}
	_, newerAt, _ := a.GetMeta(ctx, name)
	putRaw(t, srv, "meta/"+name, older)
	raw, at, err := a.GetMeta(ctx, name)
	if err != nil || !strings.Contains(string(raw), `["1.0.0"]`) {
		t.Fatalf("the list put back: %s, %v", raw, err)
	}
	if !at.Equal(olderAt) || !at.Before(newerAt) {
		t.Errorf("the list put back is dated %s, want its own time %s (before %s)", at, olderAt, newerAt)
	}
}

// An OCI digest entry that a replica of the previous release wrote
// (format 1) is read: it is a hint that the replica checks by building
// the document again (ocistore.Adopt), and the only record of a digest
// that replica handed out, which no origin gives again. Moved to another
// name, another kind's or another key's, it is still rejected; so is a
// record of any other kind in format 1.
func TestEarlierFormatDigestEntryRead(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	a := openKeyed(t, srv, key('a'), nil)
	const rec = `{"version":"3.0.0","platforms":["linux_amd64"]}`
	at := time.Now().UTC().Format(time.RFC3339Nano) // written now, as during a rolling upgrade
	v1 := func(kind, name string, k []byte) []byte {
		return fmt.Appendf(nil, `{"stored_at":%q,"record":%s,"key_id":%q,"mac":%q}`, at, rec, mustKeys(t, k).ID(),
			macV1(k, kind, "replicas/a/meta/"+name, at, rec))
	}
	const name = "oci/digest/registry.terraform.io/hashicorp/random/sha256:89488e3e4e63e11a66a80ae0dfe1a3c1cd012f60dd1bf2ecf6fc256a043f9c55"
	putRaw(t, srv, "meta/"+name, v1("oci_digest", name, key('a')))
	raw, _, err := a.GetMeta(ctx, name)
	if err != nil || string(raw) != rec {
		t.Fatalf("a digest entry of format 1: %s, %v\n%s", raw, err, a.log.String())
	}

	// Moved from another name.
	const other = name + "0"
	putRaw(t, srv, "meta/"+other, v1("oci_digest", name, key('a')))
	wantRejected(t, a, "oci_digest", other, 0)
	// Another key's.
	const theirs = name + "1"
	putRaw(t, srv, "meta/"+theirs, v1("oci_digest", theirs, key('s')))
	wantRejected(t, a, "oci_digest", theirs, 2)
	// Another kind's MAC.
	const kinded = name + "2"
	putRaw(t, srv, "meta/"+kinded, v1("oci_version", kinded, key('a')))
	wantRejected(t, a, "oci_digest", kinded, 4)
	// Any other kind in format 1 is still rejected.
	const version = "oci/version/registry.terraform.io/hashicorp/random/3.0.0"
	putRaw(t, srv, "meta/"+version, v1("oci_version", version, key('a')))
	wantRejected(t, a, "oci_version", version, 0)
}
