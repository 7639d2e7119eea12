package manifest

// Registry modules in sync specs: manifests' module blocks, and the
// module calls of configurations whose source is a registry address.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
)

// Module is one registry module asked for, with everything that asked
// for it.
type Module struct {
	Address addrs.Module
	// Selections say which versions to sync; the union of what they
	// select is synced. Those alike are one (Selection.Calls).
	Selections []Selection
	// Subdirs are the subdirectories of the module's package that calls
	// use (a source's //SUBDIR; "" is the module itself), whose
	// configuration is read for the providers and modules they need.
	Subdirs []string
	// Calls is, for a Module ReadModuleDir returns, how many distinct
	// calls of it (by subdirectory and version constraint) the
	// configuration read makes, each counted against
	// MaxPackageModuleCalls.
	Calls int
	// Standalone is set for a module a sync manifest's module block asks
	// for, and its caller sets it for those such a module's package
	// calls: no configuration judges them with the modules calling them
	// (AddConfigSelections), so what each package asks of providers is
	// synced as it asks it alone (AddOwnSelections).
	Standalone bool

	alike alikeIndex // Selections by constraint (mergeSelections)
}

// MaxPackageModuleCalls is the most distinct registry module calls
// ReadModuleDir takes from the configuration it reads (of a module and
// the local modules it calls), calls being distinct by module address,
// subdirectory and version constraint: each is a version list asked of
// an origin, and a module version's package to fetch and read. A
// stranger's package of hundreds of MiB could name millions.
const MaxPackageModuleCalls = 2000

// MaxPackageModuleSources is the most distinct module calls ReadModuleDir
// takes from the configuration it reads whose source is not a registry
// address: other remote sources (git::, URLs, s3::, github.com/...),
// distinct by source, which sync lists as the clients' to fetch, and
// local paths ("./x"), distinct by the directory they name, which it
// reads. A stranger's package of hundreds of MiB could name millions,
// each a line listed or a directory looked up.
const MaxPackageModuleSources = 2000

// remoteCall is a module call whose source is not a local path.
type remoteCall struct {
	// module is set for a registry address; else source is the source
	// the clients fetch themselves.
	module     *addrs.Module
	subdir     string
	constraint string
	versions   addrs.ModuleCallVersions // the zero value: no constraint
	source     string
	where      string
	// calls is how many calls of the configuration this one stands for
	// (remoteCalls): 0 or 1 is one.
	calls int
}

// remoteCalls collects the module calls of a configuration whose source
// is not a local path, in the order read, and counts the local
// directories its local calls name. The calls of one registry module
// with one subdirectory and one version constraint are one, counted,
// where the first of them is (a stranger's package may repeat one call
// a million times); so are the calls of one other source, within a
// bound (a package's; the operator's own are each listed where it is),
// and those of one local directory.
type remoteCalls struct {
	list   []remoteCall
	index  map[remoteKey]int // the registry calls of list
	others map[string]int    // the other calls of list, by source (and file:line, unbounded)
	locals map[string]bool   // the local directories called
	// max, when positive, is the most registry calls list holds: add
	// refuses one more. maxOthers, when positive, is the most other
	// calls and local directories together: add and addLocal refuse one
	// more.
	max, maxOthers int
}

// remoteKey is what tells registry module calls apart.
type remoteKey struct{ module, subdir, constraint string }

// add adds c to rs, or counts it with the call it repeats. It refuses a
// call that would take rs past its bounds, naming it, its file:line,
// and the bound.
func (rs *remoteCalls) add(c remoteCall) error {
	c.calls = 1
	if c.module == nil {
		key := c.source
		if rs.maxOthers == 0 {
			key += "\x00" + c.where // each call of the operator's own listed
		}
		if i, ok := rs.others[key]; ok {
			rs.list[i].calls++
			return nil
		}
		if err := rs.checkOthers(c.where, fmt.Sprintf("module source %q", c.shown())); err != nil {
			return err
		}
		if rs.others == nil {
			rs.others = map[string]int{}
		}
		rs.others[key] = len(rs.list)
		rs.list = append(rs.list, c)
		return nil
	}
	key := remoteKey{c.module.String(), c.subdir, c.constraint}
	if i, ok := rs.index[key]; ok {
		rs.list[i].calls++
		return nil
	}
	if rs.max > 0 && len(rs.index) >= rs.max {
		return fmt.Errorf("%s: module %s: more than %d distinct registry module calls (by source and version constraint), the most tfmirror sync follows from one module package", c.where, c.module, rs.max)
	}
	if rs.index == nil {
		rs.index = map[remoteKey]int{}
	}
	rs.index[key] = len(rs.list)
	rs.list = append(rs.list, c)
	return nil
}

// addLocal counts the local module directory dir (a path made clean),
// which a call at where names, and reports whether it is new: the
// directory called again is read once. It refuses a directory that
// would take rs past its bound on calls that are not registry calls.
func (rs *remoteCalls) addLocal(dir, where, source string) (bool, error) {
	if rs.locals[dir] {
		return false, nil
	}
	if err := rs.checkOthers(where, fmt.Sprintf("module source %q", source)); err != nil {
		return false, err
	}
	if rs.locals == nil {
		rs.locals = map[string]bool{}
	}
	rs.locals[dir] = true
	return true, nil
}

// checkOthers refuses one more call that is not a registry call when rs
// holds as many as its bound, naming it (what, at where) and the bound.
func (rs *remoteCalls) checkOthers(where, what string) error {
	if rs.maxOthers > 0 && len(rs.others)+len(rs.locals) >= rs.maxOthers {
		return fmt.Errorf("%s: %s: more than %d distinct module calls whose source is not a registry address (git::, URLs and others by source, local paths by directory), the most tfmirror sync takes from one module package", where, what, rs.maxOthers)
	}
	return nil
}

var manifestModuleSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "versions", Required: true},
		{Name: "latest"},
	},
}

// loadManifestModule reads a manifest's module block:
//
//	module "registry.terraform.io/terraform-aws-modules/vpc/aws" {
//	  versions = ["~> 5.0"]
//	  latest   = 1            # optional
//	}
func (s *Spec) loadManifestModule(b *hcl.Block, seen map[string]string) error {
	addr, err := addrs.ParseModule(b.Labels[0])
	if err != nil {
		return posError(b.LabelRanges[0], "%v", err)
	}
	if prev, dup := seen[addr.String()]; dup { // in any spelling
		return posError(b.DefRange, "module %s is already declared at %s", addr, prev)
	}
	seen[addr.String()] = where(b.DefRange)
	mc, diags := b.Body.Content(manifestModuleSchema)
	if diags.HasErrors() {
		return diagError(diags)
	}
	sels, err := manifestSelections(mc, parseModuleConstraint)
	if err != nil {
		return err
	}
	s.addModule(addr, sels, "").Standalone = true
	return nil
}

// addModule merges selections and a subdirectory for addr into the spec,
// and returns its entry.
func (s *Spec) addModule(addr addrs.Module, sels []Selection, subdir string) *Module {
	for _, m := range s.Modules {
		if m.Address.String() == addr.String() {
			m.Selections, m.alike = mergeSelections(m.Selections, m.alike, sels)
			m.Subdirs = appendNew(m.Subdirs, subdir)
			return m
		}
	}
	m := &Module{Address: addr, Subdirs: []string{subdir}}
	m.Selections, m.alike = mergeSelections(nil, nil, sels)
	s.Modules = append(s.Modules, m)
	return m
}

// addRemoteCalls adds the registry module calls of a configuration to
// the spec and lists the others as unmirrorable.
func (s *Spec) addRemoteCalls(calls []remoteCall) {
	for _, c := range calls {
		if c.module == nil {
			s.AddUnmirrorable(c.where + ": " + c.shown())
			continue
		}
		s.addModule(*c.module, []Selection{c.selection()}, c.subdir)
	}
}

// shown is c's source as sync lists and reports it: without the
// credentials a URL may carry (a git:: URL's user:token@, a pre-signed
// URL's signature), which the clients need and the operator's output,
// often a CI log many read, must not hold (redact.Location).
func (c remoteCall) shown() string { return redact.Location(c.source) }

// selection is what a module call selects: the newest version meeting
// its constraint, as Terraform installs.
func (c remoteCall) selection() Selection {
	text := c.constraint
	if text == "" {
		text = "any version"
	}
	return Selection{Text: text, Call: &c.versions, Latest: 1, Where: c.where, Calls: c.calls, Subdirs: []string{c.subdir}}
}

// ReadModuleDir reads the configuration of the module in dir (a module of
// a downloaded package; what names it, for messages), with the local
// modules it calls, as the spec's Client reads it, and returns what it
// read (ModuleDir), adding nothing to the spec: what it asks of
// providers is judged with the configuration calling it
// (AddConfigSelections), or alone (AddOwnSelections) for a Standalone
// module. ModuleDir holds the registry modules it calls,
// each as its own Module (not added to the spec's Modules), calls of one
// module with one version constraint merged into one Selection
// (Selection.Calls counting them), and each distinct call on its own;
// what it asks of each provider; and its module calls of other sources
// (git::, URLs), each source once, as "WHAT: SOURCE", which its caller
// may list as the spec's Unmirrorable (AddUnmirrorable). It refuses a
// configuration making more than MaxPackageModuleCalls distinct registry
// module calls, or more than MaxPackageModuleSources distinct calls of
// other sources and local directories, naming the first past the bound,
// and then returns nothing. The package is a stranger's,
// unpacked in root (dir is root or under it): a local module call is
// followed within root only, as Terraform resolves one within its
// package, each directory read once, and ctx is checked before each file
// is read, so that a package of many large files is read within its
// caller's deadline (context.Cause(ctx) is then the error).
func (s *Spec) ReadModuleDir(ctx context.Context, root, dir, what string) (ModuleDir, error) {
	if !within(root, dir) {
		return ModuleDir{}, fmt.Errorf("%s: %s is outside the module package", what, dir)
	}
	return s.readModuleDir(ctx, root, dir, what, MaxPackageModuleCalls, MaxPackageModuleSources)
}

// AddOwnSelections adds to the spec, for each of reqs (what a module's
// package asks of a provider: ModuleDir.Requires), the newest version
// meeting its constraints, as the module alone asks it: for a Standalone
// module, which no configuration judges with the modules calling it.
func (s *Spec) AddOwnSelections(reqs []Requirement) {
	for _, q := range reqs {
		s.add(q.Provider, []Selection{q.selection()}, nil)
	}
}

// readModuleDir is ReadModuleDir with at most maxCalls distinct registry
// module calls and maxOthers of other sources and local directories (any
// number for 0).
func (s *Spec) readModuleDir(ctx context.Context, root, dir, what string, maxCalls, maxOthers int) (ModuleDir, error) {
	t, err := s.readTree(ctx, root, dir, remoteCalls{max: maxCalls, maxOthers: maxOthers})
	if _, none := errors.AsType[*noFilesError](err); none {
		if fi, statErr := os.Stat(dir); statErr == nil && fi.IsDir() {
			return ModuleDir{}, nil // an empty module, as the clients read it
		}
		rel, _ := filepath.Rel(root, dir)
		return ModuleDir{}, fmt.Errorf("%s: its package has no directory %s", what, filepath.ToSlash(rel))
	}
	if err != nil {
		return ModuleDir{}, err
	}
	var md ModuleDir
	for _, r := range t.reqs.list {
		md.Requires = append(md.Requires, requirementOf(r))
	}
	// A stranger's package may call tens of thousands of modules:
	// each call is merged by a lookup, not by a search of those before
	// it (which took minutes, past the caller's deadline).
	index := map[string]int{}       // by address
	subdirs := map[[2]string]bool{} // address, subdirectory
	for _, c := range t.remotes.list {
		if c.module == nil {
			md.Sources = append(md.Sources, what+": "+c.shown())
			continue
		}
		md.Calls = append(md.Calls, callOf(c))
		key := c.module.String()
		i, ok := index[key]
		if !ok {
			md.Modules = append(md.Modules, &Module{Address: *c.module})
			i = len(md.Modules) - 1
			index[key] = i
		}
		m := md.Modules[i]
		m.Calls++
		m.Selections, m.alike = mergeSelections(m.Selections, m.alike, []Selection{c.selection()})
		if k := [2]string{key, c.subdir}; !subdirs[k] {
			subdirs[k] = true
			m.Subdirs = append(m.Subdirs, c.subdir)
		}
	}
	return md, nil
}

// remoteModule reads a module block (what, for messages: `module
// "net"`), whose arguments are attrs (moduleAttributes) and source src
// (evaluated in sc, as its version is: staticScope.stringOf), when src
// is not a local path: a registry address
// ([HOST/]NAMESPACE/NAME/SYSTEM[//SUBDIR], with an optional version
// constraint; host when it names none), or any other source.
func remoteModule(ctx context.Context, sc *staticScope, what, src string, attrs hcl.Attributes, host string) (remoteCall, error) {
	rc := remoteCall{source: src, where: where(attrs["source"].Range)}
	addr, subdir, ok := registrySource(src, host)
	va, versioned := attrs["version"]
	switch {
	case !ok && versioned:
		return rc, versionNeedsRegistry(attrs["source"], what, src)
	case !ok:
		return rc, nil
	}
	rc.module, rc.subdir = &addr, subdir
	if versioned {
		v, err := sc.valueOf(ctx, va.Expr, "version", what)
		if err != nil {
			return rc, err
		}
		if v != cty.NilVal && v.IsKnown() && v.IsNull() {
			return rc, nil // no constraint, as both clients take it
		}
		c, err := stringValue(v, va.Expr, "version", what)
		if err != nil {
			return rc, err
		}
		if c == "" {
			// Terraform takes it as no constraint; OpenTofu refuses it.
			if host == addrs.OpenTofuRegistryHost {
				return rc, posError(va.Expr.Range(), "%s: an empty version constraint, which OpenTofu refuses", what)
			}
			return rc, nil
		}
		mv, err := addrs.ParseModuleCallVersions(c, host == addrs.OpenTofuRegistryHost)
		if err != nil {
			return rc, posError(va.Expr.Range(), "%v", err)
		}
		rc.constraint, rc.versions = c, mv
	}
	return rc, nil
}

// versionNeedsRegistry is the error for a module block whose source src
// (its attribute a) is no registry address, though it has a version
// argument, which only a registry module takes: both clients refuse the
// block, taking the source for a registry address that does not parse.
func versionNeedsRegistry(a *hcl.Attribute, what, src string) error {
	return posError(a.Range, "%s: source %q is no module registry address, yet the block has a version argument, which only a registry module takes (the clients refuse it too)", what, redact.Location(src))
}

// registrySource reports whether src is a module registry address, as
// Terraform tells them from go-getter sources (an address that parses as
// a registry's, a host with a port included; scp-like SSH and paths with
// a drive letter fail on their host), and parses it, host the host of
// an address that names none.
func registrySource(src, host string) (addrs.Module, string, bool) {
	if strings.Contains(src, "::") || strings.Contains(src, "://") {
		return addrs.Module{}, "", false // a forced getter, a URL
	}
	pkg, subdir, _ := strings.Cut(src, "//")
	if strings.Contains(pkg, "?") {
		return addrs.Module{}, "", false // parameters
	}
	parts := strings.Split(pkg, "/")
	if sys := parts[len(parts)-1]; sys != strings.ToLower(sys) {
		return addrs.Module{}, "", false // the clients take only a lowercase system
	}
	if len(parts) == 4 {
		switch strings.ToLower(parts[0]) {
		case "github.com", "bitbucket.org":
			return addrs.Module{}, "", false // go-getter shorthands
		}
	}
	m, err := addrs.ParseModuleOf(pkg, host)
	if err != nil {
		return addrs.Module{}, "", false
	}
	if subdir != "" {
		subdir = strings.TrimPrefix(path.Clean("/"+subdir), "/")
	}
	return m, subdir, true
}

// AddUnmirrorable adds u to the spec's Unmirrorable unless it holds it
// already, by a lookup in a set of them (made again when Unmirrorable
// was changed by other means): the packages a sync reads may list tens
// of thousands, which a search of the list for each took time quadratic
// in.
func (s *Spec) AddUnmirrorable(u string) {
	if s.unmirrorable == nil || len(s.unmirrorable) != len(s.Unmirrorable) {
		s.unmirrorable = make(map[string]bool, len(s.Unmirrorable))
		for _, v := range s.Unmirrorable {
			s.unmirrorable[v] = true
		}
	}
	if !s.unmirrorable[u] {
		s.unmirrorable[u] = true
		s.Unmirrorable = append(s.Unmirrorable, u)
	}
}
