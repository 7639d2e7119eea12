package modsource

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// pktLine writes s as one pkt-line: its length with the 4 bytes of the
// length itself, in 4 hex digits, then s.
func pktLine(w io.Writer, s string) { fmt.Fprintf(w, "%04x%s", len(s)+4, s) }

// fakeGit is a Git smart-HTTP server (protocol v0, as git http-backend
// speaks it to a stateless client) for one repository whose HEAD and
// every advertised ref name one commit, for the tests of what a fetch
// does with what a source host sends. It answers
//
//	GET  …/info/refs        the ref advertisement: "# service=git-upload-pack",
//	                        a flush, HEAD with caps, each of refs, a flush
//	POST …/git-upload-pack  the shallow-info (a shallow line for head, a
//	                        flush), "NAK", then the pack
//
// and anything else with 404. It reads no more than 1 MiB of a request's
// body, and answers every want with the same pack, whatever it asks for.
// The fields more* and refsPage make a hostile host: each writes more of
// one part of the answer, where that part stands.
type fakeGit struct {
	head string   // the commit that HEAD and every ref in refs name
	refs []string // advertised after HEAD, in order, e.g. "refs/tags/v1"
	caps string   // the capabilities on HEAD's line, e.g. "shallow no-progress"

	// deepenOnly sends the shallow-info only to a request that asks to
	// deepen, as Git does; without it, every answer starts with it.
	deepenOnly bool

	pack []byte // what follows the NAK
	// sendPack, when set, writes what follows the NAK instead of pack,
	// streamed; r is the request, whose context ends when the client
	// hangs up.
	sendPack func(w io.Writer, r *http.Request)

	// refsPage, when set, answers info/refs instead of the advertisement
	// (an error page, say); nothing is written to w before it.
	refsPage func(w http.ResponseWriter)
	// moreRefs writes after the refs, before the advertisement's flush;
	// moreShallow after the shallow line, before its flush; moreAcks
	// after the NAK, before the pack.
	moreRefs, moreShallow, moreAcks func(w io.Writer)
}

// oneTagGit is the repository most tests here serve: HEAD and the tag v1
// name head, the host offers shallow fetches and no progress, and sends
// pack as its answer.
func oneTagGit(head string, pack []byte) *fakeGit {
	return &fakeGit{head: head, refs: []string{"refs/tags/v1"}, caps: "shallow no-progress", pack: pack}
}

func (g *fakeGit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs"):
		if g.refsPage != nil {
			g.refsPage(w)
			return
		}
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		pktLine(w, "# service=git-upload-pack\n")
		io.WriteString(w, "0000")
		pktLine(w, g.head+" HEAD\x00"+g.caps+"\n")
		for _, ref := range g.refs {
			pktLine(w, g.head+" "+ref+"\n")
		}
		call(g.moreRefs, w)
		io.WriteString(w, "0000")
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack"):
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
		if !g.deepenOnly || bytes.Contains(body, []byte("deepen")) {
			pktLine(w, "shallow "+g.head+"\n")
			call(g.moreShallow, w)
			io.WriteString(w, "0000")
		}
		pktLine(w, "NAK\n")
		call(g.moreAcks, w)
		if g.sendPack != nil {
			g.sendPack(w, r)
		} else {
			w.Write(g.pack)
		}
	default:
		http.NotFound(w, r)
	}
}

// call calls f with w, if f is set.
func call(f func(io.Writer), w io.Writer) {
	if f != nil {
		f(w)
	}
}
