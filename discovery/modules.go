package discovery

// The module registry protocol (modules.v1) of origin registries, and the
// transport to the source hosts that a module version's download location
// names (Git hosts, archive hosts).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
)

// ErrNoModuleService means the origin's service discovery lists no
// modules.v1 service.
var ErrNoModuleService = errors.New("host does not provide a module registry (no modules.v1 service)")

// moduleProvider is m as a Provider of its host, for the requests and
// errors that share the provider side's machinery (Provider.Type is
// NAME/SYSTEM).
func moduleProvider(m addrs.Module) addrs.Provider {
	return addrs.Provider{Hostname: m.Hostname, Namespace: m.Namespace, Type: m.Name + "/" + m.System}
}

// moduleRegistry speaks the module registry protocol (modules.v1) to
// origins.
type moduleRegistry struct {
	tr        *transport
	discovery *discoverer
}

// moduleVersionsBody is a module registry's versions answer.
type moduleVersionsBody struct {
	Modules []struct {
		Versions []struct {
			Version string `json:"version"`
		} `json:"versions"`
	} `json:"modules"`
}

// ModuleVersions lists the versions of m that its origin registry offers,
// in the origin's order. Errors: ErrHostNotAllowed (wrapped); ErrNotFound
// (wrapped) when the origin answers 404; ErrNoModuleService; *OriginError
// (Op "module_versions" or "discovery"); the caller's context error.
func (c *Client) ModuleVersions(ctx context.Context, m addrs.Module) ([]string, error) {
	return c.modules.versions(ctx, m)
}

func (mr *moduleRegistry) versions(ctx context.Context, m addrs.Module) (_ []string, err error) {
	if err := mr.tr.checkHost(m.Hostname); err != nil {
		return nil, err
	}
	defer mr.tr.observe(m.Hostname, OpModuleVersions, time.Now(), &err)
	u, err := mr.moduleURL(ctx, m, "versions")
	if err != nil {
		return nil, err
	}
	r := request{p: moduleProvider(m), op: OpModuleVersions, u: u, accept: "application/json"}
	data, r, err := mr.tr.getJSON(ctx, r, "module "+m.String())
	if err != nil {
		return nil, err
	}
	var body moduleVersionsBody
	if err := decodeObject(data, &body); err != nil {
		return nil, originError(r, 0, err)
	}
	if len(body.Modules) == 0 {
		return nil, originError(r, 0, errors.New(`response has no "modules"`))
	}
	out := []string{}
	for _, v := range body.Modules[0].Versions {
		if v.Version != "" {
			out = append(out, v.Version)
		}
	}
	return out, nil
}

// maxLocationBytes limits a download answer's body and location.
const maxLocationBytes = 64 << 10

// ModuleDownload is a module version's download answer: where its
// package is, and how it is to be fetched.
type ModuleDownload struct {
	// Location is where the package is. Without Direct, a location in
	// go-getter syntax (see ModuleLocation); with it, the package's own
	// URL, absolute.
	Location string
	// Direct says the answer was OpenTofu's direct form, a JSON body
	// with "use_registry_credentials" true or false: the registry
	// serves the package itself (or hands out a URL that needs no
	// credential, as a pre-signed one) at Location, a URL OpenTofu
	// downloads as it is (no go-getter syntax: no //SUBDIR, no
	// ?archive=; the archive's format is what its bytes are;
	// modsource.ParseDirect).
	Direct bool
	// RegistryCredentials says the direct form's
	// "use_registry_credentials" was true: Location is fetched with the
	// registry host's credential, which a fetch sends through
	// WithRegistryCredential. It implies Direct.
	RegistryCredentials bool
}

// ModuleLocation returns where the package of version of m is, as the
// origin's download answer gives it: the X-Terraform-Get header of a 204
// or 200 answer, or the "location" of a 200 answer's JSON body (as
// OpenTofu reads it). The location is go-getter syntax; one that starts
// with "/", "./" or "../" is resolved against the download URL asked
// (not one a redirect led to), as the clients do. A 200 answer that
// gives both, resolved so, naming two locations is refused: Terraform
// would install the header's, OpenTofu the body's. A 200 answer whose
// JSON body says "use_registry_credentials": true is OpenTofu's direct
// form (ModuleDownload.RegistryCredentials): its "location" is the
// package's URL, whatever the header says, and any relative one is
// resolved against the download URL asked, as OpenTofu resolves it. Such
// an answer counts only from the download URL's own host, and only where
// that is the registry's own host (the one its token goes to): one that
// a redirect brought from another host, or that a modules.v1 service on
// another host gave, is refused. With
// "use_registry_credentials": false the answer is the direct form too
// (ModuleDownload.Direct: a package URL, fetched without credentials), as
// OpenTofu reads it; an answer without it, or with null, is read as
// before. Errors: those of ModuleVersions, Op "module_location".
func (c *Client) ModuleLocation(ctx context.Context, m addrs.Module, version string) (ModuleDownload, error) {
	return c.modules.location(ctx, m, version)
}

func (mr *moduleRegistry) location(ctx context.Context, m addrs.Module, version string) (_ ModuleDownload, err error) {
	if err := mr.tr.checkHost(m.Hostname); err != nil {
		return ModuleDownload{}, err
	}
	defer mr.tr.observe(m.Hostname, OpModuleLocation, time.Now(), &err)
	u, err := mr.moduleURL(ctx, m, version, "download")
	if err != nil {
		return ModuleDownload{}, err
	}
	r := request{p: moduleProvider(m), op: OpModuleLocation, u: u, accept: "application/json"}
	resp, reqCtx, end, err := mr.tr.send(ctx, r, mr.tr.requestContext(ctx))
	if err != nil {
		return ModuleDownload{}, err
	}
	defer end()
	defer resp.Body.Close()
	r.u = resp.Request.URL
	switch resp.StatusCode {
	case http.StatusOK, http.StatusNoContent:
	case http.StatusNotFound:
		drain(resp.Body)
		return ModuleDownload{}, fmt.Errorf("%w: module %s version %s", ErrNotFound, m, version)
	default:
		drain(resp.Body)
		return ModuleDownload{}, originError(r, resp.StatusCode, statusError(resp.StatusCode))
	}
	data, err := mr.tr.readBody(ctx, reqCtx, r, resp.Body, maxLocationBytes)
	if err != nil {
		return ModuleDownload{}, err
	}
	var body struct {
		Location string `json:"location"`
		// Absent or null: the answer is not OpenTofu's direct form.
		UseRegistryCredentials *bool `json:"use_registry_credentials"`
	}
	var bodyErr error
	if resp.StatusCode == http.StatusOK {
		bodyErr = decodeObject(data, &body)
	}
	out := ModuleDownload{Location: resp.Header.Get("X-Terraform-Get")}
	if bodyErr == nil && body.UseRegistryCredentials != nil {
		withCredentials := *body.UseRegistryCredentials
		answered := hostKey(resp.Request.URL)
		switch {
		case withCredentials && answered != hostKey(u):
			// Not the registry's word: a redirect led to another host,
			// which the registry's token never reached and may not
			// send where it likes.
			return ModuleDownload{}, originError(r, 0, fmt.Errorf("download answer asks for the registry's credential, but comes from %s, where a redirect led, not from the host asked; refused", answered))
		case withCredentials && answered != string(m.Hostname):
			// Not the registry's word either: its discovery document
			// places modules.v1 on another host, which is asked without
			// the registry's token (transport.token) and may not send
			// it where it likes.
			return ModuleDownload{}, originError(r, 0, fmt.Errorf("download answer asks for the registry's credential, but comes from %s, the modules.v1 service's host, not from the registry's own host, which alone its credential goes to; refused", answered))
		}
		out = ModuleDownload{Location: body.Location, Direct: true, RegistryCredentials: withCredentials}
	} else if out.Location == "" && resp.StatusCode == http.StatusOK {
		if bodyErr != nil {
			return ModuleDownload{}, originError(r, 0, bodyErr)
		}
		out.Location = body.Location
	} else if bodyErr == nil && body.Location != "" && resp.StatusCode == http.StatusOK {
		// Both given: Terraform reads the header, OpenTofu the body.
		// One package serves both, so they must name the same one,
		// each resolved as the clients resolve it.
		header, hErr := resolveGetterLocation(u, out.Location)
		inBody, bErr := resolveGetterLocation(u, body.Location)
		if hErr == nil && (bErr != nil || header != inBody) {
			return ModuleDownload{}, originError(r, 0, fmt.Errorf("download answer names two locations, %q in X-Terraform-Get (which Terraform reads) and %q in its JSON body (which OpenTofu reads); refused",
				redact.Location(out.Location), redact.Location(body.Location)))
		}
	}
	location := out.Location
	if location == "" {
		return ModuleDownload{}, originError(r, 0, errors.New("download answer names no location (no X-Terraform-Get, no JSON location)"))
	}
	if len(location) > maxLocationBytes || strings.ContainsAny(location, "\r\n\x00") {
		return ModuleDownload{}, originError(r, 0, errors.New("download answer's location is malformed"))
	}
	if out.Direct {
		// A URL, not go-getter syntax: any relative reference is
		// resolved, as OpenTofu resolves it.
		ref, err := url.Parse(location)
		if err != nil {
			return ModuleDownload{}, originError(r, 0, fmt.Errorf("package URL %q does not parse", redact.Location(location)))
		}
		location = u.ResolveReference(ref).String()
	} else if location, err = resolveGetterLocation(u, location); err != nil {
		return ModuleDownload{}, originError(r, 0, err)
	}
	out.Location = location
	mr.tr.log.LogAttrs(ctx, slog.LevelDebug, "module location", slog.String("module", m.String()),
		slog.String("version", version), slog.String("location", redact.Location(location)),
		slog.Bool("direct", out.Direct), slog.Bool("registry_credentials", out.RegistryCredentials))
	return out, nil
}

// resolveGetterLocation resolves location, go-getter syntax, against the
// download URL asked (not one a redirect led to), as the clients resolve
// it: only one that starts with "/", "./" or "../" is relative.
func resolveGetterLocation(asked *url.URL, location string) (string, error) {
	if !strings.HasPrefix(location, "/") && !strings.HasPrefix(location, "./") && !strings.HasPrefix(location, "../") {
		return location, nil
	}
	ref, err := url.Parse(location)
	if err != nil {
		return "", fmt.Errorf("relative location %q does not parse", redact.Location(location))
	}
	return asked.ResolveReference(ref).String(), nil
}

// moduleURL resolves path segments, each escaped, against the modules.v1
// base URL of m's host.
func (mr *moduleRegistry) moduleURL(ctx context.Context, m addrs.Module, segments ...string) (*url.URL, error) {
	if _, err := mr.discovery.discover(ctx, m.Hostname); err != nil && !errors.Is(err, ErrNoProviderService) {
		return nil, err
	}
	base := mr.discovery.knownModulesURL(m.Hostname)
	if base == nil {
		return nil, fmt.Errorf("%s: %w", m.Hostname, ErrNoModuleService)
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	path := m.OriginPath() // as the client gave it: a registry may match it with its case
	all := append(path[:], segments...)
	esc := make([]string, len(all))
	for i, s := range all {
		if s == "" || s == "." || s == ".." {
			return nil, fmt.Errorf("discovery: invalid path segment %q for module %s", s, m)
		}
		esc[i] = url.PathEscape(s)
	}
	ref, err := url.Parse("./" + strings.Join(esc, "/"))
	if err != nil {
		return nil, fmt.Errorf("discovery: building module URL for %s: %w", m, err)
	}
	return base.ResolveReference(ref), nil
}

// OpenSource starts downloading a module package (an archive) from
// rawURL, a source host that the download location of a module of origin
// host named. It is OpenArchive with Op "module_source", and anonymous:
// the origin's token is not sent, not even to the origin host itself,
// unless ctx asks for it for rawURL's host (WithRegistryCredential: a
// package the origin's download answer said to fetch with its
// credential); else only a SourceCredential that ctx carries
// (WithSourceCredential) is, to its own host. A rawURL on the mirror's
// own public host (Config.MirrorHost) is refused before any request
// (modsource.ErrUnsupported).
func (c *Client) OpenSource(ctx context.Context, origin svchost.Hostname, rawURL string) (io.ReadCloser, int64, error) {
	return c.downloads.open(ctx, addrs.Provider{Hostname: origin}, OpModuleSource, rawURL, true)
}

// SourceHTTPClient returns an HTTP client for the source hosts that the
// download locations of modules of origin host name, for protocols that
// need more than one GET (Git's smart HTTP): it goes through the network
// policy of every origin request (https only, the address guard, the
// outbound proxy, at most 5 redirects), sends no credentials but the
// SourceCredential a request's context carries, to its host only, and bounds
// every response's headers by 1 MiB and its body by the idle timeout, the
// low-speed limit and Config.MaxArchiveBytes (errors are *OriginError, Op "module_source"),
// and refuses a hop to the mirror's own public host (Config.MirrorHost)
// before it is sent (modsource.ErrUnsupported).
// Responses are observed as Op "module_source" of origin.
func (c *Client) SourceHTTPClient(origin svchost.Hostname) *http.Client {
	return &http.Client{Transport: &sourceTransport{dl: c.downloads, origin: origin}, CheckRedirect: checkRedirect}
}

// sourceTransport is the transport of SourceHTTPClient: each hop of a
// request goes through the network policy with the limits of a download.
type sourceTransport struct {
	dl     *downloads
	origin svchost.Hostname
}

func (t *sourceTransport) RoundTrip(req *http.Request) (_ *http.Response, err error) {
	dl := t.dl
	if err := dl.tr.checkHost(t.origin); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	if err := dl.tr.refuseMirrorHost(req.URL); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	start := time.Now()
	r := request{p: addrs.Provider{Hostname: t.origin}, op: OpModuleSource, u: req.URL, anonymous: true}
	ctx, cancel := context.WithCancelCause(req.Context())
	idle := &timeoutError{msg: fmt.Sprintf("no data received for %s", dl.idle)}
	timer := time.AfterFunc(dl.idle, func() { cancel(idle) })
	out := req.Clone(ctx)
	out.Header.Del("Authorization")
	// Each hop is decided here: a credential the caller tied to this
	// fetch goes to its own host only, whatever the redirects.
	if a := sourceAuthorization(req.Context(), req.URL, true); a != "" {
		out.Header.Set("Authorization", a)
		redact.Sent(req.Context(), a) // for what quotes the answer (modsource.Fetch)
	}
	resp, err := dl.tr.rt.RoundTrip(out)
	timer.Stop()
	if err != nil {
		cancel(nil)
		if req.Context().Err() != nil {
			return nil, req.Context().Err()
		}
		err = originError(r, 0, causeOf(ctx, stripURL(err)))
		dl.tr.observe(t.origin, OpModuleSource, start, &err)
		return nil, err
	}
	if resp.ContentLength > dl.maxArchiveBytes {
		drain(resp.Body)
		cancel(nil)
		err = originError(r, 0, fmt.Errorf("%w: Content-Length %d exceeds %d bytes (%s)", ErrTooLarge, resp.ContentLength, dl.maxArchiveBytes, maxArchiveSetting))
		dl.tr.observe(t.origin, OpModuleSource, start, &err)
		return nil, err
	}
	resp.Body = &archiveBody{
		speed:     dl.startSpeedCheck(cancel),
		body:      resp.Body,
		timer:     timer,
		idle:      dl.idle,
		max:       dl.maxArchiveBytes,
		cancel:    cancel,
		callerErr: req.Context().Err,
		cause:     func() error { return context.Cause(ctx) },
		wrap:      func(err error) error { return originError(r, 0, err) },
		done: func(n int64, err error) {
			dl.tr.observer.OriginBytes(string(t.origin), n)
			if errors.Is(err, errAbandoned) {
				// Git's smart HTTP closes a response once it has read what
				// it needs, before the body's end: the reader's choice,
				// no failure of the host.
				err = nil
			}
			if err == nil && resp.StatusCode >= 400 {
				err = originError(r, resp.StatusCode, statusError(resp.StatusCode))
			}
			dl.tr.observe(t.origin, OpModuleSource, start, &err)
		},
	}
	return resp, nil
}
