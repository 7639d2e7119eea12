package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// macFormatOne is the MAC of the release before the store ID (format 1:
// no store, the key in the bucket) under the 32-byte key of c.
func macFormatOne(c byte, fields ...string) string {
	m := hmac.New(sha256.New, bytes.Repeat([]byte{c}, 32))
	var n [8]byte
	for _, f := range append([]string{"tfmirror shared-store object v1"}, fields...) {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		m.Write(n[:])
		m.Write([]byte(f))
	}
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// kindFormatOne is the kind the release before gave the record under the
// name below meta/.
func kindFormatOne(name string) string {
	for _, k := range [][2]string{{"package/", "package"}, {"versions/", "versions"}, {"module/", "module"},
		{"modversions/", "module_versions"}, {"modzip/", "module_zip"}, {"release/", "release_time"},
		{"oci/version/", "oci_version"}, {"oci/digest/", "oci_digest"}, {"lastuse/", "last_use"}} {
		if strings.HasPrefix(name, k[0]) {
			return k[1]
		}
	}
	return "record"
}

// rewriteToFormatOne re-signs every record and archive header in the
// bucket as the release before the store ID wrote them, with the
// replicas' key ('r').
func rewriteToFormatOne(t *testing.T, s *sharedSetup) {
	t.Helper()
	for _, key := range s.srv.Keys(sharedBucket, "mirror/") {
		switch {
		case strings.HasPrefix(key, "mirror/meta/"):
			var doc struct {
				StoredAt string          `json:"stored_at"`
				Record   json.RawMessage `json:"record"`
				KeyID    string          `json:"key_id"`
			}
			if err := json.Unmarshal(getObject(t, s, key), &doc); err != nil || doc.KeyID == "" {
				t.Fatalf("%s: %v", key, err)
			}
			mac := macFormatOne('r', kindFormatOne(strings.TrimPrefix(key, "mirror/meta/")), key, doc.StoredAt, string(doc.Record))
			old, _ := json.Marshal(map[string]any{"stored_at": doc.StoredAt, "record": doc.Record, "key_id": doc.KeyID, "mac": mac})
			putObject(t, s, key, old)
		case strings.HasPrefix(key, "mirror/archive-auth/"):
			var h struct {
				SHA256 string `json:"sha256"`
				Size   int64  `json:"size"`
				KeyID  string `json:"key_id"`
			}
			if err := json.Unmarshal(getObject(t, s, key), &h); err != nil || h.KeyID == "" {
				t.Fatalf("%s: %v", key, err)
			}
			name := "mirror/archives/" + h.SHA256
			size := strconv.FormatInt(h.Size, 10)
			old, _ := json.Marshal(map[string]any{"name": name, "sha256": h.SHA256, "size": h.Size, "key_id": h.KeyID,
				"mac": macFormatOne('r', "archive", name, h.SHA256, size)})
			putObject(t, s, key, old)
		}
	}
}

// A bucket the release before the store ID wrote (MACs of format 1, which
// bind the key in the bucket but not the bucket): a replica of this
// release refuses its records (counted), serves the origin's package and
// writes the records back in the current format, while it takes the
// archive from the bucket (content-addressed, checked byte by byte):
// the upgrade downloads no archive again.
func TestSharedStoreBucketOfFormatOne(t *testing.T) {
	s := newSharedSetup(t, "linux_amd64")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const pl = "linux_amd64"
	want := s.archive(pl)
	record := "mirror/meta/package/" + s.origin.Addr + "/hashicorp/random/1.0.0"

	fillBucket(ctx, t, s, pl)
	rewriteToFormatOne(t, s)

	m := s.start(t)
	if body, _, err := m.get(ctx, s.path(pl)); err != nil || !bytes.Equal(body, want) {
		t.Fatalf("replica on the bucket of format 1: %d bytes, %v", len(body), err)
	}
	if n := m.metric(t, `tfmirror_shared_rejected_total{kind="package"}`); n < 1 {
		t.Errorf("tfmirror_shared_rejected_total{kind=\"package\"} = %v, want at least 1", n)
	}
	if n := m.metric(t, `tfmirror_shared_rejected_total{kind="archive"}`); n != 0 {
		t.Errorf("the archive of format 1 was refused %v times", n)
	}
	if n := s.hits(pl); n != 1 {
		t.Errorf("%d origin downloads of the archive, want 1 (the first replica's)", n)
	}
	deadline := time.Now().Add(bucketWait)
	for !bytes.Contains(getObject(t, s, record), []byte(`"format":2`)) {
		if time.Now().After(deadline) {
			t.Fatalf("the package record was not written back in the current format: %s", getObject(t, s, record))
		}
		time.Sleep(50 * time.Millisecond)
	}

	sealed := s.start(t, "--offline")
	if body, _, err := sealed.get(ctx, s.path(pl)); err != nil || !bytes.Equal(body, want) {
		t.Fatalf("sealed replica after the write-back: %d bytes, %v", len(body), err)
	}
	if n := sealed.metric(t, `tfmirror_shared_rejected_total{kind="package"}`); n != 0 {
		t.Errorf("the written-back record was refused %v times", n)
	}
}
