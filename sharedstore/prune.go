package sharedstore

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// maxListPages bounds one listing: 1000 keys a page, ten million keys.
const maxListPages = 10000

// list calls fn for every key (without prefix) and size under prefix,
// a page per call to the store.
func (s *Store) list(ctx context.Context, prefix string, fn func(key string, size int64, modified time.Time) error) error {
	full := s.key(prefix)
	var token *string
	for range maxListPages {
		var out *s3.ListObjectsV2Output
		err := s.call(ctx, "list", nil, func(ctx context.Context) (string, error) {
			var err error
			out, err = s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &s.loc.Bucket, Prefix: aws.String(full), ContinuationToken: token})
			return "ok", err
		})
		if err != nil {
			return err
		}
		for _, o := range out.Contents {
			if o.Key == nil {
				continue
			}
			if err := fn(strings.TrimPrefix(*o.Key, full), aws.ToInt64(o.Size), aws.ToTime(o.LastModified)); err != nil {
				return err
			}
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			return nil
		}
		token = out.NextContinuationToken
	}
	return nil
}

// ListMeta calls fn with the key and the record of every record whose
// key starts with prefix and that authenticates (as GetMeta reads it),
// reading each as it is listed, and returns how many it left out for not
// authenticating, or for the store refusing to serve it as it is stored
// (errUnreadable: taken for a failure of the store, it would end every
// pass there). Unlike GetMeta, it neither counts those
// (Observer.SharedStoreRejected) nor logs them: a pass over the bucket
// (retention's, every hour) finds them again at every pass, and nothing
// takes them from the origin and writes them back for it, so a bucket
// that keeps records of an earlier release or of a key since dropped (of
// versions nobody asks for again) would have them counted at every pass,
// and logged in place of the objects the replicas read to serve. The
// caller says how many.
func (s *Store) ListMeta(ctx context.Context, prefix string, fn func(key string, record json.RawMessage) error) (unauthenticated int, err error) {
	err = s.list(ctx, "meta/"+prefix, func(rest string, _ int64, _ time.Time) error {
		key := prefix + rest
		name := s.key("meta/" + key)
		raw, modified, release, err := s.getSmall(ctx, "get_meta", name)
		defer release() // released before fn too, which may read the store itself
		if notWritten(err) || errors.Is(err, errUnreadable) {
			unauthenticated++
			return nil
		}
		if err != nil || raw == nil {
			return err // the store failed, or it is gone since it was listed
		}
		record, _, why := s.cfg.Keys.openMeta(s.id, name, key, raw, modified, maxPutBack+s.cfg.CallTimeout)
		release()
		if why != nil {
			unauthenticated++
			return nil
		}
		return fn(key, record)
	})
	return unauthenticated, err
}

// ListArchives calls fn with the sha256, size and time of storing of
// every archive.
func (s *Store) ListArchives(ctx context.Context, fn func(sha string, size int64, stored time.Time) error) error {
	return s.list(ctx, "archives/", func(key string, size int64, modified time.Time) error {
		if checkSHA(key) != nil {
			return nil // not ours
		}
		return fn(key, size, modified)
	})
}

// DeleteArchive deletes the archive sha and its header (absent: nothing
// to do).
func (s *Store) DeleteArchive(ctx context.Context, sha string) error {
	if err := checkSHA(sha); err != nil {
		return err
	}
	for _, key := range []string{s.key("archives/" + sha), s.key("archive-auth/" + sha)} {
		err := s.call(ctx, "delete_archive", nil, func(ctx context.Context) (string, error) {
			_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.loc.Bucket, Key: aws.String(key)})
			if statusOf(err) == http.StatusNotFound {
				return "absent", nil
			}
			return "ok", err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
