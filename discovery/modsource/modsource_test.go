package modsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Address
	}{
		{"git tag", "git::https://h.test/org/repo.git?ref=v1.2.0", Address{Kind: KindGit, URL: "https://h.test/org/repo.git", Ref: "v1.2.0"}},
		{"git subdir", "git::https://h.test/org/mono.git//modules/vpc?ref=v1", Address{Kind: KindGit, URL: "https://h.test/org/mono.git", Ref: "v1", Subdir: "modules/vpc"}},
		{"github shorthand", "github.com/org/repo?ref=v2", Address{Kind: KindGit, URL: "https://github.com/org/repo.git", Ref: "v2"}},
		{"bitbucket shorthand subdir", "bitbucket.org/org/repo//sub", Address{Kind: KindGit, URL: "https://bitbucket.org/org/repo.git", Subdir: "sub"}},
		{"tarball", "https://h.test/m.tar.gz", Address{Kind: KindArchive, URL: "https://h.test/m.tar.gz", Format: "tar.gz"}},
		{"tgz subdir glob", "https://h.test/x/m.tgz//*", Address{Kind: KindArchive, URL: "https://h.test/x/m.tgz", Format: "tgz", Subdir: "*"}},
		{"archive param", "https://api.h.test/repos/o/r/tarball/v1//*?archive=tar.gz&token=x", Address{Kind: KindArchive, URL: "https://api.h.test/repos/o/r/tarball/v1?token=x", Format: "tar.gz", Subdir: "*"}},
		{"zip", "https://h.test/m.zip", Address{Kind: KindArchive, URL: "https://h.test/m.zip", Format: "zip"}},
		{"tbz2", "https://h.test/m.tbz2", Address{Kind: KindArchive, URL: "https://h.test/m.tbz2", Format: "tbz2"}},
		// A "//" in the query is the query's, as go-getter reads it: the
		// URL fetched is the one the clients would fetch.
		{"double slash in the query", "https://h.test/m.tar.gz?sig=a//b", Address{Kind: KindArchive, URL: "https://h.test/m.tar.gz?sig=a%2F%2Fb", Format: "tar.gz"}},
		{"double slash in the query, subdir before it", "https://h.test/m.tar.gz//sub?sig=a//b", Address{Kind: KindArchive, URL: "https://h.test/m.tar.gz?sig=a%2F%2Fb", Format: "tar.gz", Subdir: "sub"}},
		{"subdir climbing back in", "https://h.test/m.tar.gz//modules/../vpc", Address{Kind: KindArchive, URL: "https://h.test/m.tar.gz", Format: "tar.gz", Subdir: "vpc"}},
		{"subdir with backslashes", "git::https://h.test/mono.git//modules\\vpc?ref=v1", Address{Kind: KindGit, URL: "https://h.test/mono.git", Ref: "v1", Subdir: "modules/vpc"}},
		{"git ref with a URL in the query", "git::https://h.test/r.git?ref=v1&x=https://y", Address{Kind: KindGit, URL: "https://h.test/r.git?x=https%3A%2F%2Fy", Ref: "v1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if err != nil || got != tc.want {
				t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ in, scheme string }{
		{"s3::https://s3.amazonaws.com/b/m.zip", "s3"},
		{"gcs::https://www.googleapis.com/storage/v1/b/m.zip", "gcs"},
		{"hg::https://h.test/repo", "hg"},
		{"git::ssh://git@h.test/org/repo.git", "ssh"},
		{"git@github.com:org/repo.git", "ssh"},
		{"http://h.test/m.tar.gz", "http"},
		{"https://h.test/page", ""},
		{"https://h.test/m.tar", ""},
		{"https://h.test/m?archive=rar", ""},
		{"./local", ""},
		{"/srv/modules/vpc", ""},
		{"file:///etc/m.tar.gz", "file"},
		{"git::file:///srv/repo.git", "file"},
		{"git::/srv/repo.git", ""},
		{"ssh://git@h.test/org/repo.git", "ssh"},
		{"git::ssh://h.test/org/repo.git?ref=v1", "ssh"},
		{"https::file:///etc/m.tar.gz", "file"},
		// A //SUBDIR leading outside of the package, which the clients
		// refuse ("subdirectory path ... leads outside of the module
		// package"): before, it was cleaned to a directory of the package,
		// so that the mirror served what a direct install refuses. A
		// Windows client separates with a backslash: climbing with it
		// would be a directory outside the package there.
		{"https://h.test/m.tar.gz//../x", ""},
		{"git::https://h.test/mono.git//a/../../x?ref=v1", ""},
		{"https://h.test/m.zip//..", ""},
		{"https://h.test/m.tar.gz//..\\..\\*", ""},
	} {
		_, err := Parse(tc.in)
		var ue *UnsupportedError
		if !errors.As(err, &ue) || ue.Scheme != tc.scheme || !errors.Is(err, ErrUnsupported) {
			t.Errorf("Parse(%q) = %v, want an UnsupportedError of scheme %q", tc.in, err, tc.scheme)
		}
		if tc.scheme != "" && !strings.Contains(err.Error(), `"`+tc.scheme+`"`) {
			t.Errorf("Parse(%q) error %q does not name the scheme", tc.in, err)
		}
		if strings.Contains(tc.in, "//..") && (err == nil || !strings.Contains(err.Error(), "leads outside of the module package")) {
			t.Errorf("Parse(%q) error %v does not say the subdirectory leads outside of the package", tc.in, err)
		}
	}
}

func newFetcher(t *testing.T, o *fakeorigin.Origin, limits Limits) *Fetcher {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: o.CertPool()}}}
	t.Cleanup(c.CloseIdleConnections)
	return &Fetcher{
		HTTP: c,
		Open: func(ctx context.Context, u string) (io.ReadCloser, int64, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			resp, err := c.Do(req)
			if err != nil {
				return nil, 0, err
			}
			return resp.Body, resp.ContentLength, nil
		},
		Limits:  limits,
		TempDir: t.TempDir(),
	}
}

// readTarGz returns the files of a tar.gz (directories end in "/").
func readTarGz(t *testing.T, data []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b)
	}
}

var defaultLimits = Limits{MaxDownloadBytes: 1 << 20, MaxTreeBytes: 1 << 20, MaxEntries: 100, MaxSubmoduleDepth: 2}

func needGit(t testing.TB) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

func TestFetchGit(t *testing.T) {
	needGit(t)
	o, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	v1, err := o.AddGitRepo("mono", map[string][]byte{"modules/vpc/main.tf": []byte("module \"s\" { source = \"../shared\" }\n"), "modules/shared/main.tf": []byte("# shared\n"), "README.md": []byte("hi\n")}, "v1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.AddGitRepo("mono", map[string][]byte{"main.tf": []byte("# v2\n")}, "v2.0.0"); err != nil {
		t.Fatal(err)
	}
	f := newFetcher(t, o, defaultLimits)
	for _, ref := range []string{"v1.0.0", v1} {
		a, err := Parse("git::" + o.GitURL("mono") + "//modules/vpc?ref=" + ref)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		res, err := f.Fetch(context.Background(), a, &buf)
		if err != nil {
			t.Fatalf("ref %s: %v", ref, err)
		}
		if res.Commit != v1 || res.Files != 3 {
			t.Errorf("ref %s: %+v, want commit %s and 3 files", ref, res, v1)
		}
		files := readTarGz(t, buf.Bytes())
		if files["modules/shared/main.tf"] != "# shared\n" || files["README.md"] != "hi\n" || len(files) != 6 {
			t.Errorf("ref %s: package = %v", ref, files)
		}
		// Deterministic: the same bytes again.
		var again bytes.Buffer
		if _, err := f.Fetch(context.Background(), a, &again); err != nil || !bytes.Equal(again.Bytes(), buf.Bytes()) {
			t.Errorf("a second fetch gave other bytes (%v)", err)
		}
	}
	a, _ := Parse("git::" + o.GitURL("mono") + "?ref=v9")
	if _, err := f.Fetch(context.Background(), a, io.Discard); err == nil || !strings.Contains(err.Error(), `"v9"`) {
		t.Errorf("unknown ref: %v", err)
	}
	a, _ = Parse("git::" + o.GitURL("mono") + "//nope?ref=v1.0.0")
	if _, err := f.Fetch(context.Background(), a, io.Discard); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("missing subdir: %v", err)
	}
}

func TestFetchGitLimits(t *testing.T) {
	needGit(t)
	o, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	big := make([]byte, 16<<20) // zeros: a small pack, a large tree
	if _, err := o.AddGitRepo("bomb", map[string][]byte{"main.tf": []byte("#\n"), "zeros.bin": big}, "v1"); err != nil {
		t.Fatal(err)
	}
	a, _ := Parse("git::" + o.GitURL("bomb") + "?ref=v1")
	var le *LimitError
	// Refused from the pack's object headers, before go-git inflates the
	// blob (whole, in memory) to index the pack: the one blob is larger
	// than all the package's files may be.
	if _, err := newFetcher(t, o, defaultLimits).Fetch(context.Background(), a, io.Discard); !errors.As(err, &le) || !strings.Contains(err.Error(), "Git pack holds a blob of 16777216 bytes") {
		t.Errorf("git bomb: %v, want a LimitError about the pack's objects", err)
	}
	small := defaultLimits
	small.MaxDownloadBytes, small.MaxTreeBytes = 2<<10, 64<<20
	if _, err := newFetcher(t, o, small).Fetch(context.Background(), a, io.Discard); !errors.As(err, &le) || !strings.Contains(err.Error(), "download") {
		t.Errorf("large pack: %v, want a LimitError about the download", err)
	}
}

func TestFetchArchives(t *testing.T) {
	o, err := fakeorigin.Start(fakeorigin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	files := map[string][]byte{"top/": nil, "top/main.tf": []byte("# m\n"), "top/sub/x.tf": []byte("# x\n")}
	o.AddTarball("m.tar.gz", fakeorigin.TarGz(files))
	o.AddTarball("m.zip", fakeorigin.Zip(map[string][]byte{"top/main.tf": []byte("# m\n"), "top/sub/x.tf": []byte("# x\n")}))
	o.AddTarball("evil.tgz", fakeorigin.TarGz(map[string][]byte{"../../etc/x": []byte("x")}))
	o.AddTarball("bomb.tar.gz", fakeorigin.TarGz(map[string][]byte{"a": make([]byte, 4<<20)}))
	f := newFetcher(t, o, defaultLimits)
	var want []byte
	for _, name := range []string{"m.tar.gz", "m.zip"} {
		a, err := Parse(o.TarballURL(name) + "//top")
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := f.Fetch(context.Background(), a, &buf); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := readTarGz(t, buf.Bytes())
		if got["top/sub/x.tf"] != "# x\n" || got["top/main.tf"] != "# m\n" {
			t.Errorf("%s: %v", name, got)
		}
		if want == nil {
			want = buf.Bytes()
		} else if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("the zip and the tar.gz of one tree normalize to different bytes")
		}
	}
	a, _ := Parse(o.TarballURL("evil.tgz"))
	var buf bytes.Buffer
	if _, err := f.Fetch(context.Background(), a, &buf); err != nil {
		t.Fatal(err)
	}
	if got := readTarGz(t, buf.Bytes()); len(got) != 2 || got["etc/x"] != "x" {
		t.Errorf("an escaping path was not kept inside the package: %v", got)
	}
	a, _ = Parse(o.TarballURL("bomb.tar.gz"))
	var le *LimitError
	if _, err := f.Fetch(context.Background(), a, io.Discard); !errors.As(err, &le) {
		t.Errorf("tarball bomb: %v, want a LimitError", err)
	}
	// Entries that are not kept (.git) inflate all the same: 16 MiB of
	// zeros in 16 KiB, far over the files' limit.
	o.AddTarball("hidden.tar.gz", fakeorigin.TarGz(map[string][]byte{"main.tf": nil, ".git/zeros": make([]byte, 16<<20)}))
	a, _ = Parse(o.TarballURL("hidden.tar.gz"))
	if _, err := f.Fetch(context.Background(), a, io.Discard); !errors.As(err, &le) || !strings.Contains(err.Error(), "unpacks to more than") {
		t.Errorf("tarball bomb in a skipped entry: %v, want a LimitError about the bytes it unpacks to", err)
	}
	few := defaultLimits
	few.MaxEntries = 2
	a, _ = Parse(o.TarballURL("m.tar.gz"))
	if _, err := newFetcher(t, o, few).Fetch(context.Background(), a, io.Discard); !errors.As(err, &le) {
		t.Errorf("too many entries: %v, want a LimitError", err)
	}
}

func TestUnpack(t *testing.T) {
	data := fakeorigin.TarGz(map[string][]byte{"a/": nil, "a/main.tf": []byte("# a\n"), "../b.tf": []byte("# b\n")})
	dir := t.TempDir()
	if err := Unpack(context.Background(), bytes.NewReader(data), dir, defaultLimits); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a/main.tf": "# a\n", "b.tf": "# b\n"} {
		if got, err := os.ReadFile(dir + "/" + name); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	few := defaultLimits
	few.MaxEntries = 1
	var le *LimitError
	if err := Unpack(context.Background(), bytes.NewReader(data), t.TempDir(), few); !errors.As(err, &le) {
		t.Errorf("over the entry limit: %v", err)
	}
}
