package modules_test

import (
	"encoding/base64"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/discovery/modsource"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest/harness"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// staticCredentials ties one credential to origins.
type staticCredentials struct {
	host    string
	cred    discovery.SourceCredential
	origins []svchost.Hostname
}

func (c *staticCredentials) SourceCredential(origin svchost.Hostname, host string) (discovery.SourceCredential, bool) {
	for _, o := range c.origins {
		if o == origin && host == c.host {
			return c.cred, true
		}
	}
	return discovery.SourceCredential{}, false
}

// Credentials for a source host are used for the modules of the origins
// they are tied to, and only those: a module of another origin naming the
// same private repository is fetched anonymously, fails, caches nothing,
// and the Git host never sees the credential. Without any configuration
// every source is fetched anonymously. The secret is in no log line and
// no error.
func TestModuleSourceCredentialsTiedToOrigins(t *testing.T) {
	needGit(t)
	const user, secret = "mirror-bot", "s3cret-pass-XYZ"
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+secret))
	other := svchost.Hostname("registry.other.example")
	for _, tc := range []struct {
		name    string
		tiedTo  []svchost.Hostname // nil: no configuration at all
		wantOK  bool
		wantHdr bool // the Git host saw the credential
	}{
		{name: "tied to the module's origin", tiedTo: []svchost.Hostname{harness.OriginHost}, wantOK: true, wantHdr: true},
		{name: "tied to another origin", tiedTo: []svchost.Hostname{other}},
		{name: "no configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logbuf.Buffer{}
			cfg := harness.Config{
				Logger:         slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				AllowedOrigins: []string{harness.OriginHost, string(other)},
			}
			creds := &staticCredentials{cred: discovery.SourceCredential{Username: user, Password: secret}, origins: tc.tiedTo}
			if tc.tiedTo != nil {
				cfg.ModuleSourceCredentials = creds
			}
			h := harness.New(t, harness.Options{Config: cfg})
			o := h.Origin
			u, err := url.Parse(o.GitURL("private"))
			if err != nil {
				t.Fatal(err)
			}
			creds.host = strings.ToLower(u.Host) // read only once the fetch starts
			commit, err := o.AddGitRepo("private", map[string][]byte{"main.tf": []byte("# private\n")}, "v1.0.0")
			if err != nil {
				t.Fatal(err)
			}
			o.RequireGitAuth("private", user, secret)
			o.AddModule("acme", "vpc", "aws", "1.0.0", "git::"+o.GitURL("private")+"?ref=v1.0.0")

			pkg, body, err := h.ReadModule("1.0.0")
			switch {
			case tc.wantOK && err != nil:
				t.Fatalf("private module of a tied Origin: %v", err)
			case tc.wantOK && (pkg.Record.Commit != commit || len(body) == 0):
				t.Errorf("record %+v, %d bytes", pkg.Record, len(body))
			case !tc.wantOK && err == nil:
				t.Fatal("private repository fetched for an origin its credential is not tied to")
			case !tc.wantOK:
				if !errors.Is(err, modsource.ErrSource) || !strings.Contains(err.Error(), "needs credentials") {
					t.Errorf("error %v, want it to say the repository needs credentials", err)
				}
				if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), basic) {
					t.Errorf("error reveals the secret: %v", err)
				}
				if n, _ := h.Store.Stats(); n != 0 {
					t.Errorf("%d blobs cached after the refused fetch", n)
				}
			}
			seen := o.GitAuthSeen()
			if got := len(seen) > 0; got != tc.wantHdr {
				t.Errorf("Git host saw Authorization %q, want credentials: %v", seen, tc.wantHdr)
			}
			for _, v := range seen {
				if v != basic {
					t.Errorf("Git host saw Authorization %q", v)
				}
			}
			if l := logs.String(); strings.Contains(l, secret) || strings.Contains(l, basic[len("Basic "):]) {
				t.Errorf("the log reveals the secret:\n%s", l)
			}
		})
	}
}
