package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/metrics"
)

// certCheckEvery is how often, at most, the handshakes look whether the
// operator's certificate files (--tls-cert, --tls-key) changed.
const certCheckEvery = time.Minute

// operatorCert follows the operator's certificate files while the mirror
// serves, so that a certificate renewed in their place (cert-manager
// writing its Secret, which the kubelet updates in the pod; certbot's
// deploy hook) is served without a restart: a handshake reads the files
// again once a minute at most (recheckIfDue), and tfmirror reload
// (SIGHUP) reads them at once (recheck). What they hold is put in force
// when it changed and is a certificate with its key that is valid now; a
// pair that is not (a key of another certificate, half of a copy, one
// expired) is logged and counted once, and the certificate in force
// stays.
type operatorCert struct {
	certFile, keyFile string
	served            *atomic.Pointer[tls.Certificate] // what the handshakes serve
	now               func() time.Time
	// checked is when the files were last read (Unix nanoseconds).
	checked atomic.Int64
	mu      sync.Mutex // one reading at a time; guards files
	files   followed   // the certificate's and the key's bytes
}

// startOperatorCert reads the operator's certificate files (cfg's
// --tls-cert and --tls-key), serves their certificate in served, and
// follows the files from then on, on the clock now; count, when not nil,
// counts each reading put in force or refused.
func startOperatorCert(cfg settings.Config, served *atomic.Pointer[tls.Certificate], now func() time.Time, log *slog.Logger, count func(string)) (*operatorCert, error) {
	cert, key, err := readOperatorPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, err
	}
	pair, err := parseKeyPair(cfg.TLSCert, cfg.TLSKey, cert, key)
	if err != nil {
		return nil, err
	}
	warnOutOfDate(log, cfg.TLSCert, pair.Leaf, now())
	oc := &operatorCert{certFile: cfg.TLSCert, keyFile: cfg.TLSKey, served: served, now: now,
		files: followed{log: log, count: count, inForce: [][]byte{cert, key},
			refusedMsg:  "the operator's certificate files changed and were refused; the certificate in force stays",
			restoredMsg: "the operator's certificate files hold the certificate in force again",
			attrs:       []any{"tls_cert", cfg.TLSCert, "tls_key", cfg.TLSKey}}}
	oc.checked.Store(now().UnixNano())
	served.Store(&pair)
	return oc, nil
}

// readOperatorPair reads the operator's certificate and key files, as
// every operator's file is read (internal/inputfile): never waiting on a
// FIFO, within bounds, and the key, a secret, refused when users other
// than its owner may write it (readOperatorKey).
func readOperatorPair(certFile, keyFile string) (cert, key []byte, err error) {
	return readPair(certFile, keyFile, readOperatorKey)
}

// readOperatorKey reads the operator's key file, a secret: refused when
// users other than its owner may write it.
func readOperatorKey(path string) ([]byte, error) {
	return inputfile.ReadTrusted(path, maxKeyFileBytes)
}

// readPair reads a certificate file and its key file, the key by readKey.
//
// The pair is read again, up to pairReadTries times in all, when the
// certificate file changed while the key was read: a mounted Secret
// updated by the kubelet (its ..data link swapped between the two reads)
// would otherwise give the new certificate with the old key, refused,
// logged and counted as a pair that does not work.
func readPair(certFile, keyFile string, readKey func(path string) ([]byte, error)) (cert, key []byte, err error) {
	for range pairReadTries {
		cert, err = inputfile.ReadOperator(certFile, maxCertFileBytes)
		if err != nil {
			return nil, nil, fmt.Errorf("loading TLS certificate: %w", err)
		}
		if afterCertRead != nil {
			afterCertRead()
		}
		key, err = readKey(keyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("loading TLS certificate's key: %w", err)
		}
		again, err := inputfile.ReadOperator(certFile, maxCertFileBytes)
		if err != nil || bytes.Equal(again, cert) {
			break
		}
	}
	return cert, key, nil
}

// pairReadTries bounds the readings of the operator's certificate files
// that change while they are read (readOperatorPair).
const pairReadTries = 3

// afterCertRead, when set by a test, runs between the reading of the
// operator's certificate file and that of its key.
var afterCertRead func()

// recheckIfDue reads the files again (recheck) when the last reading is
// certCheckEvery old, in the handshake that finds it so; the handshakes
// meanwhile get the certificate in force, and none waits for another's
// reading. On nil, it does nothing (the generated certificate, or none).
func (oc *operatorCert) recheckIfDue() {
	if oc == nil || !oc.due() || !oc.mu.TryLock() {
		return
	}
	defer oc.mu.Unlock()
	if !oc.due() {
		return // read since
	}
	_, _ = oc.recheckLocked()
}

// due says the last reading is certCheckEvery old, or later than now: a
// reading made while the clock was ahead (set back since) would
// otherwise keep the handshakes from reading the files until the clock
// came back to it.
func (oc *operatorCert) due() bool {
	since := oc.now().UnixNano() - oc.checked.Load()
	return since < 0 || since >= int64(certCheckEvery)
}

// recheck reads the files again now, for tfmirror reload: changed says a
// new certificate was put in force; an error, that they hold one that is
// refused, and the certificate in force stays.
func (oc *operatorCert) recheck() (changed bool, err error) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	return oc.recheckLocked()
}

// recheckLocked is recheck, under oc.mu (followed.read).
func (oc *operatorCert) recheckLocked() (changed bool, err error) {
	now := oc.now()
	oc.checked.Store(now.UnixNano())
	cert, key, err := readOperatorPair(oc.certFile, oc.keyFile)
	return oc.files.read([][]byte{cert, key}, err, func() error {
		pair, err := parseKeyPair(oc.certFile, oc.keyFile, cert, key)
		if err == nil {
			err = notValidAt(oc.certFile, pair, now)
		}
		if err != nil {
			return err
		}
		oc.served.Store(&pair)
		oc.files.log.Info("put in force the certificate read again from the operator's files",
			"tls_cert", oc.certFile, "expires", pair.Leaf.NotAfter)
		return nil
	})
}

// notValidAt refuses a certificate read again that is expired or not
// valid yet at now: the one in force would be replaced by one every
// client refuses.
func notValidAt(certFile string, pair tls.Certificate, now time.Time) error {
	switch leaf := pair.Leaf; {
	case now.After(leaf.NotAfter):
		return fmt.Errorf("the certificate in %s expired on %s", certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("the certificate in %s is not valid before %s (check this machine's clock)", certFile, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// servedCertExpiry is when the certificate in cert expires, for the
// metrics to read at scrape time; nil with --insecure-http, which serves
// none.
func servedCertExpiry(cfg settings.Config, cert *atomic.Pointer[tls.Certificate]) func() time.Time {
	if cfg.InsecureHTTP {
		return nil
	}
	return func() time.Time {
		if c := cert.Load(); c != nil && c.Leaf != nil {
			return c.Leaf.NotAfter
		}
		return time.Time{}
	}
}

// certOutcome is what became of the last certificate of the mirror's port
// read (the operator's files) or issued (the generated CA) while serving,
// for the status page, counted in the metrics.
type certOutcome struct {
	metrics *metrics.Metrics // nil: not counted
	refused atomic.Bool
}

// count records a certificate put in force ("applied") or refused
// ("refused"), one of metrics.ReloadOutcomes.
func (c *certOutcome) count(outcome string) {
	c.refused.Store(outcome == "refused")
	if c.metrics != nil {
		c.metrics.CertificateReload(outcome)
	}
}
