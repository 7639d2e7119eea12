package discovery

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
)

const echoedToken = "s3cr3t-echoed-token-0123456789"

// The credential a module source request sends (as a bearer token to an
// archive, as basic authentication to Git) is recorded on a context that
// records (redact.Sending), so that what quotes the source host's
// answers (modsource.Fetch) can leave it out.
func TestSourceCredentialSentIsRecorded(t *testing.T) {
	src := newTestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "x") }))
	c := newTestClient(t, src, nil)
	for name, send := range map[string]func(ctx context.Context) error{
		"archive": func(ctx context.Context) error {
			body, _, err := c.OpenSource(ctx, src.host, src.url("/a.tar.gz"))
			if err == nil {
				body.Close()
			}
			return err
		},
		"git": func(ctx context.Context) error {
			resp, err := c.SourceHTTPClient(src.host).Do(mustRequest(t, ctx, src.url("/r.git/info/refs")))
			if err == nil {
				resp.Body.Close()
			}
			return err
		},
	} {
		ctx := redact.Sending(WithSourceCredential(context.Background(), SourceCredential{Host: string(src.host), Token: echoedToken}))
		if err := send(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := redact.SentError(ctx, errors.New("refused: "+echoedToken)).Error(); got != "refused: REDACTED" {
			t.Errorf("%s: the credential sent is not recorded: %q", name, got)
		}
	}
}

// An origin's answer that echoes the token the mirror sent it, in what
// an error quotes (a download location that does not parse), fails with
// an error without the token.
func TestOriginAnswerEchoingTokenNotInError(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, `{"modules.v1":"/v1/modules/"}`)
	})
	mux.HandleFunc("GET /v1/modules/acme/vpc/aws/1.0.0/download", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Terraform-Get", "/%zz "+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		w.WriteHeader(http.StatusNoContent)
	})
	s := newTestServer(t, mux)
	c := newTestClient(t, s, func(cfg *Config) {
		cfg.Credentials = func(svchost.Hostname) string { return echoedToken }
	})
	m := addrs.Module{Hostname: s.host, Namespace: "acme", Name: "vpc", System: "aws"}
	_, err := c.ModuleLocation(context.Background(), m, "1.0.0")
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), echoedToken) {
		t.Errorf("the error carries the token sent: %v", err)
	}
	var oe *OriginError
	if !errors.As(err, &oe) {
		t.Errorf("not an *OriginError: %v", err)
	}
}
