package modsource

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
)

// refFilter is the transport of one repository's requests: of its ref
// advertisement it passes on to go-git only the refs that resolveRef may
// look at for ref (HEAD, the branch HEAD names, and ref as a tag, a
// branch or a full name, peeled or not). go-git keeps every ref it is
// advertised, parsed, in memory (about twice their bytes on the wire);
// a host advertising millions of refs would cost that much memory,
// however few of them the fetch needs. What it drops was counted all the
// same by the meter below it. When ref may be an abbreviated commit id,
// every branch and tag is passed too, up to maxHistoryRefs of them:
// findAbbreviated looks for it in their history.
type refFilter struct {
	next http.RoundTripper
	ref  string
	adv  *advFilter // the last advertisement's
}

// tooManyRefs reports whether the advertisement held more branches and
// tags than were passed on.
func (t *refFilter) tooManyRefs() bool {
	return t.adv != nil && t.adv.over
}

func (t *refFilter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || resp.StatusCode != http.StatusOK || !strings.HasSuffix(req.URL.Path, "/info/refs") {
		return resp, err
	}
	f := &advFilter{r: resp.Body, Closer: resp.Body}
	if t.ref != "" && !commitID.MatchString(t.ref) {
		f.wanted = []string{t.ref, "refs/tags/" + t.ref, "refs/heads/" + t.ref}
	}
	if abbreviated.MatchString(t.ref) {
		f.all = maxHistoryRefs
	}
	t.adv = f
	resp.Body = f
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return resp, nil
}

// advFilter reads a ref advertisement (pkt-lines) from r and hands out
// the lines that are not refs, the first ref (it carries the
// capabilities) and the refs wanted, in order. It holds one pkt-line at
// most.
type advFilter struct {
	r io.Reader
	io.Closer
	wanted []string // besides HEAD and its target
	head   [4]byte
	out    []byte // what is left of it to hand out
	refs   bool   // the first ref has been read
	target []byte // of HEAD, from the first ref's symref capability
	// all: up to this many branches and tags (counted, those above
	// included) are passed, each with its peeled line if it has one
	// (NAME^{}, the commit of an annotated tag), which is no other ref
	// and does not count; over when there were more. last is the name
	// of the last one passed, whose peeled line may come next.
	all, counted int
	over         bool
	last         []byte
	raw          bool // not pkt-lines: passed as is, for go-git to refuse
	err          error
	scratch      [65520]byte
}

func (f *advFilter) Read(p []byte) (int, error) {
	for len(f.out) == 0 {
		if f.raw {
			return f.r.Read(p)
		}
		if f.err != nil {
			return 0, f.err
		}
		f.next()
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	return n, nil
}

// next reads the next pkt-line and makes it what is to hand out, if it
// is passed on.
func (f *advFilter) next() {
	if _, err := io.ReadFull(f.r, f.head[:]); err != nil {
		f.err = err
		return
	}
	var l [2]byte
	if _, err := hex.Decode(l[:], f.head[:]); err != nil {
		f.out, f.raw = f.head[:], true
		return
	}
	n := int(l[0])<<8 | int(l[1])
	if n <= 4 || n > len(f.scratch) { // a flush or other special line, or too long
		f.out, f.raw = f.head[:], n > 4
		return
	}
	line := f.scratch[:n]
	copy(line, f.head[:])
	if _, err := io.ReadFull(f.r, line[4:]); err != nil {
		f.err = io.ErrUnexpectedEOF
		return
	}
	if f.pass(line[4:]) {
		f.out = line
	}
}

// isRefLine reports whether payload starts as a ref does: an object id
// (in either case, as go-git reads the first one) and a space.
func isRefLine(payload []byte) bool {
	if len(payload) < 41 || payload[40] != ' ' {
		return false
	}
	for _, c := range payload[:40] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// pass reports whether the pkt-line of payload is passed on.
func (f *advFilter) pass(payload []byte) bool {
	if !f.refs {
		if !isRefLine(payload) {
			// The lines before the refs, and whatever go-git is to
			// refuse.
			return true
		}
		f.refs = true
		if name, _, _ := bytes.Cut(bytes.TrimSuffix(payload[41:], []byte("\n")), []byte{0}); f.all > 0 && isBranchOrTag(name) {
			f.counted++ // a repository without HEAD's first branch
		}
		if i := bytes.IndexByte(payload, 0); i >= 0 {
			for _, c := range bytes.Fields(payload[i+1:]) {
				if t, ok := bytes.CutPrefix(c, []byte("symref=HEAD:")); ok {
					f.target = bytes.Clone(t)
				}
			}
		}
		return true
	}
	if bytes.HasPrefix(payload, []byte("shallow ")) {
		return false // unused
	}
	// go-git reads every other line after the first ref as a ref: two
	// words, the first taken for an object id whatever its spelling
	// (it does not check it). A line it cannot read so is passed, for it
	// to refuse.
	words := bytes.Split(bytes.TrimSuffix(payload, []byte("\n")), []byte(" "))
	if len(words) != 2 {
		return true
	}
	name, peeled := bytes.CutSuffix(words[1], []byte("^{}"))
	branchOrTag := isBranchOrTag(name)
	if f.all > 0 && branchOrTag && !peeled {
		// Every branch and tag counts, those passed below for their
		// name too.
		if f.counted++; f.counted > f.all {
			f.over = true
		}
	}
	if string(name) == "HEAD" || f.target != nil && bytes.Equal(name, f.target) {
		return true
	}
	for _, w := range f.wanted {
		if string(name) == w {
			return true
		}
	}
	if f.all > 0 && branchOrTag {
		if peeled {
			// What the annotated tag advertised just before points
			// to: part of that ref, not another one, passed (once)
			// if the tag was.
			ok := bytes.Equal(name, f.last)
			f.last = f.last[:0]
			return ok
		}
		if !f.over {
			f.last = append(f.last[:0], name...)
			return true
		}
	}
	return false
}

// isBranchOrTag reports whether name is a branch's or a tag's.
func isBranchOrTag(name []byte) bool {
	return bytes.HasPrefix(name, []byte("refs/heads/")) || bytes.HasPrefix(name, []byte("refs/tags/"))
}
