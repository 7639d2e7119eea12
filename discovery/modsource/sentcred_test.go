package modsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tfmirror/tfmirror/v2/internal/logbound"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
)

// sentToken is the credential the tests here send a source host, which
// its answers echo.
const sentToken = "s3cr3t-source-token-0123456789"

// credTransport sends every request with sentToken, as basic
// authentication, and records it on the request's context, as
// discovery's source client does (redact.Sent).
type credTransport struct{ next http.RoundTripper }

func (t credTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	a := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+sentToken))
	out := req.Clone(req.Context())
	out.Header.Set("Authorization", a)
	redact.Sent(req.Context(), a)
	return t.next.RoundTrip(out)
}

// TestGitAnswerEchoingCredentialNotInError: a Git host that answers, in
// valid pkt-lines, with the credential the mirror sent it (an ERR line in
// its ref advertisement or in upload-pack's answer, an error on the
// sideband's channel 3) fails the fetch with an error that names the
// repository but not the credential, which go-git's error quotes.
func TestGitAnswerEchoingCredentialNotInError(t *testing.T) {
	const head = "0123456789abcdef0123456789abcdef01234567"
	echo := "auth failed for token " + sentToken
	for name, g := range map[string]*fakeGit{
		"ERR in the ref advertisement": {head: head, refsPage: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
			pktLine(w, "# service=git-upload-pack\n")
			io.WriteString(w, "0000")
			pktLine(w, "ERR "+echo+"\n")
		}},
		"ERR in upload-pack's answer": {head: head, refs: []string{"refs/tags/v1"}, caps: "shallow no-progress",
			moreAcks: func(w io.Writer) { pktLine(w, "ERR "+echo+"\n") }},
		"sideband error": {head: head, refs: []string{"refs/tags/v1"}, caps: "shallow no-progress side-band-64k",
			sendPack: func(w io.Writer, _ *http.Request) { pktLine(w, "\x03"+echo+"\n"); io.WriteString(w, "0000") }},
		"sideband progress, then no pack": {head: head, refs: []string{"refs/tags/v1"}, caps: "shallow side-band-64k",
			sendPack: func(w io.Writer, _ *http.Request) { pktLine(w, "\x02"+echo+"\n"); pktLine(w, "\x01"+echo) }},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewTLSServer(g)
			defer srv.Close()
			c := srv.Client()
			c.Transport = credTransport{next: c.Transport}
			err := fetchWithout(t, &Fetcher{HTTP: c, Limits: defaultLimits, TempDir: t.TempDir()}, "git::"+srv.URL+"/repo.git?ref=v1")
			if !strings.Contains(err.Error(), "/repo.git") {
				t.Errorf("the error does not name the repository: %v", err)
			}
		})
	}
}

// TestGitAnswerErrorTextBounded: a Git server's ERR line or sideband
// message of 60 KiB (a pkt-line holds up to 65516 bytes) fails the fetch
// with an error of logbound.MaxErrorText bytes at most that still names
// the repository, and still says what it quotes, cut, where go-git's
// error quoted it whole into the log line, the client's 502 and the
// status page's row.
func TestGitAnswerErrorTextBounded(t *testing.T) {
	const head = "0123456789abcdef0123456789abcdef01234567"
	long := "denied: " + strings.Repeat("é", 30000)
	for name, g := range map[string]*fakeGit{
		"ERR in the ref advertisement": {head: head, refsPage: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
			pktLine(w, "# service=git-upload-pack\n")
			io.WriteString(w, "0000")
			pktLine(w, "ERR "+long+"\n")
		}},
		"sideband error": {head: head, refs: []string{"refs/tags/v1"}, caps: "shallow no-progress side-band-64k",
			sendPack: func(w io.Writer, _ *http.Request) { pktLine(w, "\x03"+long+"\n"); io.WriteString(w, "0000") }},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewTLSServer(g)
			defer srv.Close()
			a, err := Parse("git::" + srv.URL + "/repo.git?ref=v1")
			if err != nil {
				t.Fatal(err)
			}
			_, err = (&Fetcher{HTTP: srv.Client(), Limits: defaultLimits, TempDir: t.TempDir()}).Fetch(t.Context(), a, io.Discard)
			if err == nil {
				t.Fatal("the fetch succeeded")
			}
			msg := err.Error()
			if len(msg) > logbound.MaxErrorText || !utf8.ValidString(msg) {
				t.Errorf("error of %d bytes (valid UTF-8: %v), want at most %d: %.200s...", len(msg), utf8.ValidString(msg), logbound.MaxErrorText, msg)
			}
			if !strings.Contains(msg, "/repo.git") || !strings.Contains(msg, "denied: ") {
				t.Errorf("the error does not name the repository and what the server said: %.300s", msg)
			}
		})
	}
}

// TestArchiveEchoingCredentialNotInError: an archive host whose archive
// names an entry with the credential the mirror sent it, or whose
// failure's text holds it, fails the fetch with an error without it.
func TestArchiveEchoingCredentialNotInError(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "auth failed for token " + sentToken, Typeflag: tar.TypeFifo, Mode: 0o644})
	tw.Close()
	gz.Close()
	for name, open := range map[string]func() (io.ReadCloser, int64, error){
		"entry name": func() (io.ReadCloser, int64, error) {
			return io.NopCloser(bytes.NewReader(buf.Bytes())), int64(buf.Len()), nil
		},
		"failure text": func() (io.ReadCloser, int64, error) {
			return nil, 0, &echoError{"host answered: bad credential Bearer " + sentToken}
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := &Fetcher{Limits: defaultLimits, TempDir: t.TempDir(),
				Open: func(ctx context.Context, rawURL string) (io.ReadCloser, int64, error) {
					redact.Sent(ctx, "Bearer "+sentToken)
					return open()
				}}
			err := fetchWithout(t, f, "https://h.test/m.tar.gz")
			if !strings.Contains(err.Error(), "REDACTED") {
				t.Errorf("the error no longer says what the host sent: %v", err)
			}
		})
	}
}

// fetchWithout fetches source with f, which must fail, and returns its
// error, which must not carry the credential sent.
func fetchWithout(t *testing.T, f *Fetcher, source string) error {
	t.Helper()
	a, err := Parse(source)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Fetch(context.Background(), a, io.Discard)
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), sentToken) {
		t.Errorf("the error carries the credential sent: %v", err)
	}
	return err
}

type echoError struct{ msg string }

func (e *echoError) Error() string { return e.msg }
