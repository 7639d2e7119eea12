package discovery

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/logbuf"
)

// TestOriginTextInErrorsBounded: what an origin's answer puts into an
// operation's error (a platform it names, a URL it gives) is kept to
// MaxErrorText bytes of the error's text, whatever its length, where a
// package answer naming an os of a megabyte made an error of a megabyte,
// which the mirror logged whole, sent to the client in its 502, and kept
// as the origin's last error on the status page. The text kept is valid
// UTF-8, and says that it was cut; errors.As still finds the OriginError.
func TestOriginTextInErrorsBounded(t *testing.T) {
	const path = "/v1/providers/hashicorp/random/2.0.0/download/linux/amd64"
	huge := strings.Repeat("é", 512<<10) // a megabyte
	for name, body := range map[string]string{
		"platform":     packageJSON(huge, "amd64", "a.zip", "SUMS", "SUMS.sig"), // its os
		"download_url": packageJSON("linux", "amd64", "http://x.example/"+huge+".zip", "SUMS", "SUMS.sig"),
	} {
		t.Run(name, func(t *testing.T) {
			s := newTestServer(t, registry(map[string]http.HandlerFunc{path: func(w http.ResponseWriter, r *http.Request) {
				writeJSON(w, body)
			}}))
			var logs logbuf.Buffer
			c := newTestClient(t, s, func(cfg *Config) {
				cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			})
			_, err := c.Package(context.Background(), testProvider(s), "2.0.0", addrs.Platform{OS: "linux", Arch: "amd64"})
			wantOriginError(t, err, OpPackage, 0)
			msg := err.Error()
			if len(msg) > MaxErrorText {
				t.Fatalf("error of %d bytes, more than %d: %.200s...", len(msg), MaxErrorText, msg)
			}
			if !strings.Contains(msg, name) || !strings.Contains(msg, "bytes more") {
				t.Errorf("error does not name %s and say it was cut: %.300s", name, msg)
			}
			if !utf8.ValidString(msg) {
				t.Errorf("error cut inside a character")
			}
			if n := len(logs.String()); n > 4*MaxErrorText {
				t.Errorf("log of %d bytes", n)
			}
		})
	}
}
