package sharedstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// ErrLeaseLost is returned by Keep when the lease was taken over or
// removed by someone else.
var ErrLeaseLost = errors.New("lease lost")

// leaseDoc is a lease object's body. A lease expires TTL after the store
// last wrote it (its LastModified), by the store's clock (the Date of its
// answers): replicas' own clocks never decide. Expires, by the holder's
// clock, is for people reading the bucket, and for leases of a store that
// dates neither its objects nor its answers.
type leaseDoc struct {
	Holder  string    `json:"holder"`
	Expires time.Time `json:"expires"`
	// TTLMillis is the lease's time to live; 0 in leases written before
	// it was recorded: the reader's own TTL is taken then.
	TTLMillis int64 `json:"ttl_ms,omitempty"`
}

// expired reports whether the lease doc, last written by the store at
// modified (zero: not known), has expired at storeNow, the store's time
// (zero: not known). Without both store times, the holder's Expires is
// judged by this replica's clock.
func (s *Store) expired(doc *leaseDoc, modified, storeNow time.Time) bool {
	if modified.IsZero() || storeNow.IsZero() {
		return !s.cfg.Now().Before(doc.Expires)
	}
	ttl := time.Duration(doc.TTLMillis) * time.Millisecond
	if ttl <= 0 {
		ttl = s.cfg.LeaseTTL
	}
	return !storeNow.Before(modified.Add(ttl))
}

// Lease is a lease on one archive's origin download, held by this store's
// holder until it expires or is released.
type Lease struct {
	s   *Store
	sha string
	// local: the store does not honour conditional writes, so the lease
	// is not in the store; it coordinates nothing beyond this replica.
	local bool

	mu   sync.Mutex
	etag string // of the lease object as last written by us
}

// TryLease takes the lease on archive sha: it creates the lease object
// only if there is none (If-None-Match: *), or replaces one that has
// expired by the store's clock. It returns nil, nil when another holder
// has the lease. A store found to ignore conditional writes (see
// ProbeConditional) is not asked: every replica gets a local lease then,
// and downloads for itself.
func (s *Store) TryLease(ctx context.Context, sha string) (*Lease, error) {
	if err := checkSHA(sha); err != nil {
		return nil, err
	}
	if s.conditionalIgnored(ctx) {
		return &Lease{s: s, sha: sha, local: true}, nil
	}
	var l *Lease
	err := s.call(ctx, "lease", nil, func(ctx context.Context) (string, error) {
		for range 2 {
			etag, ok, err := s.putLease(ctx, sha, "")
			if err != nil {
				return "", err
			}
			if ok {
				l = &Lease{s: s, sha: sha, etag: etag}
				return "ok", nil
			}
			doc, etag, modified, storeNow, err := s.readLease(ctx, sha)
			if err != nil {
				return "", err
			}
			if etag == "" {
				continue // gone since: try again
			}
			if doc != nil && !s.expired(doc, modified, storeNow) {
				return "held", nil
			}
			// Expired (or unreadable): remove exactly what we read, so
			// that of several replicas taking over only one succeeds.
			_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{
				Bucket: &s.loc.Bucket, Key: aws.String(s.key("leases/" + sha)), IfMatch: aws.String(etag)})
			switch st := statusOf(err); {
			case st == http.StatusPreconditionFailed || st == http.StatusConflict:
				return "held", nil // someone else took it over first
			case err != nil && st != http.StatusNotFound:
				return "", err
			}
		}
		return "held", nil
	})
	return l, err
}

// putLease writes the lease object with a new expiry: a create when etag
// is "", else a replacement of the version etag. ok is false when the
// condition failed.
func (s *Store) putLease(ctx context.Context, sha, etag string) (newETag string, ok bool, err error) {
	doc, _ := json.Marshal(leaseDoc{Holder: s.cfg.Holder, Expires: s.cfg.Now().Add(s.cfg.LeaseTTL).UTC(),
		TTLMillis: s.cfg.LeaseTTL.Milliseconds()})
	in := &s3.PutObjectInput{
		Bucket: &s.loc.Bucket, Key: aws.String(s.key("leases/" + sha)),
		Body: bytes.NewReader(doc), ContentLength: aws.Int64(int64(len(doc))),
		ContentType: aws.String("application/json"),
	}
	if etag == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(etag)
	}
	out, err := s.client.PutObject(ctx, in)
	switch st := statusOf(err); {
	case st == http.StatusPreconditionFailed || st == http.StatusConflict || (etag != "" && st == http.StatusNotFound):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return aws.ToString(out.ETag), true, nil
}

// readLease reads the lease object: nil doc when it is not a lease we can
// read, "" etag when there is none; with when the store last wrote it and
// the store's time of the answer (zero when the store did not say).
func (s *Store) readLease(ctx context.Context, sha string) (doc *leaseDoc, etag string, modified, storeNow time.Time, err error) {
	o, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.loc.Bucket, Key: aws.String(s.key("leases/" + sha))})
	if statusOf(err) == http.StatusNotFound {
		return nil, "", time.Time{}, time.Time{}, nil
	}
	if err != nil {
		return nil, "", time.Time{}, time.Time{}, err
	}
	defer o.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(o.Body, 4096))
	if err != nil {
		return nil, "", time.Time{}, time.Time{}, err
	}
	etag = aws.ToString(o.ETag)
	modified = aws.ToTime(o.LastModified)
	storeNow, _ = awsmiddleware.GetServerTime(o.ResultMetadata)
	var d leaseDoc
	if json.Unmarshal(raw, &d) != nil {
		return nil, etag, modified, storeNow, nil
	}
	return &d, etag, modified, storeNow, nil
}

// Renew extends the lease by the lease TTL. It fails with ErrLeaseLost
// when the lease is no longer ours.
func (l *Lease) Renew(ctx context.Context) error {
	if l.local {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lost := false
	err := l.s.call(ctx, "lease", nil, func(ctx context.Context) (string, error) {
		etag, ok, err := l.s.putLease(ctx, l.sha, l.etag)
		if err != nil {
			return "", err
		}
		if !ok {
			lost = true
			return "lost", nil
		}
		l.etag = etag
		return "ok", nil
	})
	if err == nil && lost {
		return fmt.Errorf("%w: archive %s", ErrLeaseLost, l.sha)
	}
	return err
}

// Keep renews the lease every third of the lease TTL until ctx is done
// (it then returns nil) or the lease is lost. A renewal that fails for
// another reason is tried again at the next tick: the lease may still
// hold.
func (l *Lease) Keep(ctx context.Context) error {
	t := time.NewTicker(l.s.cfg.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := l.Renew(ctx); errors.Is(err, ErrLeaseLost) {
			return err
		}
	}
}

// Release deletes the lease if it is still ours.
func (l *Lease) Release(ctx context.Context) error {
	if l.local {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.call(ctx, "lease", nil, func(ctx context.Context) (string, error) {
		_, err := l.s.client.DeleteObject(ctx, &s3.DeleteObjectInput{
			Bucket: &l.s.loc.Bucket, Key: aws.String(l.s.key("leases/" + l.sha)), IfMatch: aws.String(l.etag)})
		if st := statusOf(err); st == http.StatusPreconditionFailed || st == http.StatusNotFound {
			return "lost", nil
		}
		return "ok", err
	})
}
