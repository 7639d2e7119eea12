package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/policy"
	"github.com/tfmirror/tfmirror/v2/proxy"
	"github.com/tfmirror/tfmirror/v2/proxy/httperr"
)

// configHooks are the readers of the configuration file's parts that are
// not settings of the table (its policy block), checked at start, on
// SIGHUP and by config check, and put in force on m. m is nil in config
// check, which never calls what they return.
func configHooks(m *server) []settings.Hook {
	var set func(*policy.Policy)
	if m != nil {
		set = func(p *policy.Policy) {
			m.engine.SetPolicy(p)
			m.log.Info("package policy in force", "rules", p.Len())
		}
	}
	return []settings.Hook{policyHook(set)}
}

// liveSettings ready the new value of each setting the table marks Live
// for c, and return what puts it in force on m from the next request on,
// and a warning for the operator ("" for none); an error (a certificate
// a new public URL needs that cannot be issued) refuses the reload, with
// nothing put in force.
var liveSettings = map[string]func(m *server, c settings.Config, level *slog.LevelVar) (apply func(), warning string, err error){
	"log-level": func(m *server, c settings.Config, level *slog.LevelVar) (func(), string, error) {
		lvl, err := settings.ParseLevel(c.LogLevel) // validated
		return func() { level.Set(lvl) }, "", err
	},
	"public-url": func(m *server, c settings.Config, _ *slog.LevelVar) (func(), string, error) {
		// Clients are told the new URL only with a certificate that
		// names its host.
		useCert, err := m.reissueCert(c)
		if err != nil {
			return nil, "", fmt.Errorf("--public-url %q: %w", c.PublicURL, err)
		}
		return func() {
			useCert()
			m.proxy.SetPublicURL(c.PublicURL)
			m.mirrorHost.set(c.PublicURL)
		}, m.certMisses(c.PublicURL), nil
	},
	"not-found-ttl": func(m *server, c settings.Config, _ *slog.LevelVar) (func(), string, error) {
		return func() { m.engine.NotFound().SetTTL(c.NotFoundTTL) }, "", nil
	},
	"not-found-max-entries": func(m *server, c settings.Config, _ *slog.LevelVar) (func(), string, error) {
		return func() { m.engine.NotFound().SetMaxEntries(c.NotFoundMaxEntries) }, "", nil
	},
	"origin-ca-file": func(m *server, c settings.Config, _ *slog.LevelVar) (func(), string, error) {
		if m.engineParts == nil { // a server without an engine (tests)
			return func() {}, "", nil
		}
		apply, err := m.originCAs.use(c.OriginCAFile)
		return apply, "", err
	},
}

// useConfig makes e the configuration in force on m, which the status
// page shows, and reload the way to read it again on SIGHUP; level is
// the log's level, which a reload may change. It logs the file's
// warnings, and fails when a hook refuses the file.
func (m *server) useConfig(e *settings.Effective, reload func() (*settings.Effective, error), level *slog.LevelVar) error {
	if e.File != nil {
		for _, w := range e.File.Warnings {
			m.log.Warn("configuration file: "+settings.FormatDiagnostic(w), "file", e.File.Path)
		}
	}
	r, err := settings.NewReloader(e, settings.ReloaderConfig{
		Load: reload,
		Apply: func(_, next *settings.Effective, changed []*settings.Setting) ([]string, error) {
			// Every one readied before any is put in force.
			var applies []func()
			var warnings []string
			for _, s := range changed {
				apply, warning, err := liveSettings[s.Name](m, next.Config, level)
				if err != nil {
					return nil, err
				}
				applies = append(applies, apply)
				if warning != "" {
					warnings = append(warnings, warning)
				}
			}
			for _, apply := range applies {
				apply()
			}
			return warnings, nil
		},
		Hooks:   configHooks(m),
		Metrics: m.metrics,
		Logger:  m.log,
	})
	if err != nil {
		return err
	}
	m.conf.Store(r)
	return nil
}

// configuration is the configuration in force, for the status page; nil
// before useConfig.
func (m *server) configuration() *proxy.Configuration {
	r := m.conf.Load()
	if r == nil {
		return nil
	}
	out := configurationOf(r.Current())
	out.LastReload = m.lastReload.Load()
	return out
}

func configurationOf(e *settings.Effective) *proxy.Configuration {
	out := &proxy.Configuration{}
	if e.File != nil {
		out.File = e.File.Path
	}
	for _, v := range e.Values() {
		out.Settings = append(out.Settings, proxy.Setting{Name: v.Setting.Name, Attribute: v.Setting.Attribute(),
			Value: v.Value, Source: string(v.Source), RestartPending: v.HasPending, Pending: v.Pending})
	}
	return out
}

// reloadsFiles says which files besides the client tokens file a reload
// reads again: the configuration file, when there is one; the files of
// the keys imports trust, when there are.
func (m *server) reloadsFiles() (config, trust bool) {
	conf := m.conf.Load()
	return conf != nil && conf.Current().File != nil, len(m.cfg.TrustedExportKeys) > 0 || len(m.cfg.TrustedPublisherKeys) > 0
}

// hangupIgnored is what a SIGHUP to a serve with nothing to reload logs.
const hangupIgnored = "SIGHUP ignored: nothing to reload"

// catchHangups catches SIGHUP from now on, for reloadOn: serve calls it
// before it starts, so that a SIGHUP that arrives while the mirror starts
// (opening a large cache) waits for the reload it asks for instead of
// ending the process, as the signal's default does. stop gives SIGHUP
// its default back.
func catchHangups() (hup chan os.Signal, stop func()) {
	hup = make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup, func() { signal.Stop(hup) }
}

// reloadOnHangup, on each SIGHUP until ctx is done or the returned
// function is called, reloads what m reads from files (m.reload).
func (m *server) reloadOnHangup(ctx context.Context) (stop func()) {
	hup, stopCatching := catchHangups()
	stopReloading := m.reloadOn(ctx, hup)
	return func() {
		stopReloading()
		stopCatching()
	}
}

// hangupShuttingDown is what reloadOn logs of a SIGHUP once the mirror
// shuts down.
const hangupShuttingDown = "SIGHUP ignored: the mirror is shutting down"

// reloadOn reloads what m reads from files (m.reload) on each SIGHUP hup
// receives (catchHangups), until ctx is done (the shutdown begins); one
// caught before is reloaded at once. Without a configuration file, a
// client tokens file or trusted keys, the SIGHUP is logged and ignored, as
// tfmirror reload is refused: it never ends the mirror. From ctx done
// until the returned function is called, a SIGHUP is logged as ignored
// (the process is on its way out, and the next one reads the files
// anew), not dropped without a word.
func (m *server) reloadOn(ctx context.Context, hup <-chan os.Signal) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-hup:
				if ctx.Err() != nil {
					m.log.Warn(hangupShuttingDown)
					continue
				}
				// Each file refused is logged and counted where it
				// was read; only "nothing to reload" is not.
				if _, err := m.reload(); err != nil && !errors.As(err, new(*admin.LoggedError)) {
					m.log.Warn(hangupIgnored, "error", err.Error())
				}
			}
		}
	}()
	return sync.OnceFunc(func() {
		close(quit)
		<-done
	})
}

// reload reads the configuration file again (when there is one), the
// client tokens file (when client authentication is on), the files of
// the keys imports trust (when there are), the operator's TLS
// certificate files (when there are) and origin_ca_file's (when there
// are), and says what changed: SIGHUP
// and tfmirror reload (the admin API's reload) both come here. A file
// refused leaves what it configures as it was; the error says why, and
// each file is read whatever became of the others. The outcome is the
// status page's (configuration's LastReload); the configuration file's
// and the tokens file's are counted in their metrics. One reload runs at
// a time, so that the last to read the files is the one in force.
func (m *server) reload() (admin.Reloaded, error) {
	m.reloadMu.Lock()
	defer m.reloadMu.Unlock()
	var out admin.Reloaded
	if m.reloadsEnded {
		return out, &httperr.RequestError{Status: http.StatusServiceUnavailable,
			Msg: "nothing reloaded: the mirror is shutting down"}
	}
	var errs []error
	var inForce []string // what each file put in force says, for an error
	conf := m.conf.Load()
	withFile, withTrust := m.reloadsFiles()
	var cas *originCAs // nil in a server without an engine (tests)
	if m.engineParts != nil {
		cas = m.originCAs
	}
	if !withFile && m.auth == nil && !withTrust && m.opCert == nil && (cas == nil || !cas.named()) {
		return out, &httperr.RequestError{Status: http.StatusConflict,
			Msg: "nothing to reload: tfmirror serve runs without a configuration file (--config, TFMIRROR_CONFIG), without a client tokens file, without trusted keys, without a certificate of the operator's (--tls-cert) and without origin_ca_file"}
	}
	out.Settings, out.Parts = []admin.SettingChange{}, []admin.PartChange{}
	if withFile {
		res, err := conf.Reload() // logged and counted
		// Absolute, as this process finds it: the command asking may run
		// in another directory (warnOtherConfig compares it with its own).
		out.File = res.File
		if abs, err := filepath.Abs(res.File); err == nil {
			out.File = abs
		}
		var fileErr *settings.FileError
		if errors.As(err, &fileErr) {
			// Its errors, after the one line that names the file.
			errs = append(errs, fmt.Errorf("configuration file %s refused; the configuration in force stays:%s", res.File, fileErr.Lines()))
		} else if err != nil {
			errs = append(errs, fmt.Errorf("configuration file %s refused; the configuration in force stays: %w", res.File, err))
		}
		for _, c := range res.Applied {
			out.Settings = append(out.Settings, admin.SettingChange{Name: c.Setting.Name, Attribute: c.Setting.Attribute(), Old: c.Old, New: c.New})
			// A new list of origin_ca_file's files put their CAs in force.
			out.OriginCAsNew = out.OriginCAsNew || c.Setting.Name == "origin-ca-file"
		}
		for _, c := range res.Restart {
			out.Settings = append(out.Settings, admin.SettingChange{Name: c.Setting.Name, Attribute: c.Setting.Attribute(), Old: c.Old, New: c.New, Restart: true})
		}
		for _, p := range res.Parts {
			out.Parts = append(out.Parts, admin.PartChange{Name: p.Name, Added: p.Added, Removed: p.Removed})
		}
		out.Warnings = res.Warnings
		if err == nil {
			inForce = append(inForce, configInForce(res))
		}
	}
	if m.auth != nil {
		if n, err := m.reloadTokens(); err != nil {
			errs = append(errs, fmt.Errorf("client tokens file %s refused; the tokens in force stay: %w", m.cfg.AuthTokensFile, err))
		} else {
			out.Tokens = &n
			inForce = append(inForce, fmt.Sprintf("client tokens file %s put in force (%s)", m.cfg.AuthTokensFile, counted(n, "token")))
		}
	}
	if withTrust {
		if n, err := m.reloadTrust(); err != nil {
			errs = append(errs, fmt.Errorf("trusted keys refused; the keys in force stay: %w", err))
		} else {
			out.TrustedKeys = &n
			inForce = append(inForce, fmt.Sprintf("trusted keys put in force (%s)", counted(n, "key")))
		}
	}
	if m.opCert != nil {
		if changed, err := m.opCert.recheck(); err != nil {
			errs = append(errs, fmt.Errorf("TLS certificate %s refused; the certificate in force stays: %w", m.cfg.TLSCert, err))
		} else {
			expires := m.cert.Load().Leaf.NotAfter.UTC()
			out.Certificate, out.CertificateNew = &expires, changed
			if changed {
				inForce = append(inForce, fmt.Sprintf("TLS certificate %s put in force (expires %s)", m.cfg.TLSCert, expires.Format(time.RFC3339)))
			}
		}
	}
	if cas != nil {
		if changed, subjects, err := cas.recheck(); err != nil {
			errs = append(errs, fmt.Errorf("origin_ca_file's files refused; the CAs in force stay: %w", err))
		} else {
			out.OriginCAs, out.OriginCAsNew = subjects, out.OriginCAsNew || changed
			if changed {
				inForce = append(inForce, fmt.Sprintf("origin_ca_file's CAs put in force (%s)", counted(len(subjects), "CA")))
			}
		}
	}
	err := errors.Join(errs...)
	if err != nil && len(inForce) > 0 {
		// The error is all tfmirror reload prints: it says too what
		// was put in force, which a refused file does not undo.
		err = fmt.Errorf("%s\n%w", strings.Join(inForce, "\n"), err)
	}
	last := &proxy.Reload{At: time.Now().UTC(), Applied: err == nil}
	if err != nil {
		last.Error = err.Error()
	}
	m.lastReload.Store(last)
	if err != nil {
		// Each file refused was logged, with why, where it was read.
		return out, &admin.LoggedError{Err: &httperr.RequestError{Status: http.StatusUnprocessableEntity, Msg: err.Error()}}
	}
	return out, nil
}

// counted is n things, of one called one ("1 token", "3 rules").
func counted(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}

// configInForce says that the configuration file res read was put in
// force, and what of it changed, for a reload error that names another
// file refused.
func configInForce(res settings.Reloaded) string {
	changed := res.Changed()
	if len(changed) == 0 {
		return fmt.Sprintf("configuration file %s put in force (nothing in it changed)", res.File)
	}
	return fmt.Sprintf("configuration file %s put in force, changed: %s", res.File, strings.Join(changed, ", "))
}

const configUsage = "tfmirror config check [--skip-files] FILE"

// configHelp is config check's -h.
const configHelp = `Checks a configuration file as tfmirror serve --config FILE would read it (the
TFMIRROR_ variables of this environment win over it, as they would), and prints
its errors with their file and line, or the configuration in effect. The files it
names (certificates, keys, tokens, credentials) are read and parsed as serve
reads them, the proxy variables of this environment (HTTPS_PROXY, NO_PROXY) and
its TF_TOKEN_ variables judged as serve judges them, and the proxy each allowed
origin would be reached through is listed; what only a running serve finds is
listed as not checked.
`

// printOriginRoute prints how origin requests would reach each allowed
// origin with this environment's proxy variables, as serve chooses it
// (originProxy, which checkServeConfig ran already), naming a proxy by
// its scheme and host, never its user or password.
func printOriginRoute(w io.Writer, cfg settings.Config, lookupEnv func(string) (string, bool)) {
	route, err := originProxy(cfg.UpstreamProxy, lookupEnv)
	if err != nil { // refused above
		return
	}
	switch route.source {
	case "upstream_proxy":
		fmt.Fprintf(w, "\nORIGIN PROXY: %s (upstream_proxy), for every origin and download host; the proxy variables of the environment are not read\n", route.shown)
	case "HTTPS_PROXY":
		no := route.noProxy
		if no == "" {
			no = "not set"
		}
		fmt.Fprintf(w, "\nORIGIN PROXY: %s (HTTPS_PROXY of this environment), except the hosts of NO_PROXY (%s)\n", route.shown, no)
	default:
		fmt.Fprintln(w, "\nORIGIN PROXY: none: origin requests go direct (HTTPS_PROXY and upstream_proxy are not set)")
	}
	if note := route.unreadNote(); note != "" {
		fmt.Fprintf(w, "  warning: %s\n", note)
	}
	origins := cfg.AllowedOrigins
	if len(origins) == 0 {
		origins = discovery.DefaultAllowedOrigins()
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, o := range origins {
		fmt.Fprintf(tw, "  %s\t%s\n", o, route.describe(o))
	}
	tw.Flush()
}

// runConfig is `tfmirror config check FILE`: it reads FILE as serve
// would (with this environment's TFMIRROR_ variables), and the files it
// names as serve opens them (checkNamedFiles) unless --skip-files, and
// prints every error with its file and line, or the configuration in
// effect: each setting's value (secrets redacted) and where it came from,
// the proxy origin requests go through (printOriginRoute), then what it
// could not check without serving. Exit status 1 when the file, or the
// environment's proxy variables (originProxy) or TF_TOKEN_ variables
// (discovery.LoadCredentials) as serve judges them, are refused, 2 on a
// usage error.
func runConfig(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) == 1 && isHelp(args[0]) {
		fmt.Fprintf(stdout, "Usage: %s\n\n%s", configUsage, configHelp)
		return 0
	}
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintf(stderr, "Usage: %s\n", configUsage)
		return 2
	}
	fs := flag.NewFlagSet("tfmirror config check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	skipFiles := fs.Bool("skip-files", false, "check the file alone, not the files it names (a file written for another machine, whose files are there)")
	fs.Usage = func() {}
	if slices.ContainsFunc(args[1:], isHelp) {
		fmt.Fprintf(stdout, "Usage: %s\n\n%s\nFlags:\n", configUsage, configHelp)
		fs.SetOutput(stdout)
		settings.PrintDefaults(fs)
		return 0
	}
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 1 {
		if err == nil {
			fmt.Fprintf(stderr, "tfmirror config check: %v\n", argumentsError("one FILE", fs.Args()))
		}
		fmt.Fprintf(stderr, "Usage: %s\n", configUsage)
		return 2
	}
	file := fs.Arg(0)
	// The proxy variables of this environment, judged as serve judges
	// them at start when upstream_proxy is not set (else it reads none),
	// and its TF_TOKEN_ variables, which serve reads at start whatever
	// the file says (originNetwork), judged as it judges them.
	var proxyErr, tokensErr error
	judgeEnv := func(cfg settings.Config) {
		if cfg.UpstreamProxy == "" {
			_, proxyErr = originProxy("", lookupEnv)
		}
		if _, err := discovery.LoadCredentials("", os.Environ()); err != nil {
			tokensErr = fmt.Errorf("the origin credentials of this environment, which serve reads at start (TF_TOKEN_ variables), are refused: %w", err)
		}
	}
	e, err := checkServeConfig([]string{"--" + settings.ConfigFlag, file}, lookupEnv, configHooks(nil), !*skipFiles, judgeEnv)
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror config check: %v\n", err)
	}
	for _, envErr := range []error{proxyErr, tokensErr} {
		if envErr != nil {
			fmt.Fprintf(stderr, "tfmirror config check: %v\n", envErr)
		}
	}
	if err != nil || proxyErr != nil || tokensErr != nil {
		return 1
	}
	for _, w := range e.File.Warnings {
		fmt.Fprintf(stderr, "tfmirror config check: warning: %s\n", settings.FormatDiagnostic(w))
	}
	fmt.Fprintf(stdout, "%s: valid\n\n", file)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tVALUE\tSOURCE")
	for _, v := range e.Values() {
		value := v.Value
		if value == "" {
			value = `""`
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Setting.Attribute(), value, v.Source)
	}
	tw.Flush()
	// The policy block, rule by rule in the order of evaluation (it
	// decoded above: CheckHooks read it).
	if pol, err := readPolicy(e.File); err == nil && pol.Len() > 0 {
		fmt.Fprintf(stdout, "\nPOLICY (%s, in the order of evaluation)\n", counted(pol.Len(), "rule"))
		for _, r := range pol.Rules() {
			fmt.Fprintf(stdout, "  %s\n", r)
		}
	} else {
		fmt.Fprintln(stdout, "\nPOLICY: none (every provider and module is allowed)")
	}
	if *skipFiles {
		fmt.Fprintf(stdout, "\nnot checked (--skip-files): the files it names, the proxy and TF_TOKEN_ variables of this environment\n")
	} else {
		printOriginRoute(stdout, e.Config, lookupEnv)
	}
	fmt.Fprintf(stdout, "\n%s\n", notChecked)
	return 0
}
