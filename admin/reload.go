package admin

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// ReloadRequest asks the serving process to read its configuration file
// (its client tokens file, the files of the keys imports trust, and its
// TLS certificate's files) again, as on SIGHUP.
type ReloadRequest struct{}

// Reloaded is what a reload put in force.
type Reloaded struct {
	// File is the configuration file read, its absolute path as the
	// serving process finds it; "" when the process has none.
	File string `json:"file,omitempty"`
	// Settings are the settings whose value changed in the file: put in
	// force, or, with Restart, kept at their value in force until a
	// restart.
	Settings []SettingChange `json:"settings"`
	// Parts are the file's parts that are not settings (the policy) and
	// changed: their lines (the policy's rules, as tfmirror config check
	// lists them) added and removed.
	Parts []PartChange `json:"parts"`
	// Warnings are the configuration file's warnings, each with its file
	// and line (a value a flag or the environment overrides).
	Warnings []string `json:"warnings,omitempty"`
	// Tokens is how many client tokens are in force after the tokens file
	// was read again; absent without client authentication.
	Tokens *int `json:"tokens,omitempty"`
	// TrustedKeys is how many keys imports trust (trusted export keys and
	// publisher keys) after their files were read again; absent when
	// none are configured.
	TrustedKeys *int `json:"trusted_keys,omitempty"`
	// Certificate is when the operator's TLS certificate (--tls-cert) in
	// force expires, once its files were read again and not refused;
	// CertificateNew, that they held a new one, put in force. Absent
	// without one, and when the files were refused.
	Certificate    *time.Time `json:"certificate_expires,omitempty"`
	CertificateNew bool       `json:"certificate_new,omitempty"`
	// OriginCAs are the subjects of the CAs origin_ca_file's files add to
	// the system roots for TLS to origins, once the files were read again
	// and not refused; OriginCAsNew, that they held new ones, put in
	// force. Absent without such files, and when they were refused.
	OriginCAs    []string `json:"origin_cas,omitempty"`
	OriginCAsNew bool     `json:"origin_cas_new,omitempty"`
}

// SettingChange is one setting a reload found changed; Old and New are
// in the flag's syntax, a secret's redacted.
type SettingChange struct {
	Name      string `json:"name"`
	Attribute string `json:"attribute"`
	Old       string `json:"old"`
	New       string `json:"new"`
	// Restart says the new value takes effect only after a restart; Old
	// stays in force.
	Restart bool `json:"restart,omitempty"`
}

// PartChange is what a reload changed of one part of the file.
type PartChange struct {
	Name    string   `json:"name"`
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
}

// LoggedError is an error of Options.Reload that the serving process
// has logged already (each file it refused, and why): the request's line
// of the audit log then names the caller and the status at the route's
// level, without the error again.
type LoggedError struct{ Err error }

func (e *LoggedError) Error() string { return e.Err.Error() }
func (e *LoggedError) Unwrap() error { return e.Err }

// Reload is Options.Reload: the serving process reads its configuration
// again. An error refuses the file whole; the configuration in force
// stays.
func (a *API) Reload(ctx context.Context) (Reloaded, error) {
	if a.opts.Reload == nil {
		return Reloaded{}, &httperr.RequestError{Status: http.StatusConflict, Msg: "this tfmirror has no configuration to reload (it does not serve)"}
	}
	return a.opts.Reload(ctx)
}

// reloadRoutes adds POST /v1/reload (ReloadRequest -> Reloaded).
func (a *API) reloadRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/reload", handle(a, slog.LevelInfo, "admin reload", func(ctx context.Context, _ ReloadRequest) (any, []any, error) {
		res, err := a.Reload(ctx)
		attrs := []any{"file", res.File}
		if err == nil {
			attrs = append(attrs, "settings_changed", len(res.Settings), "parts_changed", len(res.Parts))
		}
		return res, attrs, err
	}))
}

// Reload is API.Reload through the socket.
func (c *Client) Reload(ctx context.Context) (Reloaded, error) {
	var out Reloaded
	return out, earlier(c.call(ctx, "/v1/reload", ReloadRequest{}, &out), "reload through the admin socket")
}
