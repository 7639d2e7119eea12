package sharedstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// ErrConditionalIgnored is returned, wrapped, by ProbeConditional and
// Health when the store does not honour the conditional writes that
// leases rely on: a create that fails when the object exists
// (If-None-Match: *) and a delete that fails when the object changed
// (If-Match). Leases are then kept by each replica for itself (TryLease).
var ErrConditionalIgnored = errors.New("shared store does not honour conditional writes; leases on origin downloads are not used: each replica downloads for itself")

// condState is what ProbeConditional found.
type condState struct {
	known   bool      // a probe got its answers
	ignored error     // known: nil, or why the store is not trusted with leases
	tried   time.Time // by Config.Now, the last probe
}

// ProbeConditional checks, with an object of its own under
// PREFIX/probes/, that the store refuses a second create of one object
// with If-None-Match: * and a delete with If-Match on an ETag the object
// does not have, as leases need. It returns nil when both are refused, an
// error wrapping ErrConditionalIgnored when either is done (or not
// understood), and another error when the store could not be asked (the
// probe is then retried by TryLease, at most once per breaker cooldown,
// and leases are used meanwhile). What it found is kept for TryLease and
// Health, and reported to the Observer. Concurrent calls wait for one
// probe.
func (s *Store) ProbeConditional(ctx context.Context) error {
	s.condMu.Lock()
	defer s.condMu.Unlock()
	return s.probeLocked(ctx)
}

func (s *Store) probeLocked(ctx context.Context) error {
	s.cond.tried = s.cfg.Now()
	var ignored error
	err := s.call(ctx, "probe", nil, func(ctx context.Context) (string, error) {
		var err error
		ignored, err = s.probeConditional(ctx)
		if err != nil {
			return "", err
		}
		if ignored != nil {
			return "ignored", nil
		}
		return "ok", nil
	})
	if err != nil {
		return err
	}
	first := !s.cond.known
	s.cond.known, s.cond.ignored = true, ignored
	if s.obs != nil {
		s.obs.SharedStoreConditional(ignored == nil)
	}
	if ignored != nil {
		if first {
			s.log.Warn("shared store ignores conditional writes: replicas will not coordinate origin downloads through it",
				"bucket", s.loc.Bucket, "error", ignored)
		}
		return ignored
	}
	return nil
}

// probeConditional makes the probe's calls. ignored says how the store
// failed the probe; err that it could not be asked.
func (s *Store) probeConditional(ctx context.Context) (ignored, err error) {
	var b [8]byte
	rand.Read(b[:])
	key := aws.String(s.key("probes/" + hex.EncodeToString(b[:])))
	put := func() error {
		body := []byte("tfmirror conditional write probe")
		out, err := s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &s.loc.Bucket, Key: key, Body: bytes.NewReader(body),
			ContentLength: aws.Int64(int64(len(body))), IfNoneMatch: aws.String("*")})
		if err == nil {
			s.versioned.note(s.log, s.loc.Bucket, out.VersionId)
		}
		return err
	}
	if err := put(); err != nil {
		return nil, fmt.Errorf("creating a probe object: %w", err)
	}
	defer func() {
		// Unconditionally: whatever the probe found, the object goes; in
		// a call's time of its own, past the caller's going away or the
		// probe's timeout, but no longer: the probe holds condMu, which
		// the next leases and Health wait for.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.CallTimeout)
		defer cancel()
		_, derr := s.client.DeleteObject(dctx, &s3.DeleteObjectInput{Bucket: &s.loc.Bucket, Key: key})
		if derr != nil && err == nil && statusOf(derr) != http.StatusNotFound {
			s.log.Warn("shared store probe object not removed", "key", *key, "error", derr)
		}
	}()
	// judge sorts the answer to a write the store should refuse: refused
	// (412 or 409), done or not understood (ignored, with how), or not
	// an answer (err).
	judge := func(what string, werr error) (ignored, err error) {
		switch st := statusOf(werr); {
		case st == http.StatusPreconditionFailed || st == http.StatusConflict:
			return nil, nil
		case werr == nil:
			return fmt.Errorf("%w: %s succeeded", ErrConditionalIgnored, what), nil
		case st == http.StatusNotImplemented || st == http.StatusBadRequest:
			return fmt.Errorf("%w: %s failed otherwise: %w", ErrConditionalIgnored, what, werr), nil
		default:
			return nil, fmt.Errorf("probing conditional writes: %w", werr)
		}
	}
	if ignored, err := judge("a create with If-None-Match: * of an existing object", put()); ignored != nil || err != nil {
		return ignored, err
	}
	_, derr := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.loc.Bucket, Key: key,
		IfMatch: aws.String(`"00000000000000000000000000000000"`)})
	if ignored, err := judge("a delete with If-Match of an ETag the object does not have", derr); ignored != nil || err != nil {
		return ignored, err
	}
	return nil, nil
}

// conditionalIgnored reports whether the store is known to ignore
// conditional writes. Not known yet, it probes, at most once per breaker
// cooldown; a probe that could not ask the store leaves leases in use.
func (s *Store) conditionalIgnored(ctx context.Context) bool {
	s.condMu.Lock()
	defer s.condMu.Unlock()
	if !s.cond.known && (s.cond.tried.IsZero() || !s.cfg.Now().Before(s.cond.tried.Add(s.cfg.BreakerCooldown))) {
		s.probeLocked(ctx)
	}
	return s.cond.known && s.cond.ignored != nil
}

// Health says whether the store is used as configured. setAside is nil
// while it is, else why not: its breaker is open (Status), or it ignores
// conditional writes, so that replicas do not coordinate their origin
// downloads through it. failing is nil unless, its breaker closed, its
// last call failed (a start-up Check's included): it says how many calls
// failed in a row and the last's kind of failure; the store is still
// asked, and is set aside at BreakerThreshold failures. Or unless its
// last write failed (writeOp), whatever its reads did since (a store
// that lets this replica read and not write keeps its breaker closed).
//
// Their texts are answered to anyone who reaches the mirror (/readyz, the
// status page's Health block, with or without a client token), so they
// name no bucket, prefix, endpoint or object (an object's key may name a
// provider): only what kind of failure it was. The log has the full error
// (the breaker's opening, the probe's finding).
func (s *Store) Health() (setAside, failing error) {
	if err := s.Status(); err != nil {
		s.mu.Lock()
		failures := s.failures
		s.mu.Unlock()
		return fmt.Errorf("%w: %d calls failed in a row, the last with %s (the log has its error)",
			ErrUnavailable, failures, failureKind(err)), nil
	}
	s.condMu.Lock()
	if s.cond.ignored != nil {
		setAside = fmt.Errorf("%w (the log says how)", ErrConditionalIgnored)
	}
	s.condMu.Unlock()
	s.mu.Lock()
	failures, last := s.failures, s.lastErr
	writes, lastWrite := s.writeFailures, s.lastWriteErr
	s.mu.Unlock()
	switch {
	case failures > 0 && last != nil:
		failing = fmt.Errorf("%s, the last with %s (the log has its error); still asked, it is set aside after %d failures in a row",
			lastFailed(failures, "call"), failureKind(last), s.cfg.BreakerThreshold)
	case writes > 0 && lastWrite != nil:
		failing = fmt.Errorf("%s, the last with %s (the log has its error), while its reads answer: what this replica fetches is not shared with the others",
			lastFailed(writes, "write"), failureKind(lastWrite))
	}
	return setAside, failing
}

// lastFailed says that the last n of what failed: "the last call failed",
// "the last 3 writes failed".
func lastFailed(n int, what string) string {
	if n == 1 {
		return "the last " + what + " failed"
	}
	return fmt.Sprintf("the last %d %ss failed", n, what)
}

// failureKind says what kind of failure err is, naming nothing of where
// the call went.
func failureKind(err error) string {
	var dns *net.DNSError
	var op *net.OpError
	var cert *tls.CertificateVerificationError
	var slow *slowError
	switch st := statusOf(err); {
	case errors.As(err, &slow):
		return "a slow answer"
	case st != 0:
		return fmt.Sprintf("HTTP status %d", st)
	case errors.Is(err, context.DeadlineExceeded):
		return "a timeout"
	case errors.As(err, &dns):
		return "a host name not resolved"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "a connection refused"
	case errors.As(err, &cert):
		return "a TLS certificate not trusted"
	case errors.As(err, &op) && op.Timeout():
		return "a timeout"
	case errors.As(err, &op):
		return "a network error"
	}
	return "an error"
}
