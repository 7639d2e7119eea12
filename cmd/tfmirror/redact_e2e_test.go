package main

// A module download location may carry credentials (an S3 pre-signed
// URL): they reach the source host and the record, and nothing else.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// TestPresignedModuleLocationNotShown drives module fetches whose
// locations carry a unique signature, credential and token (one
// succeeds, the others fail at the source host, at Git, as an
// unsupported getter, with userinfo) through the front door and the
// admin socket, exports the cache, and looks for them in every log line
// at debug level, every answer of the front door, the status page (HTML
// and JSON), /metrics, the admin socket's answers and the export.
func TestPresignedModuleLocationNotShown(t *testing.T) {
	nonce := make([]byte, 16)
	rand.Read(nonce)
	sig := "sig" + hex.EncodeToString(nonce)
	cred := "AKIA" + strings.ToUpper(hex.EncodeToString(nonce[:8]))
	secrets := []string{sig, cred}
	presign := "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" + cred + "%2F20240101%2Fus-east-1%2Fs3%2Faws4_request" +
		"&X-Amz-Date=20240101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature=" + sig

	logs := &logbuf.Buffer{}
	e := &e2e{t: t, logTo: logs}
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: e2eOrigins})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	e.origin = origin
	origin.AddTarball("leak-1.0.0.tar.gz", fakeorigin.TarGz(map[string][]byte{
		"main.tf": []byte("output \"x\" {\n  value = 1\n}\n"),
	}))
	// A source host that refuses connections: the failure is the
	// transport's, whose error names the URL it was sent to.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusing := "https://" + closed.Addr().String()
	closed.Close()
	locations := map[string]string{
		"1.0.0": origin.TarballURL("leak-1.0.0.tar.gz") + "?" + presign,                             // fetched
		"1.0.1": origin.TarballURL("gone-1.0.1.tar.gz") + "?" + presign,                             // 404 at the source host
		"1.0.2": "git::" + origin.GitURL("gone") + "//sub?ref=v1.0.2&token=" + sig,                  // no such repository
		"1.0.3": "s3::https://bucket.s3.amazonaws.com/x.zip?" + presign,                             // unsupported getter
		"1.0.4": strings.Replace(origin.TarballURL("leak-1.0.0.tar.gz"), "://", "://u:"+sig+"@", 1), // userinfo
		"1.0.5": refusing + "/leak-1.0.5.tar.gz?" + presign,                                         // connection refused
	}
	for v, loc := range locations {
		origin.AddModule("acme", "leak", "aws", v, loc)
	}
	e.startMirror(filepath.Join(t.TempDir(), "data"))
	client := trustingClient(t, e.caFile)

	var answers strings.Builder
	get := func(path string, wantOK bool) []byte {
		t.Helper()
		resp, err := client.Get(e.url + strings.TrimPrefix(path, "/"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&answers, "GET %s: %d %v\n%s\n", path, resp.StatusCode, resp.Header, body)
		if wantOK && resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		return body
	}
	base := "/registry/" + privateRegistry + "/v1/modules/acme/leak/aws/"
	get(base+"versions", true)
	for v := range locations {
		get(base+v+"/download", v == "1.0.0")
		pkg := get(base+v+"/package.tar.gz", v == "1.0.0")
		if v == "1.0.0" && len(pkg) == 0 {
			t.Fatal("the package is empty")
		}
	}

	// The admin socket: an unpack that works and one that fails, and an
	// export of the cache.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ac, err := admin.Dial(ctx, e.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	m, err := addrs.ParseModule(privateRegistry + "/acme/leak/aws")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ac.UnpackModule(ctx, m, "1.0.0", t.TempDir()); err != nil {
		t.Fatalf("admin unpack: %v", err)
	}
	for _, v := range []string{"1.0.1", "1.0.2"} {
		_, err := ac.UnpackModule(ctx, m, v, t.TempDir())
		if err == nil {
			t.Fatalf("admin unpack of %s worked", v)
		}
		fmt.Fprintf(&answers, "admin unpack %s: %v\n", v, err)
	}
	out := filepath.Join(t.TempDir(), "export")
	res, err := ac.Export(ctx, admin.ExportRequest{Out: out})
	if err != nil {
		t.Fatalf("admin export: %v", err)
	}
	if res.Modules != 1 {
		t.Errorf("the export holds %d module packages, want 1", res.Modules)
	}
	fmt.Fprintf(&answers, "admin export: %+v\n", res)

	// The record keeps the whole location, for fetching.
	rec, err := e.mirror.engine.Modules().ModuleLocation(ctx, m, versions.MustParseVersion("1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Location != locations["1.0.0"] {
		t.Errorf("the record's location is %q, the origin gave %q", rec.Location, locations["1.0.0"])
	}

	pages := map[string]string{
		"log (debug)":      logs.String(),
		"front door":       answers.String(),
		"status page HTML": string(get("/", true)),
		"status page JSON": string(get("/?format=json", true)),
		"metrics":          string(get("/metrics", true)),
		"export":           readTree(t, out),
	}
	for name, text := range pages {
		for _, s := range secrets {
			if i := strings.Index(text, s); i >= 0 {
				t.Errorf("%s shows %q: ...%s...", name, s, text[max(0, i-200):min(len(text), i+100)])
			}
		}
	}
	// What must be there, so that the test looks where it should.
	for name, want := range map[string]string{
		"status page HTML": "/tarballs/leak-1.0.0.tar.gz",
		"status page JSON": `"source":"` + origin.TarballURL("leak-1.0.0.tar.gz") + `?archive=tar.gz"`,
		"log (debug)":      `"msg":"module location"`,
		"export":           `"location": "` + origin.TarballURL("leak-1.0.0.tar.gz") + `"`,
	} {
		if !strings.Contains(pages[name], want) {
			t.Errorf("%s lacks %q", name, want)
		}
	}
	for _, msg := range []string{"module package cached", "module package fetch failed; nothing was cached", "admin sync: module package ensured"} {
		if !strings.Contains(pages["log (debug)"], `"msg":"`+msg+`"`) {
			t.Errorf("the log has no %q line", msg)
		}
	}
}

// readTree is the names and contents of every file under dir.
func readTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		fmt.Fprintf(&b, "%s\n%s\n", p, data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
