package modules

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/safetree"
	"github.com/tfmirror/tfmirror/v2/mirror/notfound"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// maxRefusals bounds the refusals remembered (refusals).
const maxRefusals = 4096

// refusals remembers, for a while, the module packages the mirror
// refused for what their source gave (over a limit, not a package it can
// read, unsafe, changed since first mirrored, refused by the source
// host) and the zips it could not make of a package (a link loop, over a
// limit): asked again within the period, the same refusal is the answer
// and nothing is downloaded or unpacked, so that a client retrying a
// refused version, or a loop over a module's refused versions, costs a
// download of up to --module-max-bytes (or an unpacking) per period, not
// per request. A failure that may pass on its own (a timeout, a network
// error, a 5xx, the disk's) is never remembered. Keys name what decides
// the refusal: the version's record and location, or the package's
// sha256, and the limits in force. Safe for concurrent use.
type refusals struct {
	mu  sync.Mutex
	lru *simplelru.LRU[string, refusal]
	now func() time.Time
	// period is the origins' not-found memory, whose period
	// (--not-found-ttl) a refusal is remembered for: none without it.
	period *notfound.Memory
}

type refusal struct {
	err error
	at  time.Time // when it was made
}

func newRefusals(now func() time.Time, period *notfound.Memory) *refusals {
	l, _ := simplelru.NewLRU[string, refusal](maxRefusals, nil) // a positive size: no error
	return &refusals{lru: l, now: now, period: period}
}

// get returns the refusal remembered under key, nil for none.
func (r *refusals) get(key string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.lru.Get(key)
	if !ok || r.period == nil {
		return nil
	}
	// The period in force now: a reload that shortens it (or turns it
	// off) applies to what is remembered already.
	if r.now().Sub(f.at) >= r.period.TTL() {
		r.lru.Remove(key)
		return nil
	}
	return f.err
}

// note remembers err under key for the period in force when it is a
// refusal of what a source gave (lasting: see refusals), and does
// nothing otherwise.
func (r *refusals) note(key string, err error) {
	if r.period == nil || r.period.TTL() <= 0 || !lasting(err) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lru.Add(key, refusal{err: err, at: r.now()})
}

// lasting says err refuses what a source gave, which asking again
// within a short while gives again.
func lasting(err error) bool {
	var (
		le *modsource.LimitError
		ve *verify.Error
	)
	return errors.As(err, &le) || errors.Is(err, modsource.ErrBadPackage) || errors.Is(err, modsource.ErrSource) ||
		errors.Is(err, modsource.ErrLinkLoop) || errors.Is(err, safetree.ErrUnsafe) || errors.Is(err, ErrChanged) ||
		errors.As(err, &ve) && ve.Reason == verify.ReasonBadArchive
}

// refusalKey is the key a refusal of what is made of a source is
// remembered under: what (the version's record and location, or a
// package's sha256) and the limits in force, which decide it as well.
func refusalKey(limits modsource.Limits, what ...string) string {
	return fmt.Sprintf("%s\x00%+v", strings.Join(what, "\x00"), limits)
}
