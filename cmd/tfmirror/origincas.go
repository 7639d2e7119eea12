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
// tfmirror reload or SIGHUP (recheck), and a new list of files given in
// the configuration file is put in force by the reload too (use). What
// they hold is put in force in
// the clients that follow them (tlsroots.Roots.Set: the origin client's
// and the shared store's) when it changed and
// each file holds certificates that parse; files refused (one missing,
// one others may write, one without a certificate) are logged and
// counted once, and the CAs in force stay.
type originCAs struct {
	base  *x509.CertPool // what the files add to; nil: the system roots
	log   *slog.Logger
	put   func(*x509.CertPool) // puts the CAs in force: the origin client's and the shared store's
	every time.Duration        // between two readings of follow

	mu       sync.Mutex // one reading at a time; guards the fields below
	names    []string   // the files; none: the base alone
	files    followed
	subjects []string // of the certificates the files hold in force
}

// startOriginCAs reads the files names (--origin-ca-file) and returns
// their CAs added to base (nil: the system roots), or base without files,
// and what follows the files from then on; count, when not nil, counts
// each reading put in force or refused. The caller sets put before the
// first reading.
func startOriginCAs(names []string, base *x509.CertPool, log *slog.Logger, count func(string)) (*originCAs, *x509.CertPool, error) {
	o := &originCAs{base: base, log: log, every: caCheckEvery,
		files: followed{log: log, count: count,
			refusedMsg:  "origin_ca_file's files changed and were refused; the CAs in force stay",
			restoredMsg: "origin_ca_file's files hold the CAs in force again"}}
	contents, pool, subjects, err := readCAs(names, base, log)
	if err != nil {
		return nil, nil, err
	}
	if len(names) > 0 {
		log.Info("origin TLS trusts the system roots and the CAs of origin_ca_file", "files", names, "cas", subjects)
	}
	o.names, o.subjects = names, subjects
	o.files.inForce, o.files.attrs = contents, []any{"files", names}
	return o, pool, nil
}

// readCAs reads the files names and returns their contents and their CAs
// added to base, with the CAs' subjects: base itself without files.
func readCAs(names []string, base *x509.CertPool, log *slog.Logger) (contents [][]byte, pool *x509.CertPool, subjects []string, err error) {
	if contents, err = readCAFiles(names); err != nil || len(names) == 0 {
		return contents, base, nil, err
	}
	pool, subjects, err = rootsWith(base, names, contents, log)
	return contents, pool, subjects, err
}

// use readies names, a new list of origin_ca_file's files (a reload of
// the configuration file), and returns what puts their CAs in force, in
// place of those of the files before; an error says why they are
// refused (one missing, one others may write, one without a
// certificate), and the files and CAs in force stay.
func (o *originCAs) use(names []string) (apply func(), err error) {
	contents, pool, subjects, err := readCAs(names, o.base, o.log)
	if err != nil {
		return nil, err
	}
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.names, o.subjects = names, subjects
		o.files.inForce, o.files.refused, o.files.refusedErr = contents, nil, nil
		o.files.attrs = []any{"files", names}
		o.put(pool)
		o.files.counted("applied")
		o.log.Info("put in force the CAs of origin_ca_file's files, a new list", "files", names, "cas", subjects)
	}, nil
}

// recheck reads the files again now: changed says new CAs were put in
// force; cas are the subjects of those in force; an error, that the files
// are refused, and the CAs in force stay.
func (o *originCAs) recheck() (changed bool, cas []string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.names) == 0 {
		return false, nil, nil
	}
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

// named says the configuration names files (a reload reads them).
func (o *originCAs) named() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.names) > 0
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
