package layercheck

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/served"
	"github.com/tfmirror/tfmirror/v2/oci"
	"github.com/tfmirror/tfmirror/v2/proxy"
	"github.com/tfmirror/tfmirror/v2/proxy/ocidoor"
)

// The two requests whose walks ARCHITECTURE.md's "One request, top to
// bottom" follows. Each test makes exactly one request, cold (a new
// engine on an empty cache before the fake origin), through the mirror as
// cmd/tfmirror composes it: the engine behind its package policy
// (mirror/served), the front door proxy.Server, the OCI door mounted in
// it. TestWalkFigures traces them; run alone, they check the answer.

// walkProvider is the provider both walks ask for.
const (
	walkNamespace = "hashicorp"
	walkType      = "random"
	walkVersion   = "3.6.0"
	walkPlatform  = "linux_amd64"
)

// walkMirror is a cold mirror over a fake origin serving walkProvider.
type walkMirror struct {
	origin *fakeorigin.Origin
	http   *httptest.Server
}

func newWalkMirror(t *testing.T) *walkMirror {
	t.Helper()
	origin := enginetest.StartOrigin(t, fakeorigin.Options{})
	origin.AddProvider(walkNamespace, walkType, []string{walkVersion}, []string{walkPlatform, "darwin_arm64"})
	store := enginetest.OpenStore(t, "", cache.Options{})
	logger := enginetest.Logger(t)
	engine, err := mirror.New(mirror.Config{Logger: logger, AllowedOrigins: []string{enginetest.OriginHost}},
		enginetest.OriginClient(t, origin), store)
	if err != nil {
		t.Fatal(err)
	}
	side, err := engine.NewOCI()
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := served.New(served.Parts{Providers: engine, Modules: engine.Modules(), Zips: engine.Modules().Zips(), OCI: side})
	if err != nil {
		t.Fatal(err)
	}
	names, err := oci.NewNames("providers", "modules")
	if err != nil {
		t.Fatal(err)
	}
	door, err := ocidoor.New(ocidoor.Config{Names: names, Logger: logger, Modules: pkgs}, pkgs)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(proxy.Config{Logger: logger, OCI: door}, pkgs)
	if err != nil {
		t.Fatal(err)
	}
	m := &walkMirror{origin: origin, http: httptest.NewServer(srv)}
	t.Cleanup(func() {
		m.http.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := engine.Shutdown(ctx); err != nil {
			t.Errorf("work still running: %v", err)
		}
		store.Close()
	})
	return m
}

// get makes the walk's one request and returns the status and the body.
func (m *walkMirror) get(t *testing.T, path string, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, m.http.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := m.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// TestWalkColdArchive makes one cold archive request of the network mirror
// protocol: the first request the mirror sees.
func TestWalkColdArchive(t *testing.T) {
	m := newWalkMirror(t)
	path := "/" + enginetest.OriginHost + "/" + walkNamespace + "/" + walkType + "/terraform-provider-" +
		walkType + "_" + walkVersion + "_" + walkPlatform + ".zip"
	status, body := m.get(t, path)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
	if want := m.origin.Archive(walkNamespace, walkType, walkVersion, walkPlatform); !bytes.Equal(body, want) {
		t.Fatalf("GET %s: %d bytes, not the origin's archive (%d bytes)", path, len(body), len(want))
	}
}

// TestWalkColdOCIManifest makes one cold request of the OCI door: a
// provider version's manifest by tag, the first request the mirror sees.
func TestWalkColdOCIManifest(t *testing.T) {
	m := newWalkMirror(t)
	path := "/v2/providers/" + enginetest.OriginHost + "/" + walkNamespace + "/" + walkType + "/manifests/" + walkVersion
	status, body := m.get(t, path, "Accept", "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json")
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
	if !bytes.Contains(body, []byte(`"manifests"`)) {
		t.Fatalf("GET %s: not an image index: %s", path, body)
	}
}
