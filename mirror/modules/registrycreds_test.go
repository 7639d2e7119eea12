package modules_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apparentlymart/go-versions/versions"
	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/cachetest"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// A private registry that serves its packages itself answers a module's
// download in OpenTofu's direct form, {"location": URL,
// "use_registry_credentials": true}: OpenTofu fetches the package at URL
// (a URL, whose format its bytes tell: here one without an extension)
// with the registry host's credential. The mirror does the same with the
// origin credential the operator configured for the registry host: the
// package host sees the token, the module is served, and the package is
// fetched so again once evicted, and from the location the origin gives
// later. With "use_registry_credentials": false the package URL (here a
// pre-signed one, without an extension) is fetched as it is, and the
// package host sees no credential; once its signature has expired and
// the package is evicted, the origin's download answer of the day is
// fetched from. Without an origin credential the fetch goes without one,
// and the package host's refusal says why. Neither the token nor the
// signature is in a log line or an error; the record holds no token.
func TestModulePackageFetchedWithTheRegistrysCredential(t *testing.T) {
	const token = "registry-tok-7Qx9PzW"
	for _, tc := range []struct {
		name       string
		use        bool // use_registry_credentials
		configured bool // an origin credential for the registry host
		private    bool // the package host wants the registry's token
		zip        bool // the package is a zip, not a tar.gz
		ext        bool // the package URL ends in .tar.gz
		wantOK     bool
	}{
		{name: "true", use: true, configured: true, private: true, wantOK: true},
		{name: "true, a URL ending in .tar.gz", use: true, configured: true, private: true, ext: true, wantOK: true},
		{name: "true, a zip", use: true, configured: true, private: true, zip: true, wantOK: true},
		{name: "false", use: false, configured: true, wantOK: true},
		{name: "false, a zip", use: false, configured: true, zip: true, wantOK: true},
		{name: "false, a URL ending in .tar.gz", use: false, configured: true, ext: true, wantOK: true},
		{name: "true without an origin credential", use: true, private: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logbuf.Buffer{}
			logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			opts := harness.Options{Config: harness.Config{Logger: logger}}
			opts.OriginConfig = func(cfg *discovery.Config) {
				cfg.Logger = logger
				if tc.configured {
					cfg.Credentials = func(h svchost.Hostname) string {
						if h == harness.OriginHost {
							return token
						}
						return ""
					}
				}
			}
			h := harness.New(t, opts)
			o := h.Origin
			files := map[string][]byte{"main.tf": []byte("# private\n"), "modules/a/main.tf": []byte("# a\n")}
			pkg := fakeorigin.TarGz(files)
			if tc.zip {
				pkg = fakeorigin.Zip(files)
			}
			file := "vpc-1.0.0" // a package URL: no extension
			if tc.ext {
				file = "vpc-1.0.0.tar.gz" // go-getter syntax too
			}
			const signature = "presigned-sig-9Tq2"
			location := func(file string) string {
				if tc.use {
					return o.TarballURL(file)
				}
				return o.TarballURL(file) + "?X-Amz-Expires=300&X-Amz-Signature=" + signature
			}
			o.AddTarball(file, pkg)
			if tc.private {
				o.RequireTarballToken(file, token)
			}
			o.AddDirectModule("acme", "vpc", "aws", "1.0.0", location(file), tc.use)

			got, body, err := h.ReadModule("1.0.0")
			var errText string
			switch {
			case tc.wantOK && err != nil:
				t.Fatalf("module of a direct download answer: %v", err)
			case tc.wantOK && len(body) == 0:
				t.Fatalf("record %+v, no bytes", got.Record)
			case !tc.wantOK && err == nil:
				t.Fatal("a package that wants the registry's token was fetched without one")
			case !tc.wantOK:
				errText = err.Error()
				if !strings.Contains(errText, "401") {
					t.Errorf("error %v, want it to give the package host's refusal (401)", err)
				}
				if n, _ := h.Store.Stats(); n != 0 {
					t.Errorf("%d blobs cached after the refused fetch", n)
				}
			}
			seen := o.TarballAuthSeen()
			for _, v := range seen {
				if !tc.use || !tc.configured || v != "Bearer "+token {
					t.Errorf("package host saw Authorization %q", v)
				}
			}
			if want := tc.use && tc.configured; want != (len(seen) > 0) {
				t.Errorf("package host saw Authorization %q, want the registry's token: %v", seen, want)
			}

			v := versions.MustParseVersion("1.0.0")
			var raw json.RawMessage
			if _, err := h.Store.GetMeta(records.ModuleRecordKey(harness.Module, v), &raw); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(raw), token) {
				t.Errorf("the record holds the token: %s", raw)
			}
			if strings.Contains(string(raw), `"registry_credentials":true`) != tc.use {
				t.Errorf("record %s, want registry_credentials %v", raw, tc.use)
			}
			if !strings.Contains(string(raw), `"direct":true`) {
				t.Errorf("record %s, want direct", raw)
			}

			if tc.wantOK {
				// Evicted: fetched again, with the token where the answer
				// asks for it.
				if err := cachetest.DeleteBlob(h.Store, got.SHA256); err != nil {
					t.Fatal(err)
				}
				before := len(o.TarballAuthSeen())
				if _, again, err := h.ReadModule("1.0.0"); err != nil || string(again) != string(body) {
					t.Fatalf("evicted, fetched again: %v", err)
				}
				if tc.use && len(o.TarballAuthSeen()) == before {
					t.Error("the package fetched again after its eviction went without the registry's token")
				}
				// Evicted, and its URL no longer serves (moved; a
				// signature expired): fetched from the origin's location
				// of today, as it asks.
				if err := cachetest.DeleteBlob(h.Store, got.SHA256); err != nil {
					t.Fatal(err)
				}
				o.RemoveTarball(file)
				o.AddTarball("moved-1.0.0", pkg)
				if tc.use {
					o.RequireTarballToken("moved-1.0.0", token)
				}
				o.AddDirectModule("acme", "vpc", "aws", "1.0.0", location("moved-1.0.0"), tc.use)
				if _, again, err := h.ReadModule("1.0.0"); err != nil || string(again) != string(body) {
					t.Fatalf("evicted, relocated: %v", err)
				}
				for _, v := range o.TarballAuthSeen() {
					if !tc.use {
						t.Errorf("package host saw Authorization %q", v)
					}
				}
			}
			for _, secret := range []string{token, signature} {
				if strings.Contains(errText, secret) {
					t.Errorf("the error reveals %s: %s", secret, errText)
				}
				if l := logs.String(); strings.Contains(l, secret) {
					t.Errorf("the log reveals %s:\n%s", secret, l)
				}
			}
		})
	}
}

// An imported module record that asks for the registry's credential
// (registry_credentials, as an export carries it) is the export's word,
// not the origin's: the origin's token goes only to a package URL the
// origin itself gives in its download answer. Once the package is
// evicted, the mirror asks the origin for the version's download answer
// and fetches from the location it gives there, with the token where it
// asks for it; a package host that only the import names never sees the
// token. Where the origin gives the import's own location, the token
// goes there as to any location the origin names.
func TestImportedRecordGetsNoRegistryCredentialOfItsOwn(t *testing.T) {
	const token = "registry-tok-imported-4Rk2"
	files := map[string][]byte{"main.tf": []byte("# private\n")}
	pkg := fakeorigin.TarGz(files)
	for _, tc := range []struct {
		name string
		// origin: what the origin answers for the version: "own" (a
		// package URL of its own, asking for the token), "import" (the
		// import's location, asking for the token), "none" (404).
		origin       string
		wantStranger bool // the import's host sees the token
		wantOK       bool
	}{
		{name: "the origin gives its own package URL", origin: "own", wantOK: true},
		{name: "the origin gives the import's location", origin: "import", wantStranger: true, wantOK: true},
		{name: "the origin does not know the version", origin: "none", wantOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stranger := newStrangerHost(t, pkg)
			logs := &logbuf.Buffer{}
			logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			h := tokenHarness(t, stranger, token, logger)
			o := h.Origin
			o.AddTarball("vpc-1.0.0", pkg)
			o.RequireTarballToken("vpc-1.0.0", token)
			elsewhere := stranger.URL + "/vpc/1.0.0/package"
			switch tc.origin {
			case "own":
				o.AddDirectModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("vpc-1.0.0"), true)
			case "import":
				o.AddDirectModule("acme", "vpc", "aws", "1.0.0", elsewhere, true)
			}
			res, err := h.Engine.Modules().ImportModule(context.Background(), modules.Imported{Module: harness.Module, Version: "1.0.0",
				Location: elsewhere, RegistryCredentials: true, SHA256: sha256Hex(pkg), Open: opener(pkg)})
			if err != nil || res.Present {
				t.Fatalf("import: %+v, %v", res, err)
			}
			if err := cachetest.DeleteBlob(h.Store, sha256Hex(pkg)); err != nil {
				t.Fatal(err)
			}
			_, body, err := h.ReadModule("1.0.0")
			if tc.wantOK && (err != nil || len(body) == 0) {
				t.Errorf("the evicted package was not fetched again: %v", err)
			}
			saw := stranger.authorizations()
			if got := slices.Contains(saw, "Bearer "+token); got != tc.wantStranger {
				t.Errorf("the host the import names saw Authorization %q; want the origin's token %v", saw, tc.wantStranger)
			}
			for _, v := range saw {
				if v != "" && v != "Bearer "+token {
					t.Errorf("the host the import names saw Authorization %q", v)
				}
			}
			if tc.origin == "own" && !slices.Contains(o.TarballAuthSeen(), "Bearer "+token) {
				t.Errorf("the origin's own package URL saw Authorization %q, not its token", o.TarballAuthSeen())
			}
			if l := logs.String(); strings.Contains(l, token) {
				t.Errorf("the log reveals the token:\n%s", l)
			}
		})
	}
}

// A module record of an earlier release that asks for the registry's
// credential does not say the registry's own host answered
// (records.ModuleRecord.RegistryAnswered): such a release took that
// answer from a modules.v1 service on another host too, which chose
// where the token went. Once its package is evicted, the origin is asked
// again, and the package fetched from the location it gives, with the
// token there alone; the host the old record names never sees it. The
// record then says the registry answered, and the next fetch takes it at
// its word.
func TestOldRecordAskingForTheRegistrysCredentialIsAskedAgain(t *testing.T) {
	const token = "registry-tok-old-record-9Qw3"
	pkg := fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("# private\n")})
	stranger := newStrangerHost(t, pkg)
	h := tokenHarness(t, stranger, token, slog.New(slog.DiscardHandler))
	o := h.Origin
	o.AddTarball("vpc-1.0.0", pkg)
	o.RequireTarballToken("vpc-1.0.0", token)
	o.AddDirectModule("acme", "vpc", "aws", "1.0.0", o.TarballURL("vpc-1.0.0"), true)
	if _, body, err := h.ReadModule("1.0.0"); err != nil || len(body) == 0 {
		t.Fatalf("first read: %v", err)
	}
	key := records.ModuleRecordKey(harness.Module, versions.MustParseVersion("1.0.0"))
	var rec records.ModuleRecord
	if _, err := h.Store.GetMeta(key, &rec); err != nil || !rec.RegistryCredentials || !rec.RegistryAnswered {
		t.Fatalf("the record of a direct answer asking for the credential: %+v, %v; want it said by the registry's host", rec, err)
	}
	// As an earlier release kept it, from a modules.v1 service on
	// another host that named a package host of its own.
	elsewhere := stranger.URL + "/vpc/1.0.0/package"
	rec.Location, rec.Package, rec.RegistryAnswered = elsewhere, elsewhere, false
	if err := h.Store.PutMeta(key, rec); err != nil {
		t.Fatal(err)
	}
	if err := cachetest.DeleteBlob(h.Store, rec.SHA256); err != nil {
		t.Fatal(err)
	}
	if _, body, err := h.ReadModule("1.0.0"); err != nil || len(body) == 0 {
		t.Fatalf("the evicted package was not fetched again: %v", err)
	}
	if saw := stranger.authorizations(); len(saw) > 0 {
		t.Errorf("the host the old record names was asked (Authorization %q); want the origin's location alone", saw)
	}
	if !slices.Contains(o.TarballAuthSeen(), "Bearer "+token) {
		t.Errorf("the origin's own package URL saw Authorization %q, not its token", o.TarballAuthSeen())
	}
	var now records.ModuleRecord
	if _, err := h.Store.GetMeta(key, &now); err != nil || now.Location != o.TarballURL("vpc-1.0.0") || !now.RegistryAnswered {
		t.Errorf("the record after the fetch: %+v, %v; want the origin's location, said by the registry's host", now, err)
	}
}

// strangerHost is a package host the origin does not name, which serves
// pkg to anyone and records the Authorization each request carried.
type strangerHost struct {
	*httptest.Server
	mu  sync.Mutex
	saw []string
}

func newStrangerHost(t *testing.T, pkg []byte) *strangerHost {
	st := &strangerHost{}
	st.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st.mu.Lock()
		st.saw = append(st.saw, r.Header.Get("Authorization"))
		st.mu.Unlock()
		w.Write(pkg)
	}))
	t.Cleanup(st.Close)
	return st
}

// authorizations are the Authorization headers its requests carried.
func (st *strangerHost) authorizations() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.saw)
}

// tokenHarness is an engine whose origin credential for the origin host
// is token, which trusts st's certificate too, logging to logger.
func tokenHarness(t *testing.T, st *strangerHost, token string, logger *slog.Logger) *harness.Harness {
	return harness.New(t, harness.Options{Config: harness.Config{Logger: logger, ScratchDir: t.TempDir()},
		OriginConfig: func(cfg *discovery.Config) {
			cfg.Logger = logger
			pool := cfg.RootCAs.Clone()
			pool.AddCert(st.Certificate())
			cfg.RootCAs = pool
			cfg.Credentials = func(h svchost.Hostname) string {
				if h == harness.OriginHost {
					return token
				}
				return ""
			}
		}})
}
