package tlsroots_test

import (
	"crypto/x509"
	"sync"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/tlsroots"
)

// TestFollowersToldOfEachPool: a client that follows is given the pool in
// force when it starts following and each pool put in force after, so
// that none is missed by one that starts following while another is put
// in force.
func TestFollowersToldOfEachPool(t *testing.T) {
	a, b, c := x509.NewCertPool(), x509.NewCertPool(), x509.NewCertPool()
	r := tlsroots.New(a)
	var first []*x509.CertPool
	if got := r.Follow(func(p *x509.CertPool) { first = append(first, p) }); got != a {
		t.Fatalf("Follow returned %p, want the pool in force %p", got, a)
	}
	r.Set(b)
	var second []*x509.CertPool
	if got := r.Follow(func(p *x509.CertPool) { second = append(second, p) }); got != b {
		t.Fatalf("Follow after Set returned %p, want %p", got, b)
	}
	r.Set(c)
	if len(first) != 2 || first[0] != b || first[1] != c || len(second) != 1 || second[0] != c {
		t.Errorf("followers told %v and %v, want [b c] and [c]", first, second)
	}
	if r.Pool() != c {
		t.Errorf("Pool is %p, want the last put in force %p", r.Pool(), c)
	}

	// Started while pools are put in force, a follower ends with the last.
	r = tlsroots.New(a)
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 100 {
			r.Set(x509.NewCertPool())
		}
		r.Set(c)
	})
	var mu sync.Mutex
	var last *x509.CertPool
	now := r.Follow(func(p *x509.CertPool) { mu.Lock(); last = p; mu.Unlock() })
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if last == nil {
		last = now // no pool was put in force after it started following
	}
	if last != c {
		t.Errorf("a follower started among changes holds %p, want the last put in force %p", last, c)
	}
}
