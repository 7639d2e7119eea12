package modsource

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
)

// The refs that the filter drops are none that resolveRef looks at: for
// every ref asked for, the filtered advertisement resolves as the whole
// one does, and keeps the capabilities.
func TestAdvFilterKeepsWhatResolveRefUses(t *testing.T) {
	id := func(i int) string { return fmt.Sprintf("%040x", i) }
	var b bytes.Buffer
	pktLine(&b, "# service=git-upload-pack\n")
	b.WriteString("0000")
	pktLine(&b, id(1)+" HEAD\x00multi_ack shallow no-progress symref=HEAD:refs/heads/main agent=git/2\n")
	pktLine(&b, id(1)+" refs/heads/main\n")
	pktLine(&b, id(2)+" refs/heads/v1\n")
	pktLine(&b, id(3)+" refs/tags/v1\n")
	pktLine(&b, id(4)+" refs/tags/v1^{}\n")
	pktLine(&b, id(5)+" refs/pull/7/head\n")
	for i := range 1000 {
		pktLine(&b, fmt.Sprintf("%s refs/tags/other%d\n", id(100+i), i))
	}
	pktLine(&b, "shallow "+id(9)+"\n")
	b.WriteString("0000")
	whole := b.Bytes()
	decode := func(r io.Reader) *packp.AdvRefs {
		ar := packp.NewAdvRefs()
		if err := ar.Decode(r); err != nil {
			t.Fatal(err)
		}
		return ar
	}
	all := decode(bytes.NewReader(whole))
	for _, ref := range []string{"", "v1", "main", "refs/pull/7/head", "other5", "nope", id(42)} {
		t.Run("ref "+ref, func(t *testing.T) {
			f := &advFilter{r: bytes.NewReader(whole), Closer: io.NopCloser(nil)}
			if ref != "" && !commitID.MatchString(ref) {
				f.wanted = []string{ref, "refs/tags/" + ref, "refs/heads/" + ref}
			}
			kept := decode(f)
			want, wantErr := resolveRef(all, ref)
			got, gotErr := resolveRef(kept, ref)
			if got != want || (gotErr == nil) != (wantErr == nil) {
				t.Errorf("filtered: %v, %v; whole: %v, %v", got, gotErr, want, wantErr)
			}
			if kept.Capabilities.String() != all.Capabilities.String() {
				t.Errorf("capabilities %q, want %q", kept.Capabilities.String(), all.Capabilities.String())
			}
			if n := len(kept.References) + len(kept.Peeled); n > 5 {
				t.Errorf("%d refs passed to go-git", n)
			}
		})
	}
}

// Whatever is not a well-formed advertisement reaches go-git as it came,
// for go-git to refuse.
func TestAdvFilterPassesWhatItCannotRead(t *testing.T) {
	for name, in := range map[string]string{
		"not pkt-lines":   "<html>hello</html>",
		"cut short":       "0032" + strings.Repeat("a", 10),
		"too long a line": "fff1abc",
	} {
		t.Run(name, func(t *testing.T) {
			got, err := io.ReadAll(&advFilter{r: strings.NewReader(in), Closer: io.NopCloser(nil)})
			if name == "cut short" {
				if len(got) != 0 || err != io.ErrUnexpectedEOF {
					t.Errorf("passed %q of a line cut short (%v), want nothing and io.ErrUnexpectedEOF", got, err)
				}
				return
			}
			if string(got) != in {
				t.Errorf("passed %q, want %q", got, in)
			}
		})
	}
}

// Every line go-git reads as a ref is a ref to the filter: go-git takes
// the first ref's object id in either case, and of the refs after it
// any line of two words, whatever the first (it does not check the id).
// Before, a host that spelt its ids otherwise than in lowercase hex had
// every ref of its advertisement passed to go-git, which keeps each one
// (a map entry for a pkt-line of a dozen bytes).
func TestAdvFilterDropsRefsSpeltOtherwise(t *testing.T) {
	id := func(i int) string { return fmt.Sprintf("%040x", i) }
	for name, spell := range map[string]func(i int) string{
		"uppercase ids": func(i int) string { return strings.ToUpper(id(i)) },
		"not ids":       func(i int) string { return "z" },
	} {
		for _, firstUpper := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, first ref in uppercase %v", name, firstUpper), func(t *testing.T) {
				first := id(1)
				if firstUpper {
					first = strings.ToUpper(first)
				}
				var b bytes.Buffer
				pktLine(&b, "# service=git-upload-pack\n")
				b.WriteString("0000")
				pktLine(&b, first+" HEAD\x00multi_ack shallow no-progress symref=HEAD:refs/heads/main agent=git/2\n")
				pktLine(&b, id(1)+" refs/heads/main\n")
				pktLine(&b, id(3)+" refs/tags/v1\n")
				for i := range 1000 {
					pktLine(&b, fmt.Sprintf("%s refs/tags/other%d\n", spell(100+i), i))
				}
				b.WriteString("0000")
				f := &advFilter{r: bytes.NewReader(b.Bytes()), Closer: io.NopCloser(nil), wanted: []string{"v1", "refs/tags/v1", "refs/heads/v1"}}
				kept := packp.NewAdvRefs()
				if err := kept.Decode(f); err != nil {
					t.Fatal(err)
				}
				if n := len(kept.References) + len(kept.Peeled); n > 5 {
					t.Errorf("%d refs passed to go-git", n)
				}
				if got, err := resolveRef(kept, "v1"); err != nil || got.String() != id(3) {
					t.Errorf("v1 resolved to %v, %v; want %s", got, err, id(3))
				}
			})
		}
	}
}

// Where an abbreviated id may be looked for, every branch and tag is
// passed up to the bound, each annotated tag with its peeled line
// (NAME^{}), which counts as no other ref; past the bound none is
// passed, nor its peeled line, and the filter says there were too many.
func TestAdvFilterCountsAnnotatedTagsOnce(t *testing.T) {
	id := func(i int) string { return fmt.Sprintf("%040x", i) }
	var b bytes.Buffer
	pktLine(&b, "# service=git-upload-pack\n")
	b.WriteString("0000")
	pktLine(&b, id(1)+" HEAD\x00multi_ack shallow no-progress symref=HEAD:refs/heads/main agent=git/2\n")
	pktLine(&b, id(1)+" refs/heads/main\n")
	pktLine(&b, id(2)+" refs/heads/dev\n")
	pktLine(&b, id(3)+" refs/pull/7/head\n")
	for i := range 3 {
		pktLine(&b, fmt.Sprintf("%s refs/tags/v%d\n", id(10+i), i))
		pktLine(&b, fmt.Sprintf("%s refs/tags/v%d^{}\n", id(20+i), i))
	}
	b.WriteString("0000")
	for _, tc := range []struct {
		all, refs, peeled int
		over              bool
	}{
		{all: 5, refs: 5, peeled: 3},             // main, dev, v0, v1, v2 (and HEAD)
		{all: 4, refs: 4, peeled: 2, over: true}, // v2 and its peeled line left out
	} {
		f := &advFilter{r: bytes.NewReader(b.Bytes()), Closer: io.NopCloser(nil), all: tc.all}
		kept := packp.NewAdvRefs()
		if err := kept.Decode(f); err != nil {
			t.Fatal(err)
		}
		if len(kept.References) != tc.refs || len(kept.Peeled) != tc.peeled || f.over != tc.over {
			t.Errorf("bound %d: passed %d refs and %d peeled, over %v; want %d, %d, %v", tc.all, len(kept.References), len(kept.Peeled), f.over, tc.refs, tc.peeled, tc.over)
		}
	}
}
