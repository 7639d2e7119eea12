package sharedstore_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
	"github.com/tfmirror/tfmirror/v2/sharedstore"
)

// awsDated is an endpoint in front of a versitygw that dates objects by
// its own clock as AWS S3 does: an object's Last-Modified is the time of
// its PUT, and that of an object assembled by a multipart upload the time
// the upload was initiated, not of its completion (S3 User Guide, "Object
// metadata": "For multipart uploads, the object creation date is the date
// of initiation of the multipart upload"). versitygw dates the latter at
// its completion.
type awsDated struct {
	srv   *httptest.Server
	clock *clock

	mu        sync.Mutex
	initiated map[string]time.Time // by path
	modified  map[string]time.Time // by path
}

func startAWSDated(t *testing.T, backend *s3test.Server, c *clock) *awsDated {
	a := &awsDated{clock: c, initiated: map[string]time.Time{}, modified: map[string]time.Time{}}
	to, err := url.Parse(backend.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(to)
	proxy.ModifyResponse = func(resp *http.Response) error {
		r := resp.Request
		a.mu.Lock()
		defer a.mu.Unlock()
		switch q := r.URL.Query(); {
		case resp.StatusCode/100 != 2:
		case r.Method == http.MethodPut && !q.Has("uploadId"):
			a.modified[r.URL.Path] = a.clock.Now()
		case r.Method == http.MethodPost && q.Has("uploads"):
			a.initiated[r.URL.Path] = a.clock.Now()
		case r.Method == http.MethodPost && q.Has("uploadId"):
			a.modified[r.URL.Path] = a.initiated[r.URL.Path]
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			if m, ok := a.modified[r.URL.Path]; ok {
				resp.Header.Set("Last-Modified", m.UTC().Format(http.TimeFormat))
			}
		}
		return nil
	}
	a.srv = httptest.NewServer(proxy)
	t.Cleanup(a.srv.Close)
	return a
}

// client is a writer of the bucket without the replicas' key.
func (a *awsDated) client() *s3.Client {
	return s3.New(s3.Options{Region: s3test.Region, BaseEndpoint: aws.String(a.srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s3test.AccessKey, s3test.SecretKey, "")})
}

// A record a replica wrote, which a writer of the bucket without the key
// kept as a part of a multipart upload to its name initiated just before
// (a version list is written again at each refresh, so the next writing
// is foreseen), completed months later over the newer record: the store
// dates it at the upload's initiation, before its time of storing, as if
// it had been written then. No replica writes a record by a multipart
// upload: such an object is refused, as any put back, not read.
func TestMultipartReplayRejected(t *testing.T) {
	srv := startServer(t)
	c := &clock{now: time.Now()}
	front := startAWSDated(t, srv, c)
	ctx := context.Background()
	r := keyed{obs: &observer{}, log: &logbuf.Buffer{}}
	s, err := sharedstore.Open(ctx, sharedstore.Config{
		URL:  "s3://tfm/replicas/a?endpoint=" + front.srv.URL + "&region=" + s3test.Region + "&path_style=true",
		Keys: mustKeys(t, key('a')), Now: c.Now, Observer: r.obs, Logger: slog.New(slog.NewTextHandler(r.log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r.Store = s
	name := recordsByKind["module_versions"]
	objKey := aws.String("replicas/a/meta/" + name)
	attacker := front.client()

	up, err := attacker.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("tfm"), Key: objKey})
	if err != nil {
		t.Fatal(err)
	}
	c.Add(time.Minute)
	old := map[string]any{"schema": 2, "versions": []string{"1.0.0"}}
	if err := r.PutMeta(ctx, name, old); err != nil {
		t.Fatal(err)
	}
	kept := rawObject(t, srv, "meta/"+name)
	part, err := attacker.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("tfm"), Key: objKey, UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader(kept)})
	if err != nil {
		t.Fatal(err)
	}

	c.Add(30 * 24 * time.Hour)
	if err := r.PutMeta(ctx, name, map[string]any{"schema": 2, "versions": []string{"1.0.0", "2.0.0"}}); err != nil {
		t.Fatal(err)
	}
	c.Add(30 * 24 * time.Hour)
	if _, err := attacker.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("tfm"), Key: objKey,
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{
			{ETag: part.ETag, PartNumber: aws.Int32(1)}}}}); err != nil {
		t.Fatal(err)
	}
	if got := rawObject(t, srv, "meta/"+name); !bytes.Equal(got, kept) {
		t.Fatalf("the multipart upload did not put the record back: %s", got)
	}
	wantRejected(t, r, "module_versions", name, 0)

	// Written back with one PUT, it is read again.
	now := map[string]any{"schema": 2, "versions": []string{"1.0.0", "2.0.0", "3.0.0"}}
	if err := r.PutMeta(ctx, name, now); err != nil {
		t.Fatal(err)
	}
	if raw, _, err := r.GetMeta(ctx, name); err != nil || !bytes.Contains(raw, []byte("3.0.0")) {
		t.Errorf("written back: %s, %v", raw, err)
	}
}
