package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// The shared bucket is a trust boundary: what a writer of the bucket
// without the replicas' key puts there is never served.
//
// A `tfmirror serve` whose way to the origin goes through an upstream
// proxy that sends it to a hostile registry (same address, its own
// signing key, its own archive) shares the bucket with another key: it
// writes its version list, package record, signed by its own key, and its
// archive. A replica with the operator's key then serves the real
// origin's bytes and hashes, counts and logs what it refused, and writes
// back what it verified: a sealed replica with an empty cache serves that
// from the bucket.
func TestSharedStoreHostileWriter(t *testing.T) {
	s := newSharedSetup(t, "linux_amd64")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const pl = "linux_amd64"
	want := s.archive(pl)
	wantSHA := s.origin.SHA256("hashicorp", "random", "1.0.0", pl)

	// The hostile registry: another key, other bytes, download URLs
	// relative to the registry the replica believes it talks to.
	hostile, err := fakeorigin.Start(fakeorigin.Options{ArchiveSize: 1 << 19, RelativeDownloadURLs: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hostile.Close)
	hostile.AddProvider("hashicorp", "random", []string{"1.0.0"}, []string{pl})
	evil := hostile.Archive("hashicorp", "random", "1.0.0", pl)
	evilSHA := hostile.SHA256("hashicorp", "random", "1.0.0", pl)
	if bytes.Equal(evil, want) || hostile.KeyID() == s.origin.KeyID() {
		t.Fatal("the hostile registry serves the real one's archive or signs with its key")
	}
	proxy := startRedirectProxy(t, s.origin, map[string]string{s.origin.Addr: hostile.Addr})
	bad := startProcess(t, s.bin, filepath.Join(t.TempDir(), "data"), s.origin, originCAFile(t, hostile),
		"--shared-store", s.srv.URL(sharedBucket, "mirror"), "--shared-store-lease-ttl", liveLeaseTTL,
		"--shared-store-key-file", keyFile(t, 'x'), "--upstream-proxy", "http://"+proxy.ln.Addr().String())
	if body, _, err := bad.get(ctx, s.path(pl)); err != nil || !bytes.Equal(body, evil) {
		t.Fatalf("the misled replica did not serve the hostile archive: %d bytes, %v", len(body), err)
	}
	if s.origin.TotalHits() != 0 || hostile.ArchiveHits("hashicorp", "random", "1.0.0", pl) != 1 {
		t.Fatalf("the misled replica reached the real origin (%d requests)", s.origin.TotalHits())
	}
	waitBucket(t, s, "mirror/archives/"+evilSHA, "mirror/meta/package/"+s.origin.Addr+"/hashicorp/random/1.0.0",
		"mirror/meta/versions/"+s.origin.Addr+"/hashicorp/random")

	good := s.start(t)
	body, _, err := good.get(ctx, s.path(pl))
	if err != nil || !bytes.Equal(body, want) {
		t.Fatalf("the replica with the operator's key served %d bytes (hostile: %v), %v", len(body), bytes.Equal(body, evil), err)
	}
	if n := s.hits(pl); n != 1 {
		t.Errorf("%d downloads from the real origin, want 1", n)
	}

	// The hashes a lock file records are the real archive's, those of a
	// replica on its own that installed it straight from the origin.
	waitCached(t, good, 1)
	doc, _, err := good.get(ctx, "/"+s.origin.Addr+"/hashicorp/random/1.0.0.json")
	if err != nil || !strings.Contains(string(doc), "zh:"+wantSHA) || strings.Contains(string(doc), evilSHA) {
		t.Errorf("1.0.0.json: %s, %v", doc, err)
	}
	direct := startProcess(t, s.bin, filepath.Join(t.TempDir(), "data"), s.origin, s.caFile)
	if body, _, err := direct.get(ctx, s.path(pl)); err != nil || !bytes.Equal(body, want) {
		t.Fatalf("replica without the bucket: %v", err)
	}
	waitCached(t, direct, 1)
	directDoc, _, err := direct.get(ctx, "/"+s.origin.Addr+"/hashicorp/random/1.0.0.json")
	if err != nil || !bytes.Equal(doc, directDoc) {
		t.Errorf("1.0.0.json from the bucket's replica:\n%s\nfrom a replica on its own:\n%s (%v)", doc, directDoc, err)
	}
	for _, kind := range []string{"package", "versions"} {
		if n := good.metric(t, `tfmirror_shared_rejected_total{kind="`+kind+`"}`); n < 1 {
			t.Errorf("tfmirror_shared_rejected_total{kind=%q} = %v, want at least 1", kind, n)
		}
	}
	if good.logged("shared store object failed authentication; ignored, taken from the origin instead (and written back authenticated)") == nil {
		t.Error("the refused objects are not in the log")
	}
	// And on the status page.
	page, _, err := good.get(ctx, "/?format=json")
	var st struct {
		Health struct {
			Rejected int64 `json:"shared_store_rejected"`
		} `json:"health"`
	}
	if err != nil || json.Unmarshal(page, &st) != nil || st.Health.Rejected < 2 {
		t.Errorf("status page: %d objects refused, want at least 2 (%v)", st.Health.Rejected, err)
	}
	if html, _, err := good.get(ctx, "/"); err != nil || !strings.Contains(string(html), "reads of objects that failed authentication") {
		t.Errorf("the status page does not say that objects were refused (%v)", err)
	}

	// What the good replica verified is in the bucket, authenticated: a
	// sealed replica with an empty cache serves it from there.
	waitBucket(t, s, "mirror/archive-auth/"+wantSHA, "mirror/archives/"+wantSHA)
	sealed := s.start(t, "--offline")
	if body, _, err := sealed.get(ctx, s.path(pl)); err != nil || !bytes.Equal(body, want) {
		t.Fatalf("sealed replica: %d bytes, %v", len(body), err)
	}
	if n := s.hits(pl); n != 2 {
		t.Errorf("%d downloads from the real origin after the sealed replica served it, want 2 (the good replica's, the direct one's)", n)
	}
}

// A bucket filled by the previous release (records without MAC, archives
// without header) is read safely by a replica of this one: every object
// is re-derived from the origin on first use and written back
// authenticated, after which a sealed replica serves from the bucket.
func TestSharedStoreBucketOfEarlierRelease(t *testing.T) {
	s := newSharedSetup(t, "linux_amd64")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const pl = "linux_amd64"
	want := s.archive(pl)
	sha := s.origin.SHA256("hashicorp", "random", "1.0.0", pl)

	// The bucket as the previous release leaves it: filled by a replica,
	// then stripped of what this release adds. A hostile archive in place
	// of the real one shows that nothing of it is taken on trust.
	fillBucket(ctx, t, s, pl)
	stripToEarlierRelease(t, s)
	forged := bytes.Clone(want)
	forged[len(forged)/2] ^= 1
	putObject(t, s, "mirror/archives/"+sha, forged)

	m := s.start(t)
	if body, _, err := m.get(ctx, s.path(pl)); err != nil || !bytes.Equal(body, want) {
		t.Fatalf("replica on the old bucket: %d bytes, %v", len(body), err)
	}
	if n := s.hits(pl); n != 2 {
		t.Errorf("%d origin downloads, want 2 (the first replica's, then the re-derived one)", n)
	}
	for _, kind := range []string{"archive", "package", "versions"} {
		if n := m.metric(t, `tfmirror_shared_rejected_total{kind="`+kind+`"}`); n < 1 {
			t.Errorf("tfmirror_shared_rejected_total{kind=%q} = %v, want at least 1", kind, n)
		}
	}
	waitCached(t, m, 1)
	waitBucket(t, s, "mirror/archive-auth/"+sha)
	deadline := time.Now().Add(bucketWait)
	for !bytes.Equal(getObject(t, s, "mirror/archives/"+sha), want) {
		if time.Now().After(deadline) {
			t.Fatal("the forged archive was not replaced")
		}
		time.Sleep(50 * time.Millisecond)
	}

	sealed := s.start(t, "--offline")
	if body, _, err := sealed.get(ctx, s.path(pl)); err != nil || !bytes.Equal(body, want) {
		t.Fatalf("sealed replica after the write-back: %d bytes, %v", len(body), err)
	}
	if n := s.hits(pl); n != 2 {
		t.Errorf("%d origin downloads after the sealed replica served it, want 2", n)
	}
	if n := sealed.metric(t, `tfmirror_shared_rejected_total{kind="package"}`); n != 0 {
		t.Errorf("the written-back record was refused %v times", n)
	}
}

// A replica upgraded in place, its cache warm, serves what its cache
// holds without asking the bucket, so it writes nothing back: a bucket
// the previous release filled stays unauthenticated for what it serves,
// and a sealed replica cannot serve it. The upgrade's remedy
// (docs/scaling-out.md) is a sync on an empty data directory with the
// shared store, connected: it takes the versions through the bucket,
// re-derives them from the origin and writes them back authenticated.
func TestSharedStoreEarlierBucketSyncedBack(t *testing.T) {
	s := newSharedSetup(t, "linux_amd64")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const pl = "linux_amd64"
	want := s.archive(pl)

	warm := fillBucket(ctx, t, s, pl)
	stripToEarlierRelease(t, s)
	// The warm replica, upgraded in place, serves from its cache.
	if body, _, err := warm.get(ctx, s.path(pl)); err != nil || !bytes.Equal(body, want) {
		t.Fatalf("the warm replica: %v", err)
	}
	sealed := s.start(t, "--offline")
	if _, resp, err := sealed.get(ctx, s.path(pl)); err == nil {
		t.Fatalf("a sealed replica served the package of an unauthenticated bucket (status %d)", resp.StatusCode)
	}

	manifest := filepath.Join(t.TempDir(), "mirror.hcl")
	if err := os.WriteFile(manifest, []byte(fmt.Sprintf("platforms = [%q]\n\nprovider %q {\n  versions = [\"1.0.0\"]\n}\n",
		pl, s.origin.Addr+"/hashicorp/random")), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"sync", "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--allowed-origins", s.origin.Addr, "--allow-private-origins"}, s.flags...)
	cmd := exec.CommandContext(ctx, s.bin, append(args, manifest)...)
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+s.caFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tfmirror sync on an empty data directory: %v\n%s", err, out)
	}
	waitBucket(t, s, "mirror/archive-auth/"+s.origin.SHA256("hashicorp", "random", "1.0.0", pl))

	again := s.start(t, "--offline")
	if body, _, err := again.get(ctx, s.path(pl)); err != nil || !bytes.Equal(body, want) {
		t.Fatalf("a sealed replica after the sync: %d bytes, %v", len(body), err)
	}
}

// fillBucket has a new replica on s's bucket serve pl's archive of
// hashicorp/random 1.0.0, and waits until its cache holds it and the
// bucket the archive, its header and the package record; it returns the
// replica.
func fillBucket(ctx context.Context, t *testing.T, s *sharedSetup, pl string) *proc {
	t.Helper()
	m := s.start(t)
	if body, _, err := m.get(ctx, s.path(pl)); err != nil || !bytes.Equal(body, s.archive(pl)) {
		t.Fatalf("filling the bucket: %v", err)
	}
	waitCached(t, m, 1)
	sha := s.origin.SHA256("hashicorp", "random", "1.0.0", pl)
	waitBucket(t, s, "mirror/archives/"+sha, "mirror/archive-auth/"+sha, "mirror/meta/package/"+s.origin.Addr+"/hashicorp/random/1.0.0")
	return m
}

// bucketWait bounds a wait for a replica's write to the bucket: done in
// milliseconds on an idle machine, it has taken more than 30 s on a loaded
// two-core CI machine.
const bucketWait = 2 * time.Minute

// waitBucket waits (at most bucketWait) until the bucket holds every key.
func waitBucket(t *testing.T, s *sharedSetup, keys ...string) {
	t.Helper()
	deadline := time.Now().Add(bucketWait)
	for {
		have := s.srv.Keys(sharedBucket, "mirror/")
		missing := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return slices.Contains(have, k) })
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bucket never held %q; it holds %q", missing, have)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stripToEarlierRelease rewrites the bucket as the release before the
// authenticated tier wrote it: records {stored_at, record}, no archive
// headers.
func stripToEarlierRelease(t *testing.T, s *sharedSetup) {
	t.Helper()
	for _, key := range s.srv.Keys(sharedBucket, "mirror/") {
		switch {
		case strings.HasPrefix(key, "mirror/archive-auth/"):
			if _, err := s.srv.Client().DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(sharedBucket), Key: aws.String(key)}); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(key, "mirror/meta/"):
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(getObject(t, s, key), &doc); err != nil || doc["mac"] == nil {
				t.Fatalf("%s: %v (no mac?)", key, err)
			}
			old, _ := json.Marshal(map[string]json.RawMessage{"stored_at": doc["stored_at"], "record": doc["record"]})
			putObject(t, s, key, old)
		}
	}
}

func getObject(t *testing.T, s *sharedSetup, key string) []byte {
	t.Helper()
	o, err := s.srv.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(sharedBucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(o.Body); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func putObject(t *testing.T, s *sharedSetup, key string, body []byte) {
	t.Helper()
	if _, err := s.srv.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(sharedBucket),
		Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
}

// A rotation of the shared store key through real processes: what a
// replica on the old key wrote is served by a sealed replica that signs
// with the new key and still accepts the old one as its previous key, and
// refused by one that holds the new key alone.
func TestSharedStoreKeyRotation(t *testing.T) {
	s := newSharedSetup(t, "linux_amd64")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const pl = "linux_amd64"
	want := s.archive(pl)
	sha := s.origin.SHA256("hashicorp", "random", "1.0.0", pl)
	oldKey, newKey := keyFile(t, 'o'), keyFile(t, 'n')
	base := []string{"--shared-store", s.srv.URL(sharedBucket, "mirror"), "--shared-store-lease-ttl", liveLeaseTTL}
	start := func(extra ...string) *proc {
		return startProcess(t, s.bin, filepath.Join(t.TempDir(), "data"), s.origin, s.caFile, append(slices.Clone(base), extra...)...)
	}

	old := start("--shared-store-key-file", oldKey)
	if body, _, err := old.get(ctx, s.path(pl)); err != nil || !bytes.Equal(body, want) {
		t.Fatalf("replica on the old key: %v", err)
	}
	waitCached(t, old, 1)
	waitBucket(t, s, "mirror/archive-auth/"+sha, "mirror/archives/"+sha, "mirror/meta/package/"+s.origin.Addr+"/hashicorp/random/1.0.0")

	rotated := start("--offline", "--shared-store-key-file", newKey, "--shared-store-previous-key-file", oldKey)
	if body, _, err := rotated.get(ctx, s.path(pl)); err != nil || !bytes.Equal(body, want) {
		t.Fatalf("sealed replica with the new key and the old as previous: %d bytes, %v", len(body), err)
	}
	if n := rotated.metric(t, `tfmirror_shared_rejected_total{kind="package"}`); n != 0 {
		t.Errorf("the old key's record was refused %v times during the rotation", n)
	}
	if n := s.hits(pl); n != 1 {
		t.Errorf("%d origin downloads, want 1", n)
	}

	done := start("--offline", "--shared-store-key-file", newKey)
	if body, resp, err := done.get(ctx, s.path(pl)); err == nil && resp.StatusCode == 200 {
		t.Fatalf("a replica without the old key served what only the old key signed (%d bytes)", len(body))
	}
	if n := done.metric(t, `tfmirror_shared_rejected_total{kind="package"}`) + done.metric(t, `tfmirror_shared_rejected_total{kind="versions"}`); n < 1 {
		t.Error("the old key's objects were not counted as refused")
	}
}

// A writer of the bucket without the key cannot backdate a version past
// the minimum release age: a release time it puts in the bucket, older
// than the version's signature, is refused, and the replica holds the
// version back by the time it verified itself.
func TestSharedStoreBackdatedReleaseTime(t *testing.T) {
	s := newSharedSetup(t, "linux_amd64")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const pl = "linux_amd64"
	s.origin.SetSignedAt("hashicorp", "random", "1.0.0", time.Now().Add(-time.Hour))
	conf := writePolicyConfig(t, "  minimum_release_age = \"72h\"\n")

	// Released long ago, says the bucket, unauthenticated: as anyone with
	// the bucket's credentials writes it.
	name := "meta/release/signed/" + s.origin.Addr + "/hashicorp/random/1.0.0"
	backdated, _ := json.Marshal(map[string]any{"stored_at": time.Now().UTC().Format(time.RFC3339Nano),
		"record": map[string]any{"schema": 1, "at": "2020-01-01T00:00:00Z"}})
	putObject(t, s, "mirror/"+name, backdated)

	m := s.start(t, "--config", conf)
	body, resp, err := m.get(ctx, s.path(pl))
	if resp == nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 451 || !strings.Contains(string(body), "minimum release age") {
		t.Fatalf("a version released an hour ago, under a 72h minimum release age: status %d (%d bytes); want 451, held back", resp.StatusCode, len(body))
	}
	if n := m.metric(t, `tfmirror_shared_rejected_total{kind="release_time"}`); n < 1 {
		t.Errorf("tfmirror_shared_rejected_total{kind=\"release_time\"} = %v, want at least 1", n)
	}
}

// Two replicas sharing a bucket, a minimum release age of 72h on
// modules: a module version that replica b listed first (dated by a's
// listing before it) stays held on replica a when a lists again, taking
// b's newer listing from the bucket as the one before its own. Taken for
// a version of a first listing, it was listed and served by a at once.
func TestSharedStoreModuleReleaseAgeAcrossReplicas(t *testing.T) {
	s := newSharedSetup(t, "linux_amd64")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s.origin.AddTarball("vpc.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# vpc\n")}))
	s.origin.AddModule("acme", "vpc", "aws", "1.0.0", s.origin.TarballURL("vpc.tar.gz"))
	conf := writePolicyConfig(t, "  minimum_release_age = \"72h\"\n")
	const ttl = time.Second
	versions := "/registry/" + s.origin.Addr + "/v1/modules/acme/vpc/aws/versions"
	list := func(m *proc) string {
		t.Helper()
		body, resp, err := m.get(ctx, versions)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("versions: %v, %v: %s", resp, err, body)
		}
		return string(body)
	}
	inBucket := func(prefix, part string) {
		t.Helper()
		deadline := time.Now().Add(bucketWait)
		for !slices.ContainsFunc(s.srv.Keys(sharedBucket, "mirror/meta/"+prefix), func(k string) bool { return strings.Contains(k, part) }) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s%s in the bucket: %q", prefix, part, s.srv.Keys(sharedBucket, "mirror/"))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	a := s.start(t, "--config", conf, "--versions-ttl", ttl.String())
	if got := list(a); !strings.Contains(got, `"1.0.0"`) {
		t.Fatalf("a's first listing: %s", got)
	}
	inBucket("modversions/", "/acme/vpc/aws")

	s.origin.AddModule("acme", "vpc", "aws", "1.1.0", s.origin.TarballURL("vpc.tar.gz"))
	b := s.start(t, "--config", conf, "--versions-ttl", ttl.String())
	time.Sleep(ttl + 100*time.Millisecond) // a's listing in the bucket is stale: b lists anew
	if got := list(b); strings.Contains(got, `"1.1.0"`) {
		t.Fatalf("b lists 1.1.0, published just now: %s", got)
	}
	inBucket("release/absent/module/", "/acme/vpc/aws/1.1.0")

	time.Sleep(ttl + 100*time.Millisecond)
	if got := list(a); strings.Contains(got, `"1.1.0"`) {
		t.Errorf("a lists 1.1.0, published just now, under a 72h minimum release age: %s", got)
	}
	body, resp, err := a.get(ctx, "/registry/"+s.origin.Addr+"/v1/modules/acme/vpc/aws/1.1.0/download")
	if resp == nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 451 {
		t.Errorf("a's download of 1.1.0: status %d (%s), want 451, held back", resp.StatusCode, body)
	}
}
