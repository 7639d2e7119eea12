package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/dustin/go-humanize"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/internal/hclfile"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/internal/logbound"
	"github.com/tfmirror/tfmirror/v2/internal/logwriter"
	"github.com/tfmirror/tfmirror/v2/manifest"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// syncConfig holds the flags of `tfmirror sync`.
type syncConfig struct {
	settings.Config // the data directory, cache and origin flags
	// SyncPlatforms, when set by --platforms, replaces the manifests'
	// top-level platforms.
	SyncPlatforms []string
	Parallel      int
	DryRun        bool
	// Client is the client whose install of a configuration directory
	// (and of the registry modules it calls) sync reproduces.
	Client manifest.Client
	// Inputs are the --var and --var-file flags, in their order: the
	// values of the configuration directories' variables (OpenTofu's).
	Inputs []manifest.Input
	Paths  []string
	// policy is the configuration file's package policy, put in force on
	// the engine a sync opens itself.
	policy *policy.Policy
}

func parseSyncFlags(args []string, lookupEnv func(string) (string, bool), out io.Writer) (syncConfig, error) {
	var c syncConfig
	fs := flag.NewFlagSet("tfmirror sync", flag.ContinueOnError)
	fs.SetOutput(out)
	var configPath string
	names := addEngineFlags(fs, &c.Config, &configPath)
	// A command's log is for its operator: text, and only trouble.
	for name, def := range map[string]string{"log-format": "text", "log-level": "warn"} {
		f := fs.Lookup(name)
		f.DefValue = def
		f.Value.Set(def)
	}
	var platforms settings.List
	fs.Var(&platforms, "platforms", "comma-separated os_arch platforms to sync; given, it replaces the manifests' top-level platforms (providers' own platforms are still added)")
	settings.IntVar(fs, &c.Parallel, "parallel", 4, "how many archives to fetch at once")
	settings.BoolVar(fs, &c.DryRun, "dry-run", "list what would be fetched, without downloading any archive")
	fs.Var(inputFlag{&c.Inputs, false}, "var", "NAME=VALUE: a `value` for a variable of each configuration directory (a root module), as tofu init -var takes it: with --client opentofu, a module's source and version may refer to variables and locals, which sync evaluates (values also from terraform.tfvars, *.auto.tfvars and TF_VAR_NAME, as tofu init reads them); repeatable, a later value replacing an earlier")
	fs.Var(inputFlag{&c.Inputs, true}, "var-file", "a `file` of values for the variables of each configuration directory, as tofu init -var-file takes it (see --var); repeatable")
	fs.TextVar(&c.Client, "client", manifest.Terraform, "the client, by `name`, whose install of a configuration directory (and of the registry modules it calls) to sync: terraform, or opentofu, which reads .tofu files too and takes an address naming no host as registry.opentofu.org's")
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: tfmirror sync [flags] PATH...\n\nEach PATH is a sync manifest, a .terraform.lock.hcl or a Terraform configuration directory\n(its .tf and .tf.json files, its local modules and its lock file; with\n--client opentofu, its .tofu and .tofu.json files too); - is a sync manifest\nread from standard input. Files are regular files (a FIFO or a device is refused).\nEvery flag may also be set by an environment variable, e.g. --data-dir by %s;\nthe settings it shares with serve also by serve's --config file.\n\nFlags:\n", settings.EnvName("data-dir"))
		settings.PrintDefaults(fs)
	}
	l, err := settings.Load(fs, args, lookupEnv, names)
	if err != nil {
		return c, err
	}
	if c.policy, err = readPolicy(l.File); err != nil {
		return c, err
	}
	c.SyncPlatforms = platforms
	c.Paths = fs.Args()
	// The engine of a sync serves every platform: what to fetch is the
	// manifest's business.
	c.Platforms = nil
	c.VersionsTTL = 10 * time.Minute
	if len(c.Paths) == 0 {
		return c, errors.New("no PATH given: name a sync manifest, a .terraform.lock.hcl or a directory")
	}
	for _, pl := range c.SyncPlatforms {
		if _, err := addrs.ParsePlatform(pl); err != nil {
			return c, fmt.Errorf("--platforms: %w", err)
		}
	}
	if len(c.Inputs) > 0 && c.Client != manifest.OpenTofu {
		return c, errors.New("--var and --var-file are read with --client opentofu: Terraform reads a module's source and version as literals")
	}
	for _, in := range c.Inputs {
		if in.File == "" {
			continue
		}
		if fi, err := os.Stat(in.File); err != nil {
			return c, fmt.Errorf("--var-file: %w", err)
		} else if !fi.Mode().IsRegular() {
			return c, fmt.Errorf("--var-file %s: not a regular file", in.File)
		}
	}
	if c.Parallel < 1 || c.Parallel > 64 {
		return c, errors.New("--parallel must be between 1 and 64")
	}
	return c, l.Locate(c.ValidateEngine())
}

// inputFlag is --var (NAME=VALUE) or, file, --var-file (FILE): each
// given adds an input to list, in the order given.
type inputFlag struct {
	list *[]manifest.Input
	file bool
}

func (f inputFlag) String() string { return "" }

func (f inputFlag) Set(v string) error {
	if f.file {
		if v == "" {
			return errors.New("empty file name")
		}
		*f.list = append(*f.list, manifest.Input{File: v})
		return nil
	}
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("%q: want NAME=VALUE", v)
	}
	*f.list = append(*f.list, manifest.Input{Name: name, Value: value})
	return nil
}

// syncItem is one package to sync: a version of a provider for a platform.
type syncItem struct {
	provider addrs.Provider
	version  string
	platform string
	filename string
	cached   bool
	size     int64 // when cached
}

func (it syncItem) String() string {
	return fmt.Sprintf("%s %s %s", it.provider, it.version, it.platform)
}

// syncPlan is what a sync does.
type syncPlan struct {
	items       []syncItem
	unpublished []string // provider version platform the origin has no package for
	failures    []string
	skipped     []string // what the package policy holds back, and why
	// unread counts the providers whose versions or packages were not
	// read because the sync was interrupted.
	unread int
}

// syncRun is one `tfmirror sync`.
type syncRun struct {
	cfg    syncConfig
	ops    engineOps
	out    io.Writer // summary and dry-run listing
	status io.Writer // progress
	tty    bool      // status is a terminal: redraw one line
	now    func() time.Time
	// maxModuleCalls, when positive, replaces maxSyncModuleCalls;
	// maxModuleSources, maxSyncModuleSources.
	maxModuleCalls, maxModuleSources int
}

// loadSpec reads what the paths ask for, the configuration directories
// as client reads them (manifest.LoadFor): the one
// path "-" a manifest read from stdin (os.Stdin when nil), up to
// hclfile.MaxBytes, the operator's to end (Ctrl-D) or interrupt; every
// other path a regular file or directory, never a FIFO or a device
// (/dev/stdin, a shell's <(...)), which would keep the read waiting.
func loadSpec(ctx context.Context, reading manifest.Reading, paths []string, stdin io.Reader) (*manifest.Spec, error) {
	var src io.Reader
	if slices.Contains(paths, manifest.Stdin) {
		if stdin == nil {
			stdin = os.Stdin
		}
		b, err := readStdin(ctx, stdin)
		if err != nil {
			return nil, err
		}
		src = bytes.NewReader(b)
	}
	spec, err := manifest.LoadWith(reading, src, paths...)
	var kind *inputfile.KindError
	if errors.As(err, &kind) && kind.Kind != "a directory" {
		return nil, fmt.Errorf("%w (to read a sync manifest from standard input, name it %q: tfmirror sync [flags] %s)", err, manifest.Stdin, manifest.Stdin)
	}
	return spec, err
}

// readStdin reads r up to one byte past hclfile.MaxBytes (the parser
// refuses what is larger), or until ctx is done (an interrupt while the
// operator's terminal or pipe sends nothing): the read then left waiting
// ends with the process, which exits once the sync has returned.
func readStdin(ctx context.Context, r io.Reader) ([]byte, error) {
	type read struct {
		b   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(r, hclfile.MaxBytes+1))
		done <- read{b, err}
	}()
	select {
	case rd := <-done:
		if rd.err != nil {
			return nil, fmt.Errorf("%s: %w", manifest.StdinName, rd.err)
		}
		return rd.b, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", manifest.StdinName, context.Cause(ctx))
	}
}

// runSync is `tfmirror sync`; it returns the exit status.
func runSync(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer, o overrides) int {
	cfg, err := parseSyncFlags(args, lookupEnv, usageOutput(args, stdout, stderr))
	if errors.Is(err, settings.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror sync: %v\n", err)
		return 2
	}
	spec, err := loadSpec(ctx, manifest.Reading{Client: cfg.Client, Inputs: cfg.Inputs}, cfg.Paths, o.stdin)
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror sync: %v\n", err)
		return 2
	}
	if err := resolvePlatforms(spec, cfg.SyncPlatforms); err != nil {
		fmt.Fprintf(stderr, "tfmirror sync: %v\n", err)
		return 2
	}
	for _, w := range spec.Warnings {
		fmt.Fprintf(stderr, "tfmirror sync: warning: %s\n", shown(w))
	}
	// The fetches' goroutines write progress and log lines to stderr at
	// once: one lock keeps each line whole, whatever writer stderr is.
	tty := isTerminal(stderr)
	stderr = logwriter.NewExclusive(stderr)
	logger, err := newLogger(cfg.LogFormat, cfg.LogLevel, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror sync: %v\n", err)
		return 2
	}
	if !o.keepStdLog {
		log.SetFlags(0)
		log.SetOutput(lineLogger{logger})
	}

	dd, err := openDataDir(ctx, "sync", cfg.Config, logger, o)
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror sync: %v\n", err)
		return 1
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if ctx.Err() != nil {
			// Interrupted: the downloads still running are cancelled at
			// once (nothing of them is cached), not waited for; the
			// cache is closed cleanly all the same.
			cancel()
		}
		if err := dd.close(sctx); err != nil {
			fmt.Fprintf(stderr, "tfmirror sync: %v\n", err)
		}
	}()
	fmt.Fprintf(stderr, "tfmirror sync: %s (%s)\n", dd.where(), cfg.DataDir)
	if note := dd.setPolicy(cfg.policy); note != "" {
		fmt.Fprintf(stderr, "tfmirror sync: %s\n", note)
	}
	r := &syncRun{cfg: cfg, ops: dd.ops, out: stdout, status: stderr, tty: tty, now: time.Now}
	if !r.run(ctx, spec) {
		return 1
	}
	return 0
}

// resolvePlatforms settles each provider's platforms: --platforms, when
// given, replaces the manifests' top-level list; each provider's own
// platforms are added. A provider left without any is an error.
func resolvePlatforms(spec *manifest.Spec, flagPlatforms []string) error {
	global := spec.Platforms
	if len(flagPlatforms) > 0 {
		global = flagPlatforms
	}
	var none []string
	for _, p := range spec.Providers {
		p.Platforms = appendMissing(slices.Clone(global), p.Platforms...)
		if len(p.Platforms) == 0 {
			none = append(none, p.Address.String())
		}
	}
	for _, c := range spec.CLIs {
		c.Platforms = appendMissing(slices.Clone(global), c.Platforms...)
		if len(c.Platforms) == 0 {
			none = append(none, "cli "+c.Product)
		}
	}
	if len(none) > 0 {
		return fmt.Errorf("no platforms to sync for %s: give --platforms os_arch,... or platforms = [...] in the manifest", strings.Join(none, ", "))
	}
	return nil
}

func appendMissing(list []string, add ...string) []string {
	for _, a := range add {
		if !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	return list
}

// shown is s as sync prints it: its control and format characters (of a
// stranger's file name or string, in a failure) written as escapes, never
// sent to the terminal, which would obey them (logbound.Escaped).
func shown(s string) string { return logbound.Escaped(s) }

// maxConstraintShown is how much of a version constraint a failure
// quotes.
const maxConstraintShown = 200

// quotedConstraint is the version constraint c quoted for a failure, as
// far as maxConstraintShown bytes, then its length: a stranger's
// configuration may write one of megabytes (or thousands of distinct
// constraints, which a selection joins).
func quotedConstraint(c string) string {
	if len(c) <= maxConstraintShown {
		return strconv.Quote(c)
	}
	cut := maxConstraintShown
	for cut > 0 && !utf8.RuneStart(c[cut]) {
		cut--
	}
	return fmt.Sprintf("%s (%d bytes in all)", strconv.Quote(c[:cut]+"..."), len(c))
}

// shownLines is s as shown, line by line: its line breaks kept, every
// other control and format character written as an escape
// (logbound.EscapedLines).
func shownLines(s string) string { return logbound.EscapedLines(s) }

// run syncs spec and reports; it returns whether everything asked for was done.
func (r *syncRun) run(ctx context.Context, spec *manifest.Spec) bool {
	clis := r.syncCLIs(ctx, spec) // synccli.go
	cliOK := clis.report(r.out)
	return r.runProviders(ctx, spec) && cliOK
}

// runProviders syncs spec's modules and providers and reports.
func (r *syncRun) runProviders(ctx context.Context, spec *manifest.Spec) bool {
	mods := r.modules(ctx, spec) // syncmodules.go; adds the providers modules need
	plan := r.plan(ctx, spec)
	plan.failures = append(mods.failures, plan.failures...)
	plan.skipped = append(mods.skipped, plan.skipped...)
	var todo []syncItem
	for _, it := range plan.items {
		if !it.cached {
			todo = append(todo, it)
		}
	}
	for _, u := range plan.unpublished {
		fmt.Fprintf(r.status, "not published by the origin: %s\n", shown(u))
	}
	for _, f := range plan.failures {
		fmt.Fprintf(r.status, "failed: %s\n", shown(f))
	}
	for _, sk := range plan.skipped {
		fmt.Fprintf(r.out, "skipped: %s\n", shown(sk))
	}
	total := len(plan.items)
	switch {
	case total > 0 && len(todo) == 0:
		fmt.Fprintf(r.out, "nothing to do: all %d packages are cached\n", total)
	case total > 0:
		fmt.Fprintf(r.out, "%d of %d packages already cached; %d to fetch\n", total-len(todo), total, len(todo))
	}
	if r.cfg.DryRun {
		for _, it := range todo {
			fmt.Fprintf(r.out, "would fetch %s (%s, size unknown)\n", it, it.filename)
		}
		if ctx.Err() != nil {
			fmt.Fprintln(r.out, "sync interrupted: the list above may lack packages; run tfmirror sync --dry-run again")
			return false
		}
		return len(plan.failures) == 0
	}
	fetched, bytes, failed, notFetched := r.fetch(ctx, todo)
	// The counts of what was fetched name what they count; the failures
	// and what the policy holds back are modules' and providers'.
	fmt.Fprintf(r.out, "sync summary: %s fetched (%s) and %d already cached", counted(fetched, "provider package"),
		humanize.IBytes(uint64(bytes)), total-len(todo))
	if mods.fetched+mods.cached > 0 {
		fmt.Fprintf(r.out, ", %s fetched and %d already cached", counted(mods.fetched, "module package"), mods.cached)
	}
	fmt.Fprintf(r.out, "; %d failed", len(failed)+len(plan.failures))
	if notFetched > 0 {
		fmt.Fprintf(r.out, ", %d not fetched (interrupted)", notFetched)
	}
	if len(plan.unpublished) > 0 {
		fmt.Fprintf(r.out, ", %d not published by the origin", len(plan.unpublished))
	}
	if len(plan.skipped) > 0 {
		fmt.Fprintf(r.out, ", %d held back by the package policy", len(plan.skipped))
	}
	fmt.Fprintln(r.out)
	for _, f := range append(plan.failures, failed...) {
		fmt.Fprintf(r.out, "  failed: %s\n", shown(f))
	}
	if ctx.Err() != nil {
		fmt.Fprintf(r.out, "sync interrupted")
		if plan.unread > 0 {
			fmt.Fprintf(r.out, " before the packages of %d providers were looked up", plan.unread)
		}
		fmt.Fprintln(r.out, ": what was fetched is cached; run tfmirror sync again to fetch the rest")
		return false
	}
	return len(failed) == 0 && len(plan.failures) == 0
}

// plan resolves every provider's selections against its version list and
// asks for the verified package metadata of the selected versions (no
// archive is fetched), a few providers at a time.
func (r *syncRun) plan(ctx context.Context, spec *manifest.Spec) syncPlan {
	plans := make([]syncPlan, len(spec.Providers))
	var wg sync.WaitGroup
	sem := make(chan struct{}, r.cfg.Parallel)
	for i, p := range spec.Providers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			plans[i] = r.planProvider(ctx, p)
		}()
	}
	wg.Wait()
	var out syncPlan
	for _, p := range plans {
		out.items = append(out.items, p.items...)
		out.unpublished = append(out.unpublished, p.unpublished...)
		out.failures = append(out.failures, p.failures...)
		out.skipped = append(out.skipped, p.skipped...)
		out.unread += p.unread
	}
	return out
}

func (r *syncRun) planProvider(ctx context.Context, p *manifest.Provider) syncPlan {
	var plan syncPlan
	fail := func(format string, args ...any) syncPlan {
		plan.failures = append(plan.failures, fmt.Sprintf(format, args...))
		return plan
	}
	list, err := r.ops.Versions(ctx, p.Address)
	held := r.heldBack(ctx, policy.Provider, p.Address.String())
	if h, ok := held[""]; ok && err != nil {
		plan.skipped = append(plan.skipped, fmt.Sprintf("%s: %s", p.Address, heldMessage(h)))
		return plan
	}
	if interrupted(ctx, err) {
		plan.unread++
		return plan
	}
	if err != nil {
		return fail("%s: version list: %v", p.Address, err)
	}
	offered := map[string][]string{}
	var available versions.List
	for _, e := range list {
		v, err := addrs.ParseSemver(e.Version)
		if err != nil {
			continue
		}
		available = append(available, v)
		offered[v.String()] = e.Platforms
	}
	// Each directory's selection is its own configuration's, judged on
	// its own (the union of what they select is synced); those alike,
	// from many directories and packages, are one (manifest.Spec merges
	// them), checked once.
	var selected versions.List
	for _, sel := range p.Selections {
		got, skipped := selectServed(sel, available, held, p.Address.String())
		plan.skipped = appendMissing(plan.skipped, skipped...)
		if len(got) == 0 && len(skipped) == 0 {
			plan.failures = append(plan.failures, fmt.Sprintf("%s: no version matches %s (%s)", p.Address, quotedConstraint(sel.Text), askedBy(sel, "asked %d times")))
		}
		for _, v := range got {
			if !slices.ContainsFunc(selected, v.Same) {
				selected = append(selected, v)
			}
		}
	}
	selected.Sort()
	for _, v := range selected {
		var want []string
		for _, pl := range p.Platforms {
			if slices.Contains(offered[v.String()], pl) {
				want = append(want, pl)
			} else {
				plan.unpublished = append(plan.unpublished, fmt.Sprintf("%s %s %s", p.Address, v, pl))
			}
		}
		if len(want) == 0 {
			continue
		}
		// The metadata of every platform, not only those synced: a sealed
		// mirror (serve --offline) answers VERSION.json only when it
		// holds the package metadata of each platform it lists.
		archives, err := r.ops.Package(ctx, p.Address, v.String(), nil)
		if interrupted(ctx, err) {
			plan.unread++
			return plan
		}
		if err != nil {
			plan.failures = append(plan.failures, fmt.Sprintf("%s %s: package metadata: %v", p.Address, v, err))
			continue
		}
		for _, pl := range want {
			i := slices.IndexFunc(archives, func(a admin.Archive) bool { return a.Platform == pl })
			if i < 0 {
				plan.failures = append(plan.failures, fmt.Sprintf("%s %s %s: not served by this mirror (see its --platforms)", p.Address, v, pl))
				continue
			}
			a := archives[i]
			plan.items = append(plan.items, syncItem{provider: p.Address, version: v.String(), platform: pl, filename: a.Filename, cached: a.Cached, size: a.Size})
		}
	}
	return plan
}

// interrupted reports whether err is the end of ctx, the sync's (an
// interrupt): what it stopped was not fetched, and did not fail. The
// end is said by ctx.Err() or by its cause, the signal that ended it,
// which the admin socket's HTTP client answers with.
func interrupted(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.Cause(ctx)))
}

// fetch makes sure every item is cached, --parallel at a time, showing
// progress. It returns how many archives were fetched, their bytes, the
// failures, and how many were not fetched because ctx ended (an
// interrupt).
func (r *syncRun) fetch(ctx context.Context, todo []syncItem) (fetched int, bytes int64, failed []string, notFetched int) {
	if len(todo) == 0 {
		return 0, 0, nil, 0
	}
	prog := newProgress(r.status, r.tty, len(todo), r.now)
	stop := prog.start()
	defer stop()
	items := make(chan syncItem)
	var mu sync.Mutex
	var wg sync.WaitGroup
	ended := 0 // items that ended, fetched or not
	for range min(r.cfg.Parallel, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range items {
				res, err := r.ops.Ensure(ctx, it.provider, it.version, it.platform)
				cut := interrupted(ctx, err)
				mu.Lock()
				switch {
				case cut:
					// Not fetched: counted below.
				case err != nil:
					failed = append(failed, fmt.Sprintf("%s: %v", it, err))
					ended++
				case !res.CachedAlready:
					fetched++
					bytes += res.Bytes
					ended++
				default:
					ended++
				}
				mu.Unlock()
				if !cut {
					prog.done(it, res.Bytes, err)
				}
			}
		}()
	}
	for _, it := range todo {
		select {
		case items <- it:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(items)
	wg.Wait()
	return fetched, bytes, failed, len(todo) - ended
}
