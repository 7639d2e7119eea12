package ocidoor

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// storeBlobIn stores data as a blob of r's cache and returns its sha256.
func storeBlobIn(t *testing.T, r *rig, data []byte) string {
	t.Helper()
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	w, err := r.store.NewBlobWriter(sha)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(""); err != nil {
		t.Fatal(err)
	}
	return sha
}

// A module blob is sent under its own digest: once the package a zip was
// made of is refused by today's rules (stored by an earlier release with
// .GIT/config) and fetched again, the zip made of it has other bytes,
// and a client asking for the first zip's digest (from a manifest it
// holds) is not sent those bytes with a Docker-Content-Digest they do not
// have.
func TestModuleBlobSentUnderItsOwnDigest(t *testing.T) {
	r := newRig(t, rigOptions{})
	files := map[string][]byte{"main.tf": []byte("# net\n"), ".GIT/config": []byte("[core]\n\tfsmonitor = touch /tmp/pwned\n")}
	addTarballModule(r, files, "1.0.0")
	m := addrs.Module{Hostname: originHost, Namespace: "acme", Name: "net", System: "aws"}
	v := enginetest.MustModuleVersion(t, "1.0.0")
	loc := r.origin.TarballURL("net-1.0.0.tar.gz")

	// As an earlier release stored them: the package with .GIT, and its zip.
	pkg := fakeorigin.TarGz(files)
	psha := storeBlobIn(t, r, pkg)
	rec := records.ModuleRecord{Schema: records.Schema, Module: m.String(), Version: "1.0.0", Location: loc, Kind: modsource.KindArchive,
		Package: loc, SHA256: psha, Size: int64(len(pkg)), FetchedAt: time.Now().UTC(), Provenance: records.ProvenanceOrigin}
	if err := r.store.PutMeta(records.ModuleRecordKey(m, v), &rec); err != nil {
		t.Fatal(err)
	}
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	for _, name := range []string{".GIT/config", "main.tf"} {
		f, _ := zw.Create(name)
		f.Write(files[name])
	}
	zw.Close()
	zsha := storeBlobIn(t, r, zb.Bytes())
	zrec := records.ModuleZipRecord{Schema: records.Schema, Module: m.String(), Version: "1.0.0", Package: psha, SHA256: zsha, Size: int64(zb.Len())}
	if err := r.store.PutMeta(records.ModuleZipKey(m, v), &zrec); err != nil {
		t.Fatal(err)
	}

	want := "sha256:" + zsha
	resp := r.do("GET", "/v2/modules/"+originHost+"/acme/net/aws/blobs/"+want)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// Refused: that zip is not served any more, and the digest names
		// nothing else.
		if resp.StatusCode != http.StatusNotFound || !bytes.Contains(body, []byte(`"BLOB_UNKNOWN"`)) {
			t.Errorf("GET blob %s: %s %s, want the zip of that digest or 404 BLOB_UNKNOWN", want, resp.Status, body)
		}
		return
	}
	if got := sha256Digest(body); got != want || resp.Header.Get("Docker-Content-Digest") != want {
		t.Errorf("GET blob %s: 200 with bytes of digest %s and Docker-Content-Digest %s", want, got, resp.Header.Get("Docker-Content-Digest"))
	}
}
