package sharedstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sync/semaphore"

	"github.com/tfmirror/tfmirror/v2/internal/hostport"
	"github.com/tfmirror/tfmirror/v2/internal/lowspeed"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
	"github.com/tfmirror/tfmirror/v2/internal/sha256hex"
	"github.com/tfmirror/tfmirror/v2/internal/tlsroots"
)

// ErrUnavailable is returned, wrapped, while the circuit breaker is open:
// the store failed too often and is not called until its cooldown ends.
var ErrUnavailable = errors.New("shared store unavailable")

// Observer receives what the store observes. Package metrics implements
// it; nil records nothing.
type Observer interface {
	// SharedStoreRequest records one call: op ("get_archive",
	// "get_archive_header", "put_archive", "put_archive_header",
	// "get_meta", "put_meta", "lease", "check", "probe", "list",
	// "delete_archive")
	// and outcome ("ok", "absent", "held", "ignored", "unreadable": the
	// store holds the object but refuses to serve it as it is stored,
	// "error", "unavailable").
	SharedStoreRequest(op, outcome string, d time.Duration)
	// SharedStoreDown records the breaker opening (true) or closing.
	SharedStoreDown(down bool)
	// SharedStoreConditional records what ProbeConditional found: whether
	// the store honours conditional writes.
	SharedStoreConditional(honoured bool)
	// SharedStoreRejected records an object read from the store that
	// failed authentication (see Keys), of kind (one of Kinds).
	SharedStoreRejected(kind string)
}

// Config configures a Store. Zero values take the documented defaults.
type Config struct {
	// URL is s3://BUCKET/PREFIX?endpoint=URL&region=REGION&path_style=true;
	// PREFIX, endpoint (default: AWS's), region (default: from the AWS
	// config, else us-east-1) and path_style (default false) are optional.
	// Required.
	URL string
	// Keys authenticate every object the store writes and reads (see
	// Keys). Required: the operator's, the same on every replica.
	Keys *Keys
	// StoreID names the store in the MAC of every object (see Keys): an
	// object written to a store of another ID is rejected, although the
	// same key signed it. Every replica sharing the store must use the
	// same. Default: DefaultStoreID of the URL's location, s3://BUCKET/PREFIX;
	// an operator who moves the store to another bucket or prefix keeps
	// its objects readable by keeping the old ID. See CheckStoreID.
	StoreID string
	// Holder names this replica in the leases it takes. Default: the host
	// name, the process id and a random suffix.
	Holder string
	// LeaseTTL is how long a lease lasts unless renewed; its holder renews
	// it every third of that. Default 30 seconds.
	LeaseTTL time.Duration
	// CallTimeout bounds every call but the transfer of an archive's body,
	// and the wait for each byte of that body.
	// Default 10 seconds.
	CallTimeout time.Duration
	// MinSpeed is the low-speed limit of an archive's body, in bytes per
	// second: a body that averages fewer over a CallTimeout (counted
	// from its first read, in the time its reads wait for the store, not
	// the reader's between them) fails as a store gone silent does. Default
	// 1 KiB; negative: no limit.
	MinSpeed int64
	// BreakerThreshold is how many failed calls in a row open the breaker.
	// Default 5.
	BreakerThreshold int
	// SlowCall is how long a call may take to be answered and still count
	// as one that succeeded: a call answered later counts toward the
	// breaker as a failed one does (its answer is used all the same), so
	// that a store answering every call just within CallTimeout, which
	// holds each request that reads through it for that long, is left
	// alone for BreakerCooldown as a failing one is. Default half of
	// CallTimeout; negative: no such bound.
	SlowCall time.Duration
	// BreakerCooldown is how long an open breaker refuses calls. Default
	// 30 seconds.
	BreakerCooldown time.Duration
	// HTTPClient makes the requests. Default: the SDK's.
	HTTPClient *http.Client
	// RootCAs are the CAs the endpoint's TLS certificate is checked
	// against when HTTPClient is nil: those in force at Open, and those
	// put in force later (tlsroots.Roots.Set) from the next connection
	// on. Default nil: the system roots. A CA bundle the SDK is given
	// (AWS_CA_BUNDLE, a profile's ca_bundle) is trusted beside the CAs in
	// force at Open, which then stay until the store is opened again.
	RootCAs *tlsroots.Roots
	// Logger receives the breaker's changes, the objects rejected, and at
	// Open the store's ID and keys' IDs. Default: discard.
	Logger *slog.Logger
	// Observer receives observations. Default: none.
	Observer Observer
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// MaxArchiveBytes is the largest archive PutArchive stores: S3's limit on
// one PUT (5 GiB).
const MaxArchiveBytes = 5 << 30

// Location is a parsed store URL.
type Location struct {
	Bucket    string
	Prefix    string // "" or ending in "/"
	Endpoint  string // "" = AWS
	Region    string // "" = from the AWS config
	PathStyle bool
}

// Name is the store's place within its endpoint, s3://BUCKET/PREFIX/
// (s3://BUCKET/ without a prefix): what the status page shows, and the
// default store ID.
func (l Location) Name() string { return "s3://" + l.Bucket + "/" + l.Prefix }

// ParseURL parses s3://BUCKET/PREFIX?endpoint=URL&region=REGION&path_style=true,
// whose endpoint is an http(s) URL without user info, query or fragment.
//
// Its errors name the URL without the credentials it may hold (which
// come from the standard AWS sources, never from it): they reach the
// log, config check's output and tfmirror reload's answer.
func ParseURL(raw string) (Location, error) {
	shown := redact.Location(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return Location{}, fmt.Errorf("shared store URL %q: not a URL", shown)
	}
	if u.Scheme != "s3" {
		return Location{}, fmt.Errorf("shared store URL %q: the scheme must be s3", shown)
	}
	if u.User != nil {
		return Location{}, fmt.Errorf("shared store URL %q: want s3://BUCKET/PREFIX, without credentials (they come from the standard AWS sources)", shown)
	}
	if u.Host == "" || strings.Contains(u.Host, ":") || u.Fragment != "" { // a bucket has no port
		return Location{}, fmt.Errorf("shared store URL %q: want s3://BUCKET/PREFIX", shown)
	}
	loc := Location{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}
	if loc.Prefix != "" {
		loc.Prefix += "/"
	}
	for k, vs := range u.Query() {
		if len(vs) != 1 {
			return Location{}, fmt.Errorf("shared store URL: %s given %d times", k, len(vs))
		}
		switch v := vs[0]; k {
		case "endpoint":
			e, err := url.Parse(v)
			if err != nil || (e.Scheme != "http" && e.Scheme != "https") || hostport.Check(e) != nil {
				return Location{}, fmt.Errorf("shared store URL: endpoint %q is not an http(s) URL", redact.Location(v))
			}
			if e.User != nil {
				return Location{}, fmt.Errorf("shared store URL: endpoint %q: want it without credentials (they come from the standard AWS sources)", redact.Location(v))
			}
			if strings.ContainsAny(v, "?#") {
				// The AWS SDK refuses it on every call, quoting it whole.
				return Location{}, fmt.Errorf("shared store URL: endpoint %q: want it without a query or fragment (the S3 client takes an endpoint's scheme, host, port and path only; credentials come from the standard AWS sources)", redact.Location(v))
			}
			loc.Endpoint = v
		case "region":
			loc.Region = v
		case "path_style":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Location{}, fmt.Errorf("shared store URL: path_style %q: %w", v, err)
			}
			loc.PathStyle = b
		default:
			return Location{}, fmt.Errorf("shared store URL: unknown parameter %q (endpoint, region, path_style)", k)
		}
	}
	return loc, nil
}

// ShownURL is raw, a shared store URL (as ParseURL takes), as it may be
// shown (the status page's configuration, config check, a reload's
// changes): its bucket and prefix, then of its parameters endpoint
// (without user info, query and fragment, as the status page's health
// shows it), region and path_style, in that order; any other parameter
// is left out, as what does not parse after the bucket and prefix.
func ShownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return redact.Location(raw)
	}
	q := u.Query()
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	shown := redact.Location(u.String())
	var params []string
	for _, k := range []string{"endpoint", "region", "path_style"} {
		for _, v := range q[k] {
			if k == "endpoint" {
				v = redact.Location(v)
			}
			params = append(params, k+"="+v)
		}
	}
	if len(params) > 0 {
		shown += "?" + strings.Join(params, "&")
	}
	return shown
}

// Store is the shared tier in one bucket. Its methods are safe for
// concurrent use.
type Store struct {
	cfg    Config
	loc    Location
	id     string // the store's ID, in every MAC (Config.StoreID)
	client *s3.Client
	log    *slog.Logger
	obs    Observer

	mu        sync.Mutex
	failures  int       // calls failed in a row
	openUntil time.Time // breaker open until then
	lastErr   error
	// writeFailures are the writes failed in a row (writeOp), whatever
	// the reads between them did, which reset failures; lastWriteErr
	// the last's error (Health).
	writeFailures int
	lastWriteErr  error

	// condMu is held during a probe of conditional writes (probe.go).
	condMu sync.Mutex
	cond   condState

	// rejected remembers objects that failed authentication (auth.go).
	rejected rejections

	// versioned says once that the bucket keeps older versions.
	versioned versioning

	// smallReads bounds the memory the records and headers being read
	// and opened at once take (getSmall): a bucket writer without the
	// key may fill the bucket with objects just under maxSmallBytes,
	// which a replica serving many requests at once read together.
	smallReads *semaphore.Weighted
}

// Open parses cfg.URL and makes a client with credentials from the
// standard AWS sources. It does not contact the store; see Check.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	loc, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.Keys == nil {
		return nil, errors.New("shared store: no key to authenticate its objects with (every replica needs the same one)")
	}
	if cfg.StoreID == "" {
		cfg.StoreID = DefaultStoreID(loc)
	}
	if err := CheckStoreID(cfg.StoreID); err != nil {
		return nil, fmt.Errorf("shared store: %w", err)
	}
	if cfg.Holder == "" {
		host, _ := os.Hostname()
		var b [4]byte
		rand.Read(b[:])
		cfg.Holder = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 30 * time.Second
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	if cfg.MinSpeed == 0 {
		cfg.MinSpeed = 1 << 10
	}
	if cfg.BreakerThreshold <= 0 {
		cfg.BreakerThreshold = 5
	}
	if cfg.SlowCall == 0 {
		cfg.SlowCall = cfg.CallTimeout / 2
	}
	if cfg.BreakerCooldown <= 0 {
		cfg.BreakerCooldown = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	pool := cfg.RootCAs.Pool()
	awsCfg, given, err := loadAWSConfig(ctx, loc, cfg, pool)
	if err != nil {
		return nil, err
	}
	if given != nil && awsCfg.HTTPClient == aws.HTTPClient(given) {
		// The SDK kept the client trusting pool (it makes one of its
		// own to add a CA bundle): the CAs put in force later are
		// followed, by the store's requests and by those of the
		// credential providers the configuration makes with its client
		// (STS for a web identity), so it is loaded again with a client
		// that follows them.
		c := &followingClient{}
		c.cur.Store(given)
		if awsCfg, err = loadAWSConfigWith(ctx, loc, c); err != nil {
			return nil, err
		}
		if now := cfg.RootCAs.Follow(c.trust); now != pool {
			c.trust(now)
		}
	} else if given != nil && pool != nil {
		// A CA bundle of the SDK's own, beside CAs of the operator's:
		// the operator, told by reload that new CAs are in force, would
		// not know the store keeps those of Open.
		cfg.Logger.Warn("the shared store's endpoint and its credentials' are trusted with the CA bundle of the AWS configuration (AWS_CA_BUNDLE, a profile's ca_bundle) and the CAs in force now, until a restart: CAs put in force later (origin_ca_file's files read again) are not followed for them, and a CA taken out of those files stays trusted for them")
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if loc.Endpoint != "" {
			o.BaseEndpoint = aws.String(loc.Endpoint)
		}
		o.UsePathStyle = loc.PathStyle
		// Checksums only where the API requires them (and the sha256
		// this package sends itself): S3-compatible servers differ in
		// which of the SDK's default ones they accept.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		// Retries are the breaker's business, and a call's timeout
		// must bound the call.
		o.RetryMaxAttempts = 1
	})
	cfg.Logger.Info("shared store objects authenticated", "store_id", cfg.StoreID,
		"key_id", cfg.Keys.ID(), "previous_key_id", cfg.Keys.PreviousID())
	return &Store{cfg: cfg, loc: loc, id: cfg.StoreID, client: client, log: cfg.Logger, obs: cfg.Observer, smallReads: semaphore.NewWeighted(smallReadBudget),
		rejected: rejections{store: cfg.StoreID, log: cfg.Logger, obs: cfg.Observer}}, nil
}

// CheckAWSConfig loads the AWS configuration Open would load for cfg
// (cfg.URL's region, cfg.HTTPClient or cfg.RootCAs, and the standard AWS
// sources of this process's environment: AWS_CONFIG_FILE and
// AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE, AWS_CA_BUNDLE, ...), and
// returns the error Open would fail with, or nil: a configuration
// checked before a restart is refused where the restart's Open would
// refuse it. Like Open, it contacts neither the store nor any other
// host; credentials are not fetched until a call needs them.
func CheckAWSConfig(ctx context.Context, cfg Config) error {
	loc, err := ParseURL(cfg.URL)
	if err != nil {
		return err
	}
	pool := cfg.RootCAs.Pool()
	_, _, err = loadAWSConfig(ctx, loc, cfg, pool)
	return err
}

// loadAWSConfig is the AWS configuration of the store at loc, with
// cfg's HTTP client, or the SDK's trusting pool when cfg.RootCAs is set
// (given: the client handed to the SDK, which keeps it unless it adds a
// CA bundle of its own), from the standard AWS sources.
func loadAWSConfig(ctx context.Context, loc Location, cfg Config, pool *x509.CertPool) (awsCfg aws.Config, given *awshttp.BuildableClient, err error) {
	var client aws.HTTPClient
	switch {
	case cfg.HTTPClient != nil:
		client = cfg.HTTPClient
	case cfg.RootCAs != nil:
		given = clientTrusting(pool)
		client = given
	}
	awsCfg, err = loadAWSConfigWith(ctx, loc, client)
	return awsCfg, given, err
}

// loadAWSConfigWith is the AWS configuration of the store at loc, with
// client (nil: the SDK's), from the standard AWS sources. A file of them
// that is no regular file is refused first (checkAWSFiles): the SDK reads
// them with plain reads, which never end on a FIFO.
func loadAWSConfigWith(ctx context.Context, loc Location, client aws.HTTPClient) (aws.Config, error) {
	if err := checkAWSFiles(ctx); err != nil {
		return aws.Config{}, err
	}
	opts := []func(*config.LoadOptions) error{}
	if loc.Region != "" {
		opts = append(opts, config.WithRegion(loc.Region))
	}
	if client != nil {
		opts = append(opts, config.WithHTTPClient(client))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("shared store: AWS config: %w", err)
	}
	return awsCfg, nil
}

// Location returns where the store is.
func (s *Store) Location() Location { return s.loc }

// Holder returns the name this store's leases are taken under.
func (s *Store) Holder() string { return s.cfg.Holder }

// Status returns nil while the store is used, and why not while the
// breaker is open.
func (s *Store) Status() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Now().Before(s.openUntil) {
		return fmt.Errorf("%w: %w", ErrUnavailable, s.lastErr)
	}
	return nil
}

// Check asks the store whether the bucket can be reached, counting the
// answer like any call.
func (s *Store) Check(ctx context.Context) error {
	return s.call(ctx, "check", nil, func(ctx context.Context) (string, error) {
		_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.loc.Bucket})
		return "ok", err
	})
}

// call runs fn with the call timeout, through the breaker. fn returns its
// outcome for the metrics; errors that are answers (absent, held) must be
// returned by fn as a nil error with that outcome. fn adds to *waited (when waited is not nil) the time it waited on this
// replica (for its budget of reads at once), which is not the store's:
// the call is slow (SlowCall) by the rest.
func (s *Store) call(ctx context.Context, op string, waited *time.Duration, fn func(ctx context.Context) (string, error)) error {
	start := s.cfg.Now()
	if err := s.Status(); err != nil {
		s.observe(op, "unavailable", 0)
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	outcome, err := fn(cctx)
	if err != nil && ctx.Err() != nil {
		// The caller went away: no fault of the store's.
		return err
	}
	if err != nil {
		outcome = "error"
	}
	took := s.cfg.Now().Sub(start)
	s.observe(op, outcome, took)
	if waited != nil {
		took -= *waited
	}
	if err == nil && s.cfg.SlowCall > 0 && took > s.cfg.SlowCall {
		// Answered, and the answer is used; the breaker counts it.
		s.record(op, &slowError{fmt.Sprintf("%s answered in %s, slower than %s", op, took.Round(time.Millisecond), s.cfg.SlowCall)})
		return nil
	}
	s.record(op, err)
	if err != nil {
		return fmt.Errorf("shared store %s: %w", op, err)
	}
	return nil
}

func (s *Store) observe(op, outcome string, d time.Duration) {
	if s.obs != nil {
		s.obs.SharedStoreRequest(op, outcome, d)
	}
}

// slowError is a call answered slower than Config.SlowCall, which the
// breaker counts as it counts a failure (Health names it apart).
type slowError struct{ msg string }

func (e *slowError) Error() string { return e.msg }

// record counts the result of a call op for the breaker, and among the
// writes when op is one (writeOp): a store that refuses writes and
// answers reads is failing (Health), though its reads keep the breaker
// closed. A write answered slowly (slowError) was taken.
func (s *Store) record(op string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if writeOp(op) {
		if slow := (*slowError)(nil); err == nil || errors.As(err, &slow) {
			s.writeFailures, s.lastWriteErr = 0, nil
		} else {
			s.writeFailures++
			s.lastWriteErr = err
		}
	}
	if err == nil {
		if s.failures >= s.cfg.BreakerThreshold {
			s.log.Info("shared store is answering again; using it")
			if s.obs != nil {
				s.obs.SharedStoreDown(false)
			}
		}
		s.failures, s.openUntil, s.lastErr = 0, time.Time{}, nil
		return
	}
	s.failures++
	s.lastErr = err
	if s.failures >= s.cfg.BreakerThreshold {
		if s.failures == s.cfg.BreakerThreshold {
			s.log.Warn("shared store keeps failing; going on without it for a while",
				"failures", s.failures, "cooldown", s.cfg.BreakerCooldown, "error", err)
			if s.obs != nil {
				s.obs.SharedStoreDown(true)
			}
		}
		s.openUntil = s.cfg.Now().Add(s.cfg.BreakerCooldown)
	}
}

// writeOp says whether the call op writes to the store: what a replica
// shares with the others (the puts), its leases and its probe of
// conditional writes, as TfmirrorSharedStoreWritesFailing counts them.
func writeOp(op string) bool {
	return strings.HasPrefix(op, "put_") || op == "lease" || op == "probe"
}

// key is the bucket's key of the object name (below the prefix):
// "archives/SHA256", "archive-auth/SHA256", "leases/ID" (a sha256:
// mirror/sharedtier.LeaseID), "meta/KEY",
// "probes/RANDOM".
func (s *Store) key(name string) string { return s.loc.Prefix + name }

func checkSHA(sha string) error {
	if !sha256hex.Valid(sha) {
		return fmt.Errorf("shared store: %q is not a hex sha256", sha)
	}
	return nil
}

// statusOf returns the HTTP status of an S3 error, or 0.
func statusOf(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// errUnreadable is an object that the store holds but refuses to serve
// as it is stored: in an archived storage class (S3 Glacier Flexible
// Retrieval or Deep Archive, an Intelligent-Tiering archive tier, which a
// lifecycle rule of the bucket may move objects to: InvalidObjectState),
// or encrypted with a key of the customer's (SSE-C), which no GET without
// that key reads (InvalidRequest). No replica writes such an object. It
// is an answer of the store about that object, not a failure of the store
// (the circuit breaker does not count it): the caller takes it as absent,
// and the next write replaces it, an archive's too.
var errUnreadable = errors.New("the store holds it but refuses to serve it as it is stored (an archived storage class, or encrypted with a customer-provided key)")

// unreadable returns an errUnreadable when err, a GET's, is the store
// refusing the object as it is stored; nil otherwise.
func unreadable(err error) error {
	var api interface{ ErrorCode() string }
	if err == nil || !errors.As(err, &api) {
		return nil
	}
	switch code := api.ErrorCode(); {
	case code == "InvalidObjectState",
		code == "InvalidRequest" && statusOf(err) == http.StatusBadRequest: // a GET of an SSE-C object without its key
		return fmt.Errorf("%w: %s", errUnreadable, code)
	}
	return nil
}

// openObject opens the object under the full key; it returns a nil body
// when the store does not have it, and an errUnreadable when it refuses
// to serve it as it is stored. The call timeout bounds the wait for the
// answer, and each read of the body (a read that gets no byte for that
// long fails, counted toward the breaker: a store gone silent midway),
// ctx the reading of the whole body. The caller must close the body.
func (s *Store) openObject(ctx context.Context, op, key string) (io.ReadCloser, int64, error) {
	var out *s3.GetObjectOutput
	var refused error
	bodyCtx, cancelBody := context.WithCancelCause(ctx)
	err := s.call(ctx, op, nil, func(cctx context.Context) (string, error) {
		// The body must outlive cctx: the request runs on bodyCtx, which
		// the call's timeout cancels only until the answer has come.
		stop := context.AfterFunc(cctx, func() { cancelBody(nil) })
		o, err := s.client.GetObject(bodyCtx, &s3.GetObjectInput{Bucket: &s.loc.Bucket, Key: aws.String(key)})
		if !stop() && err == nil {
			o.Body.Close()
			return "", cctx.Err()
		}
		if statusOf(err) == http.StatusNotFound {
			return "absent", nil
		}
		if refused = unreadable(err); refused != nil {
			return "unreadable", nil
		}
		out = o
		return "ok", err
	})
	if err == nil && refused != nil {
		err = refused
	}
	if err != nil || out == nil {
		cancelBody(nil)
		return nil, 0, err
	}
	size := int64(-1)
	if out.ContentLength != nil {
		size = *out.ContentLength
	}
	stalled := &stallError{op: op, why: fmt.Sprintf("no data received for %s (the call timeout)", s.cfg.CallTimeout)}
	timer := time.AfterFunc(s.cfg.CallTimeout, func() { cancelBody(stalled) })
	timer.Stop()
	return &body{ReadCloser: out.Body, s: s, op: op, ctx: bodyCtx, cancel: cancelBody, timer: timer}, size, nil
}

// stallError is a body of the store's that got no byte for the call
// timeout, or too few for the low-speed limit: a failure of the store's
// (not of the object's bytes), which the reader may mend from elsewhere.
type stallError struct {
	op  string
	why string
}

func (e *stallError) Error() string {
	return fmt.Sprintf("shared store %s: %s", e.op, e.why)
}

// body is an object's body whose every read gets a byte within the call
// timeout, and which gets Config.MinSpeed bytes a second over each call
// timeout spent in its reads, or fails with a *stallError. Read calls
// must not overlap each other.
type body struct {
	io.ReadCloser
	s      *Store
	op     string
	ctx    context.Context // the request's
	cancel context.CancelCauseFunc
	timer  *time.Timer
	speed  atomic.Pointer[lowspeed.Check] // from the first read; nil without a limit (Close may run beside a read)
	read   bool                           // the first read was made
	err    error
}

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if !b.read {
		b.read = true
		b.speed.Store(b.startSpeed())
	}
	// The limit counts only the time spent waiting for the store's
	// bytes, not the reader's between reads (a slow local disk).
	b.speed.Load().Resume()
	b.timer.Reset(b.s.cfg.CallTimeout)
	n, err := b.ReadCloser.Read(p)
	b.timer.Stop()
	b.speed.Load().Pause()
	b.speed.Load().Add(n)
	if err != nil {
		b.speed.Load().Stop() // the body is over either way
	}
	var stalled *stallError
	if err != nil && errors.As(context.Cause(b.ctx), &stalled) {
		// net/http may end a body cleanly when its request is canceled
		// mid-read: after a stall, EOF is not the end.
		b.err = stalled
		b.s.record(b.op, stalled)
		return n, b.err
	}
	return n, err
}

// startSpeed starts the body's low-speed limit, over a call timeout.
func (b *body) startSpeed() *lowspeed.Check {
	limit, window := b.s.cfg.MinSpeed, b.s.cfg.CallTimeout
	slow := &stallError{op: b.op, why: fmt.Sprintf("fewer than %d bytes received in %s (low-speed limit %d bytes/s)",
		lowspeed.MinBytes(limit, window), window, limit)}
	return lowspeed.Start(limit, window, func() { b.cancel(slow) })
}

func (b *body) Close() error {
	b.timer.Stop()
	b.speed.Load().Stop()
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// putArchive stores the archive sha of size bytes read from r, unless the
// store has it already (unless replace: then over what it has). The store
// checks the bytes against sha and keeps nothing unless they match; ctx
// (not the call timeout) bounds the upload.
func (s *Store) putArchive(ctx context.Context, sha string, r io.ReadSeeker, size int64, replace bool) error {
	if err := checkSHA(sha); err != nil {
		return err
	}
	if size > MaxArchiveBytes {
		return fmt.Errorf("shared store: archive %s is %d bytes, more than one PUT takes", sha, size)
	}
	sum, _ := hex.DecodeString(sha)
	start := s.cfg.Now()
	if err := s.Status(); err != nil {
		s.observe("put_archive", "unavailable", 0)
		return err
	}
	in := &s3.PutObjectInput{
		Bucket:         &s.loc.Bucket,
		Key:            aws.String(s.key("archives/" + sha)),
		Body:           r,
		ContentLength:  aws.Int64(size),
		ContentType:    aws.String("application/zip"),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum)),
	}
	if !replace {
		in.IfNoneMatch = aws.String("*")
	}
	_, err := s.client.PutObject(ctx, in)
	outcome := "ok"
	if statusOf(err) == http.StatusPreconditionFailed || statusOf(err) == http.StatusConflict {
		outcome, err = "exists", nil // another replica stored it first
		if otherBytes(ctx, s.client, in, size) {
			// Or a writer of the bucket put other bytes there (a
			// package whose record was rejected is not read, so not
			// found bad): the verified bytes replace them.
			if _, err = r.Seek(0, io.SeekStart); err == nil {
				in.IfNoneMatch = nil
				_, err = s.client.PutObject(ctx, in)
				outcome = "replaced"
			}
		}
	}
	if err != nil && ctx.Err() != nil {
		return err
	}
	if err != nil {
		outcome = "error"
	}
	s.observe("put_archive", outcome, s.cfg.Now().Sub(start))
	s.record("put_archive", err)
	if err != nil {
		return fmt.Errorf("shared store put_archive: %w", err)
	}
	return nil
}

// otherBytes reports whether the object that put would have written is
// known not to be its archive of size bytes: its length, or the SHA-256
// checksum the store keeps of it, differs from put's. One the store
// cannot say that of (no checksum kept, or the HEAD failed) is taken for
// the archive; a read checks its bytes (checkedBody).
func otherBytes(ctx context.Context, client *s3.Client, put *s3.PutObjectInput, size int64) bool {
	o, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: put.Bucket, Key: put.Key, ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		return false
	}
	if o.ContentLength != nil && *o.ContentLength != size {
		return true
	}
	return o.ChecksumSHA256 != nil && *o.ChecksumSHA256 != aws.ToString(put.ChecksumSHA256)
}

// maxSmallBytes bounds a record or an archive's header read from the
// store.
const maxSmallBytes = 16 << 20

// smallReadBudget bounds the bytes of the records and headers a store
// reads and opens at once, each charged smallReadCost of its length
// (its bytes, then their decoded copies); a read waits for its room, so
// that what a replica holds of them stays near this however many
// requests read at once. Room for three objects of maxSmallBytes; a
// record a replica writes is a few kilobytes.
const smallReadBudget = 3 * smallReadCost * maxSmallBytes

// smallReadCost is how many times its length reading and opening an
// object takes at most: the bytes read, the document decoded from them,
// and the record it holds.
const smallReadCost = 3

// errTooLarge is an object larger than maxSmallBytes where a record or an
// archive's header belongs: no replica writes one, so whoever wrote it
// did so without the key, and it is rejected as any object that fails.
var errTooLarge = errors.New("larger than any record or header a replica writes")

// errMultipart is an object assembled by a multipart upload where a
// record or an archive's header belongs, rejected as errTooLarge: a
// replica writes them with one PUT (putSmall). AWS S3 dates such an
// object (its Last-Modified) at the upload's initiation, not at its
// completion: whoever initiated an upload to a record's name before the
// record was written, and kept the record as a part of it, could complete
// it months later and have the record read as one just written, past the
// put-back check (maxPutBack).
var errMultipart = errors.New("assembled by a multipart upload (which a replica never writes), dated by the store at the upload's initiation")

// notWritten reports whether err, of getSmall, is an object that no
// replica writes (errTooLarge, errMultipart), which the caller rejects.
func notWritten(err error) bool { return errors.Is(err, errTooLarge) || errors.Is(err, errMultipart) }

// multipartETag reports whether etag is that of an object assembled by a
// multipart upload: S3's (and the compatible stores') hex digest of its
// parts' digests, a dash and the number of parts.
func multipartETag(etag string) bool {
	sum, parts, ok := strings.Cut(strings.Trim(etag, `"`), "-")
	if !ok || len(sum) != 32 || parts == "" || strings.Trim(parts, "0123456789") != "" {
		return false
	}
	_, err := hex.DecodeString(sum)
	return err == nil
}

// getSmall returns the object under the full key, at most maxSmallBytes,
// and when the store last wrote it (its Last-Modified; zero when it did
// not say); nil when the store has none. An object that no replica
// writes (larger than that, or assembled by a multipart upload) returns an
// error for which notWritten is true, which the caller rejects, and one
// the store refuses to serve as it is stored an errUnreadable, which it
// takes as absent: the store answered, so the call counts as one that
// did (for the metrics and the breaker), and the body is read no further
// than the bound.
//
// The bytes read are charged to the store's budget of reads at once
// (smallReadBudget) until the caller calls release, once it is done with
// them and what it decoded from them; release is never nil. A read whose
// room in the budget did not come within the call's time fails with
// errBusy: the store answered, and the wait was this replica's, so the
// call counts as one answered (outcome "busy"), in its time (SlowCall)
// without the wait.
func (s *Store) getSmall(ctx context.Context, op, key string) (_ []byte, _ time.Time, release func(), _ error) {
	var raw []byte
	var modified time.Time
	var refused, busy error
	var charged int64
	var waited time.Duration
	release = func() {
		if charged > 0 {
			s.smallReads.Release(charged)
			charged = 0
		}
	}
	err := s.call(ctx, op, &waited, func(ctx context.Context) (string, error) {
		o, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.loc.Bucket, Key: aws.String(key)})
		if statusOf(err) == http.StatusNotFound {
			return "absent", nil
		}
		if refused = unreadable(err); refused != nil {
			return "unreadable", nil
		}
		if err != nil {
			return "", err
		}
		defer o.Body.Close()
		if multipartETag(aws.ToString(o.ETag)) {
			refused = errMultipart
			return "ok", nil
		}
		n := aws.ToInt64(o.ContentLength)
		if n > maxSmallBytes {
			refused = fmt.Errorf("%w: %d bytes, more than %d", errTooLarge, n, maxSmallBytes)
			return "ok", nil
		}
		if n <= 0 || o.ContentLength == nil {
			n = maxSmallBytes // not stated: as much as it may be
		}
		release() // a retry's charge is made anew
		waitFrom := s.cfg.Now()
		err = s.smallReads.Acquire(ctx, smallReadCost*n)
		waited += s.cfg.Now().Sub(waitFrom)
		if err != nil {
			busy = fmt.Errorf("%w: %w", errBusy, err)
			return "busy", nil
		}
		charged = smallReadCost * n
		b, err := io.ReadAll(io.LimitReader(o.Body, n+1))
		if err != nil {
			return "", err
		}
		if int64(len(b)) > n {
			refused = fmt.Errorf("%w: more than %d bytes", errTooLarge, n)
			return "ok", nil
		}
		raw, modified = b, aws.ToTime(o.LastModified)
		return "ok", nil
	})
	if err != nil || refused != nil || raw == nil {
		release()
	}
	if err == nil && busy != nil {
		return nil, time.Time{}, release, fmt.Errorf("shared store %s: %w", op, busy)
	}
	if err == nil && refused != nil {
		return nil, time.Time{}, release, refused
	}
	return raw, modified, release, err
}

// errBusy is a read that waited for room in the budget of reads at once
// (getSmall) longer than the call's time: a failure of that read alone,
// not of the store.
var errBusy = errors.New("waited too long for room among the records and headers being read at once")

// putSmall stores doc under the full key, replacing any object there.
func (s *Store) putSmall(ctx context.Context, op, key string, doc []byte) error {
	return s.call(ctx, op, nil, func(ctx context.Context) (string, error) {
		for attempt := 1; ; attempt++ {
			out, err := s.client.PutObject(ctx, &s3.PutObjectInput{
				Bucket: &s.loc.Bucket, Key: aws.String(key),
				Body: bytes.NewReader(doc), ContentLength: aws.Int64(int64(len(doc))),
				ContentType: aws.String("application/json"),
			})
			if err == nil {
				s.versioned.note(s.log, s.loc.Bucket, out.VersionId)
				return "ok", nil
			}
			// 409 to a plain write: an operation on the object under way
			// (S3's OperationAborted, "try again"; on an S3 server over
			// a file system, a removal of the key's directory racing
			// the write). Not the store failing: the write is tried
			// again, shortly, within the call's time.
			if statusOf(err) != http.StatusConflict || attempt == conflictAttempts {
				return "ok", err
			}
			t := time.NewTimer(time.Duration(attempt) * conflictRetryDelay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return "ok", err
			}
		}
	})
}

// A plain write answered 409 is tried conflictAttempts times in all,
// waiting conflictRetryDelay more before each try than the last.
const (
	conflictAttempts   = 3
	conflictRetryDelay = 50 * time.Millisecond
)

// versioning takes the versions writes answered with: one of their own
// (not none, nor "null", a bucket's answer while versioning was never on
// or is suspended) says that the bucket keeps the older versions of its
// objects, which whoever may delete versions can make current again,
// older than the put-back check can tell (maxPutBack). It is logged once,
// with what to do: nothing read from the bucket tells such a record from
// the one written last.
type versioning struct{ seen atomic.Bool }

func (v *versioning) note(log *slog.Logger, bucket string, id *string) {
	if vid := aws.ToString(id); vid == "" || vid == "null" || v.seen.Swap(true) {
		return
	}
	log.Warn("the shared bucket keeps the older versions of its objects: whoever may delete object versions can make a replica read records of months ago; turn versioning off on a new bucket, or deny s3:DeleteObjectVersion and s3:PutBucketVersioning in the bucket's policy (docs/scaling-out.md, \"Bucket versioning\")",
		"bucket", bucket)
}
