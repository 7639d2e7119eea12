package mirror

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
)

// putCounting is a shared tier that counts the records put in it, by key.
type putCounting struct {
	sharedTier
	mu   sync.Mutex
	puts map[string]int
}

func (c *putCounting) PutMeta(ctx context.Context, key string, record any) error {
	c.mu.Lock()
	c.puts[key]++
	c.mu.Unlock()
	return c.sharedTier.PutMeta(ctx, key, record)
}

func (c *putCounting) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.puts)
}

// asOtherRelease writes every record of the bucket over again as a
// replica of another release of tfmirror sharing the bucket would, in its
// MAC format: 1, release 2.0.0's (which bound the key in the bucket, not
// the store's ID), or 3, a later release's, which this one does not know.
// The record and its key are kept; the time of storing is now, as a write
// of that replica's.
func asOtherRelease(t *testing.T, srv *s3test.Server, format int) {
	t.Helper()
	ctx := context.Background()
	key := bytes.Repeat([]byte("r"), 32) // sharedKeys'
	kindOf := func(name string) string {
		for prefix, kind := range map[string]string{"package/": "package", "versions/": "versions", "release/": "release_time",
			"oci/version/": "oci_version", "oci/digest/": "oci_digest"} {
			if strings.HasPrefix(name, prefix) {
				return kind
			}
		}
		return "record"
	}
	mac := func(domain string, fields ...string) string {
		m := hmac.New(sha256.New, key)
		var n [8]byte
		for _, f := range append([]string{domain}, fields...) {
			binary.BigEndian.PutUint64(n[:], uint64(len(f)))
			m.Write(n[:])
			m.Write([]byte(f))
		}
		return base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	for _, full := range srv.Keys(bucket, sharedPrefix+"/meta/") {
		var doc struct {
			Record json.RawMessage `json:"record"`
			KeyID  string          `json:"key_id"`
		}
		if err := json.Unmarshal(bucketObject(t, srv, strings.TrimPrefix(full, sharedPrefix+"/")), &doc); err != nil {
			t.Fatal(err)
		}
		at := time.Now().UTC().Format(time.RFC3339Nano)
		name := strings.TrimPrefix(full, sharedPrefix+"/meta/")
		var b []byte
		switch format {
		case 1:
			b = fmt.Appendf(nil, `{"stored_at":%q,"record":%s,"key_id":%q,"mac":%q}`, at, doc.Record, doc.KeyID,
				mac("tfmirror shared-store object v1", kindOf(name), full, at, string(doc.Record)))
		default:
			b = fmt.Appendf(nil, `{"stored_at":%q,"record":%s,"format":%d,"key_id":%q,"mac":%q}`, at, doc.Record, format, doc.KeyID,
				mac(fmt.Sprintf("tfmirror shared-store object v%d", format), "s3://"+bucket+"/"+sharedPrefix+"/", kindOf(name), "meta/"+name, at, string(doc.Record)))
		}
		if _, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(full), Body: bytes.NewReader(b)}); err != nil {
			t.Fatal(err)
		}
	}
}

// Two releases of tfmirror on one bucket (a rolling upgrade), each
// refusing the records the other writes: release 2.0.0's, of MAC format
// 1, which this release takes for unauthenticated; a later release's, of
// a format this one does not know. A replica of this release that finds
// such a record where its cache has none takes the record from the
// origin and writes it back once; it does not read the bucket's copy
// again while its cache holds the record, and so does not write it again,
// however often the other release writes its own over it. The two do not
// rewrite each other's records in a loop: this release's writes are its
// own cache's misses, and its version list refreshes, one write each, as
// with no other release on the bucket.
func TestSharedRecordsOfAnotherReleaseWrittenBackOnce(t *testing.T) {
	for _, format := range []int{1, 3} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) {
			srv := s3test.Start(t)
			srv.SetEnv(t)
			srv.CreateBucket(bucket)
			ctx := context.Background()
			a := newHarness(t, harnessOptions{cfg: Config{Shared: sharedTier{newSharedStore(t, srv, "a", nil)}}})
			origin := a.origin
			origin.AddProvider(ns, typ, []string{"1.0.0"}, platforms)
			origin.SetSignedAt(ns, typ, "1.0.0", time.Now().Add(-365*24*time.Hour))
			pol := enginetest.DecodePolicy(t, `minimum_release_age = "72h"`)
			a.engine.SetPolicy(pol)
			sha := origin.SHA256(ns, typ, "1.0.0", "linux_amd64")
			read := func(h *harness) {
				t.Helper()
				if got := h.read(ctx, "1.0.0", "linux_amd64"); got.err != nil {
					t.Fatalf("archive: %v", got.err)
				}
				h.waitCommitted(sha)
			}
			read(a)

			tier := &putCounting{sharedTier: sharedTier{newSharedStore(t, srv, "b", nil)}, puts: map[string]int{}}
			b := &harness{t: t, origin: origin}
			// Every version list asked for is refreshed, and each refresh
			// reads the bucket's list, which it refuses.
			b.start(harnessOptions{cfg: Config{Shared: tier, VersionsTTL: time.Nanosecond}})
			b.engine.SetPolicy(pol)
			asOtherRelease(t, srv, format)
			read(b)
			first := tier.counts()
			if k := "package/" + originHost + "/" + ns + "/" + typ + "/1.0.0"; first[k] != 1 {
				t.Errorf("%s written back %d times, want once: %v", k, first[k], first)
			}
			origin.ResetHits()

			const rounds = 3
			for range rounds {
				asOtherRelease(t, srv, format)
				if _, _, err := b.engine.Versions(ctx, b.provider()); err != nil {
					t.Fatal(err)
				}
				read(b)
				b.waitIdle()
			}
			got := tier.counts()
			for k, n := range got {
				want := first[k]
				if strings.HasPrefix(k, "versions/") {
					want += origin.Hits(fakeorigin.Versions) // one write per refresh
				}
				if n != want {
					t.Errorf("%s written %d times, want %d", k, n, want)
				}
			}
			if keys := slices.Sorted(maps.Keys(got)); len(keys) != len(first) {
				t.Errorf("records written %v, want only those of the first round %v", keys, slices.Sorted(maps.Keys(first)))
			}
			for _, k := range []fakeorigin.Kind{fakeorigin.Download, fakeorigin.Shasums, fakeorigin.Signature, fakeorigin.Archive} {
				if n := origin.Hits(k); n != 0 {
					t.Errorf("%d origin %s requests once the records were written back, want none", n, k)
				}
			}
		})
	}
}

// The OCI digests a replica of release 2.0.0 handed out (its digest
// entries in the bucket of MAC format 1) resolve by digest alone on a
// replica of this release that never saw them, during a rolling upgrade
// or after it: no origin can give such an entry again, and the replica
// checks it by building the document again, so it reads the entry of
// the earlier format as the hint it is (a client's pinned digest, once
// answered MANIFEST_UNKNOWN).
func TestSharedOCIDigestsOfFormatOneResolve(t *testing.T) {
	srv, rs := newReplicas(t, 2, nil)
	a, b := rs[0], rs[1]
	p := a.provider()
	v := mustVersion(t, "1.0.0")
	oa := mustOCI(t, a.engine)
	ob := mustOCI(t, b.engine)
	index, manifests, _ := ociDigests(t, oa, p, v)
	a.waitIdle()
	asOtherRelease(t, srv, 1) // as replicas of 2.0.0 wrote them
	for _, d := range append(manifests, index) {
		got, err := ob.Manifest(t.Context(), p, d)
		if err != nil {
			t.Fatalf("this release's replica, %s handed out by a 2.0.0 one: %v", d, err)
		}
		if got.Digest != d {
			t.Fatalf("answered %s for %s", got.Digest, d)
		}
	}
}
