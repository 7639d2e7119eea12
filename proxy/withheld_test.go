package proxy

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
)

// importInHouse imports an unsigned in-house package of version of p for
// linux_amd64 into h's engine.
func importInHouse(t *testing.T, h *harness, p addrs.Provider, version string) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	fh := &zip.FileHeader{Name: "terraform-provider-" + p.Type, Method: zip.Deflate}
	fh.SetMode(0o755)
	f, err := zw.CreateHeader(fh)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "#!/bin/sh\necho in-house\n")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	v, err := addrs.ParseSemver(version)
	if err != nil {
		t.Fatal(err)
	}
	zipped := buf.Bytes()
	_, err = h.engine.AirGap().Import(t.Context(), imports.Imported{Provider: p, Version: v, Unsigned: true, Packages: []imports.Package{{
		Platform: "linux_amd64", Filename: "terraform-provider-" + p.Type + "_" + version + "_linux_amd64.zip", Document: -1,
		Open: func(context.Context) (io.ReadCloser, int64, error) {
			return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
		},
	}}})
	if err != nil {
		t.Fatalf("importing %s %s: %v", p, version, err)
	}
}

// A mirror that holds versions imported without signature under an
// allowed origin host (as 1.x imported them), started without that host
// in its unsigned hosts: it logs them, lists them on the status page
// (HTML and JSON) and does not serve them (left out of index.json, their
// VERSION.json and archives 404), while the origin's other versions are
// served; named again, the host's versions are served again.
func TestWithheldVersions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	allowed := harnessOptions{cacheDir: dir, engine: mirror.Config{Offline: true, UnsignedHosts: []string{originHost}}}
	h := newHarness(t, allowed)
	p := addrs.Provider{Hostname: originHost, Namespace: ns, Type: typ}
	for _, v := range []string{"1.0.0", "9.0.0"} {
		importInHouse(t, h, p, v)
	}
	other := addrs.Provider{Hostname: "tf.corp.example", Namespace: "platform", Type: "thing"}
	importInHouse(t, h, other, "1.0.0")
	h.stop()

	var logs logbuf.Buffer
	h.start(harnessOptions{cacheDir: dir, engine: mirror.Config{Offline: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
	for _, v := range []string{"1.0.0", "9.0.0"} {
		want := `msg="withholding a version imported without signature under an allowed origin host`
		if !strings.Contains(logs.String(), want) || !strings.Contains(logs.String(), "provider="+p.String()+" version="+v) {
			t.Errorf("the start-up log does not name %s %s:\n%s", p, v, logs.String())
		}
	}
	if strings.Contains(logs.String(), other.String()) {
		t.Errorf("the log names %s, whose host is no origin:\n%s", other, logs.String())
	}

	base := "/" + originHost + "/" + ns + "/" + typ + "/"
	r := h.get(base + "index.json")
	if r.status != 200 || strings.Contains(string(r.body), "1.0.0") || strings.Contains(string(r.body), "9.0.0") {
		t.Errorf("index.json: %d %s, want neither withheld version", r.status, r.body)
	}
	for _, v := range []string{"1.0.0", "9.0.0"} {
		if r := h.get(base + v + ".json"); r.status != 404 || !strings.Contains(string(r.body), "withheld") {
			t.Errorf("%s.json: %d %s, want 404 saying it is withheld", v, r.status, r.body)
		}
		if r := h.get(base + "terraform-provider-" + typ + "_" + v + "_linux_amd64.zip"); r.status != 404 {
			t.Errorf("%s archive: %d, want 404", v, r.status)
		}
	}
	if r := h.get("/tf.corp.example/platform/thing/1.0.0.json"); r.status != 200 {
		t.Errorf("the in-house provider of a host that is no origin: %d %s, want 200", r.status, r.body)
	}

	r = h.get("/?format=json")
	var st Status
	r.json(t, &st)
	if len(st.Withheld) != 2 || st.Withheld[0].Provider != p.String() || st.Withheld[0].Version != "1.0.0" ||
		st.Withheld[1].Version != "9.0.0" || strings.Join(st.Withheld[0].Platforms, ",") != "linux_amd64" {
		t.Errorf("status JSON withheld = %+v", st.Withheld)
	}
	var raw map[string]json.RawMessage
	json.Unmarshal(r.body, &raw)
	if _, ok := raw["withheld"]; !ok {
		t.Errorf("status JSON has no \"withheld\": %s", r.body)
	}
	r = h.get("/")
	page := string(r.body)
	if i := strings.Index(page, `<table id="withheld">`); i < 0 || !strings.Contains(page[i:], "9.0.0") ||
		!strings.Contains(page, "Withheld versions") || !strings.Contains(page, "--allow-unsigned-hosts") {
		t.Errorf("the status page does not list the withheld versions:\n%s", page)
	}
	h.stop()

	h.start(allowed)
	if r := h.get(base + "9.0.0.json"); r.status != 200 {
		t.Errorf("with the host named again, 9.0.0.json: %d %s", r.status, r.body)
	}
	if r := h.get("/?format=json"); strings.Contains(string(r.body), `"withheld"`) {
		t.Errorf("with the host named again, the status still lists withheld versions: %s", r.body)
	}
}

// Through the provider registry protocol (a host block), the versions of
// an in-house host imported without signature are left out of the
// versions answer, with a warning Terraform prints naming them and the
// network mirror: the protocol's download answer gives the publisher's
// signature, which they have none of. They had been listed, their
// download answering 404, which Terraform reported as no package for
// the platform. The network mirror serves them.
func TestRegistryLeavesOutUnsignedInHouseVersions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{engine: mirror.Config{Offline: true}})
	p := addrs.Provider{Hostname: "tf.corp.example", Namespace: "platform", Type: "thing"}
	importInHouse(t, h, p, "1.0.0")
	r := h.get("/registry/tf.corp.example/v1/providers/platform/thing/versions")
	var got struct {
		Versions []struct{ Version string } `json:"versions"`
		Warnings []string                   `json:"warnings"`
	}
	r.json(t, &got)
	if r.status != 200 || len(got.Versions) != 0 || len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], "tf.corp.example/platform/thing 1.0.0: imported without signature") || !strings.Contains(got.Warnings[0], "network_mirror") {
		t.Errorf("versions: %d %s; want none, and a warning naming 1.0.0 and the network mirror", r.status, r.body)
	}
	if r := h.get("/tf.corp.example/platform/thing/1.0.0.json"); r.status != 200 {
		t.Errorf("through the network mirror: %d %s, want 200", r.status, r.body)
	}
}

// Under an allowed origin the operator names in --allow-unsigned-hosts,
// a version imported without signature is left out of the registry
// protocol's versions answer too, with the same warning, and judging it
// asks the origin nothing: it had been listed (the door looked only at
// hosts that are no origin), and Terraform, taking it for the newest,
// failed on its download answer's 404. The origin's own versions stay.
//
// Through the network mirror they are served: they had been, until the
// first listing of the origin replaced the list the import added them
// to, and then not at all (index.json without them, their VERSION.json
// 404), which only a sealed mirror escaped; after a restart too.
func TestRegistryLeavesOutUnsignedVersionsOfAnUnsignedOriginHost(t *testing.T) {
	t.Parallel()
	opts := harnessOptions{cacheDir: t.TempDir(), engine: mirror.Config{UnsignedHosts: []string{originHost}}}
	h := newHarness(t, opts)
	h.origin.AddProvider(ns, typ, []string{"1.0.0"}, []string{"linux_amd64"})
	p := addrs.Provider{Hostname: originHost, Namespace: ns, Type: typ}
	importInHouse(t, h, p, "9.0.0")
	base := "/" + originHost + "/" + ns + "/" + typ + "/"
	for _, restarted := range []bool{false, true} {
		if restarted {
			h.stop()
			h.start(opts)
		}
		if r := h.get(base + "index.json"); r.status != 200 || !strings.Contains(string(r.body), `"1.0.0"`) || !strings.Contains(string(r.body), `"9.0.0"`) {
			t.Errorf("restarted %v: index.json: %d %s, want the origin's 1.0.0 and the in-house 9.0.0", restarted, r.status, r.body)
		}
		if r := h.get(base + "9.0.0.json"); r.status != 200 || !strings.Contains(string(r.body), "linux_amd64") {
			t.Errorf("restarted %v: 9.0.0.json: %d %s, want 200", restarted, r.status, r.body)
		}
	}
	h.origin.ResetHits()
	r := h.get("/registry/" + originHost + "/v1/providers/" + ns + "/" + typ + "/versions")
	var got struct {
		Versions []struct{ Version string } `json:"versions"`
		Warnings []string                   `json:"warnings"`
	}
	r.json(t, &got)
	var listed []string
	for _, v := range got.Versions {
		listed = append(listed, v.Version)
	}
	if r.status != 200 || strings.Join(listed, ",") != "1.0.0" || len(got.Warnings) != 1 ||
		!strings.Contains(got.Warnings[0], p.String()+" 9.0.0: imported without signature") {
		t.Errorf("versions: %d %s; want 1.0.0 only, and a warning naming 9.0.0", r.status, r.body)
	}
	if n := h.origin.Hits(fakeorigin.Download); n != 0 {
		t.Errorf("judging the versions asked the origin %d times for a download answer", n)
	}
}

// An in-house provider under an allowed origin of --allow-unsigned-hosts
// that the origin does not have at all (its listing answers 404) is
// served all the same, its versions alone listed: it had answered 404
// once the mirror was online.
func TestInHouseProviderTheOriginLacks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{engine: mirror.Config{UnsignedHosts: []string{originHost}}})
	p := addrs.Provider{Hostname: originHost, Namespace: "platform", Type: "thing"}
	importInHouse(t, h, p, "1.0.0")
	base := "/" + originHost + "/platform/thing/"
	if r := h.get(base + "index.json"); r.status != 200 || !strings.Contains(string(r.body), `"1.0.0"`) {
		t.Errorf("index.json: %d %s, want the in-house 1.0.0", r.status, r.body)
	}
	if r := h.get(base + "1.0.0.json"); r.status != 200 {
		t.Errorf("1.0.0.json: %d %s, want 200", r.status, r.body)
	}
	if r := h.get(base + "2.0.0.json"); r.status != 404 {
		t.Errorf("2.0.0.json, a version nobody has: %d %s, want 404", r.status, r.body)
	}
	if r := h.get("/" + originHost + "/platform/other/index.json"); r.status != 404 {
		t.Errorf("a provider nobody has: %d %s, want 404", r.status, r.body)
	}
}
