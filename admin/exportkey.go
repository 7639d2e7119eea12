package admin

// The key that signs the serving process's exports, for `tfmirror
// export-key`:
//
//	POST /v1/export-key {} -> ExportKeyInfo
//
// Run as root on the data directory of a serve running as another user,
// export-key reads no file of that user's: the serve answers with the
// key it signs with, which is also the one its --export-key names when
// the data directory's is not.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// ExportKeyRequest is the (empty) request of ExportKey.
type ExportKeyRequest struct{}

// ExportKeyInfo is the public part of the key that signs exports.
type ExportKeyInfo struct {
	Fingerprint string `json:"fingerprint"`
	// PublicKey is the ASCII-armored OpenPGP public key.
	PublicKey string `json:"public_key"`
	// Where is the file the key is read from (Options.ExportKeyFile).
	Where string `json:"where,omitempty"`
}

// ExportKey returns the key that signs exports (Options.ExportKey's,
// made in the data directory if it has none yet and no other is
// configured), its private part left out.
func (a *API) ExportKey(context.Context) (ExportKeyInfo, error) {
	if a.opts.ExportKey == nil {
		return ExportKeyInfo{}, fmt.Errorf("no export key is configured to sign exports")
	}
	key, err := a.opts.ExportKey()
	if err != nil {
		return ExportKeyInfo{}, fmt.Errorf("export key: %w", err)
	}
	var pub strings.Builder
	if err := key.WritePublic(&pub); err != nil {
		return ExportKeyInfo{}, fmt.Errorf("export key: %w", err)
	}
	return ExportKeyInfo{Fingerprint: key.Fingerprint(), PublicKey: pub.String(), Where: a.opts.ExportKeyFile}, nil
}

// exportKeyRoutes adds the export key operation to mux.
func (a *API) exportKeyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/export-key", handle(a, slog.LevelDebug, "admin export key read", func(ctx context.Context, _ ExportKeyRequest) (any, []any, error) {
		res, err := a.ExportKey(ctx)
		return res, []any{"fingerprint", res.Fingerprint}, err
	}))
}

// ExportKey is API.ExportKey through the socket.
func (c *Client) ExportKey(ctx context.Context) (ExportKeyInfo, error) {
	var out ExportKeyInfo
	return out, earlier(c.call(ctx, "/v1/export-key", ExportKeyRequest{}, &out), "tell its export key")
}
