package main

import (
	"context"
	"crypto/x509"
	"log/slog"
	"sync"
	"time"
)

// caCheckEvery is how often the origin_ca_file files are read again while
// the mirror serves.
const caCheckEvery = time.Minute

// originCAs follows origin_ca_file's files while the mirror serves, so
// that the CA of a TLS-inspecting egress proxy renewed in their place (a
// ConfigMap or Secret the kubelet updates, a configuration management
// run) is trusted without a restart, and a CA removed from them is
// trusted no more: they are read again once a minute (follow) and at
// tfmirror reload or SIGHUP (recheck). What they hold is put in force in
// the clients that follow them (tlsroots.Roots.Set: the origin client's
// and the shared store's) when it changed and
// each file holds certificates that parse; files refused (one missing,
// one others may write, one without a certificate) are logged and
// counted once, and the CAs in force stay.
type originCAs struct {
	names []string
	base  *x509.CertPool // what the files add to; nil: the system roots
	log   *slog.Logger
	put   func(*x509.CertPool) // puts the CAs in force: the origin client's and the shared store's
	every time.Duration        // between two readings of follow

	mu       sync.Mutex // one reading at a time; guards the fields below
	files    followed
	subjects []string // of the certificates the files hold in force
}

// startOriginCAs reads the files names (--origin-ca-file) and returns
// their CAs added to base (nil: the system roots) and what follows the
// files from then on; count, when not nil, counts each reading put in
// force or refused. Without files it returns base and a nil *originCAs.
// The caller sets put before the first reading.
func startOriginCAs(names []string, base *x509.CertPool, log *slog.Logger, count func(string)) (*originCAs, *x509.CertPool, error) {
	if len(names) == 0 {
		return nil, base, nil
	}
	contents, err := readCAFiles(names)
	if err != nil {
		return nil, nil, err
	}
	pool, subjects, err := rootsWith(base, names, contents, log)
	if err != nil {
		return nil, nil, err
	}
	log.Info("origin TLS trusts the system roots and the CAs of origin_ca_file", "files", names, "cas", subjects)
	o := &originCAs{names: names, base: base, log: log, every: caCheckEvery, subjects: subjects,
		files: followed{log: log, count: count, inForce: contents,
			refusedMsg:  "origin_ca_file's files changed and were refused; the CAs in force stay",
			restoredMsg: "origin_ca_file's files hold the CAs in force again",
			attrs:       []any{"files", names}}}
	return o, pool, nil
}

// recheck reads the files again now: changed says new CAs were put in
// force; cas are the subjects of those in force; an error, that the files
// are refused, and the CAs in force stay.
func (o *originCAs) recheck() (changed bool, cas []string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	contents, err := readCAFiles(o.names)
	changed, err = o.files.read(contents, err, func() error {
		pool, subjects, err := rootsWith(o.base, o.names, contents, o.log)
		if err != nil {
			return err
		}
		o.put(pool)
		o.subjects = subjects
		o.log.Info("put in force the CAs read again from origin_ca_file's files", "files", o.names, "cas", subjects)
		return nil
	})
	return changed, o.subjects, err
}

// refused says the last reading of the files that changed was refused,
// for the status page.
func (o *originCAs) refused() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.files.refusedErr != nil
}

// follow reads the files again every o.every until ctx is done.
func (o *originCAs) follow(ctx context.Context) {
	tick := time.NewTicker(o.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			_, _, _ = o.recheck() // a refusal is logged and counted in recheck
		}
	}
}
