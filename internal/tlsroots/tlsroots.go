// Package tlsroots holds the CAs trusted for TLS while the operator may
// change them as the process serves (origin_ca_file's files read again),
// and tells each client that follows them.
//
// A client follows the CAs by building its connections' TLS
// configuration from each pool it is told of: Go's own verification
// decides, against the CAs in force when the connection is made.
package tlsroots

import (
	"crypto/x509"
	"sync"
)

// Roots are the CAs trusted for TLS in force: a pool that Set replaces
// as a whole, never changes in place. The zero value is not usable; New
// makes one. Its methods are safe for concurrent use.
type Roots struct {
	mu      sync.Mutex
	pool    *x509.CertPool
	follows []func(*x509.CertPool)
}

// New returns the Roots with pool in force (nil: the system roots).
func New(pool *x509.CertPool) *Roots {
	return &Roots{pool: pool}
}

// Follow has f called with each pool put in force from now on, in the
// order Set puts them, and returns the pool in force now. f is called
// with Set's lock held: it must put the pool in force and return, not
// call the Roots again.
func (r *Roots) Follow(f func(*x509.CertPool)) *x509.CertPool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.follows = append(r.follows, f)
	return r.pool
}

// Pool returns the pool in force (nil Roots: nil, the system roots). The
// caller must not change it.
func (r *Roots) Pool() *x509.CertPool {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pool
}

// Set puts pool in force, and tells each client that follows, before it
// returns. The caller must not change pool from then on.
func (r *Roots) Set(pool *x509.CertPool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pool = pool
	for _, f := range r.follows {
		f(pool)
	}
}
