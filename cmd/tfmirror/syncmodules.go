package main

// Registry modules in `tfmirror sync`: the modules a manifest or a
// configuration asks for are resolved against the origin's version list,
// their packages cached, and their configuration read for the providers
// and further registry modules they call, which are synced too.

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/admin"
	"github.com/tfmirror/tfmirror/v2/internal/scratch"
	"github.com/tfmirror/tfmirror/v2/manifest"
	"github.com/tfmirror/tfmirror/v2/mirror/unsigned"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// moduleOps is what sync needs for registry modules, part of engineOps.
type moduleOps interface {
	ModuleVersions(ctx context.Context, m addrs.Module) ([]string, error)

	UnpackModule(ctx context.Context, m addrs.Module, version, dir string) (admin.Module, error)
}

// maxModuleDepth bounds how deep registry modules calling registry
// modules are followed.
const maxModuleDepth = 16

// maxSyncModuleCalls bounds the registry module calls one sync follows
// from the packages it reads, calls counted as manifest.Module.Calls
// counts them (each package making at most
// manifest.MaxPackageModuleCalls): each is a version list asked of an
// origin, and a package to fetch and read. The modules the operator's
// manifests and configurations name are not counted.
const maxSyncModuleCalls = 20000

// maxSyncModuleSources bounds the module sources that are not registry
// addresses (git::, URLs) one sync lists from the packages it reads, each
// package listing at most manifest.MaxPackageModuleSources: each is a
// line of the sync's output, and a string held until it ends. Those of
// the operator's manifests and configurations are not counted.
const maxSyncModuleSources = 20000

// moduleSync is the outcome of syncing the registry modules of a spec.
type moduleSync struct {
	fetched, cached int
	failures        []string
	skipped         []string // what the package policy holds back, and why
	// listed counts the module sources of packages listed as
	// unmirrorable, within maxSyncModuleSources.
	listed int
	// chosen is the version each registry module call takes (the newest
	// its selection allows), by module and selection text; packages
	// what was read of each module version's subdirectory, by module,
	// version and subdirectory, the registry module calls only of those
	// whose calls were followed (unfollowed): what
	// Spec.AddConfigSelections judges each configuration directory with.
	chosen   map[[2]string]versions.Version
	packages map[[3]string]manifest.ModuleDir
}

// unfollowed forgets the registry module calls of the subdirectories
// subdirs of version v of m, which are not followed (a failure of the
// sync): only the calls followed are held for AddConfigSelections, within
// maxSyncModuleCalls, not the up to manifest.MaxPackageModuleCalls of
// each package read past the bound, which thousands of packages would
// make millions.
func (res *moduleSync) unfollowed(m *manifest.Module, v versions.Version, subdirs []string) {
	for _, sub := range subdirs {
		k := [3]string{m.Address.String(), v.String(), sub}
		if md, ok := res.packages[k]; ok {
			md.Calls = nil
			res.packages[k] = md
		}
	}
}

// read is what was read of the package of the version that call takes,
// at its subdirectory; false when none was.
func (res *moduleSync) read(call manifest.Call) (manifest.ModuleDir, bool) {
	v, ok := res.chosen[[2]string{call.Module.String(), call.Selection}]
	if !ok {
		return manifest.ModuleDir{}, false
	}
	md, ok := res.packages[[3]string{call.Module.String(), v.String(), call.Subdir}]
	return md, ok
}

// syncModules caches every registry module version spec asks for (and
// those they call, recursively), adding to spec the providers the
// packages of its Standalone modules ask, and keeping what each package
// asks (res.packages) for AddConfigSelections. It lists the module
// sources that are not registry addresses.
func (r *syncRun) syncModules(ctx context.Context, spec *manifest.Spec) moduleSync {
	res := moduleSync{chosen: map[[2]string]versions.Version{}, packages: map[[3]string]manifest.ModuleDir{}}
	if len(spec.Modules) == 0 {
		return res
	}
	type item struct {
		mod   *manifest.Module
		depth int
	}
	// queues are the Standalone modules (a manifest's) with all they
	// call, followed first, each package read adding what it asks alone,
	// then those only the configurations' calls reach, whose packages
	// AddConfigSelections judges with the configurations (a version read
	// for the first is not read again for the second).
	var queues [2][]item
	queueOf := func(m *manifest.Module) int {
		if m.Standalone {
			return 0
		}
		return 1
	}
	for _, m := range spec.Modules {
		q := queueOf(m)
		queues[q] = append(queues[q], item{m, 0})
	}
	// read are the subdirectories of each module version whose
	// configuration was read (or tried), by "ADDRESS@VERSION": packages
	// may call different subdirectories of one version, each needing its
	// own providers and modules; counted those whose package was counted.
	read := map[string][]string{}
	counted := map[string]bool{}
	// followed are the module calls of packages followed so far, within
	// bound (maxSyncModuleCalls, lowered by tests).
	followed, bound := 0, r.maxModuleCalls
	if bound <= 0 {
		bound = maxSyncModuleCalls
	}
	// Named as module work's scratch, which the next start on the data
	// directory removes when this process is killed before it does.
	// The serve unpacks each package into a directory of it: when this
	// runs as root through the serve of the data directory's owner, they
	// are that user's.
	work, err := os.MkdirTemp(r.cfg.DataDir, scratch.Pattern(scratch.Module, "sync", ""))
	if err != nil {
		res.failures = append(res.failures, fmt.Sprintf("registry modules: %v", err))
		return res
	}
	defer os.RemoveAll(work)
	if err := handToDataDirOwner(work, r.cfg.DataDir); err != nil {
		res.failures = append(res.failures, fmt.Sprintf("registry modules: %v", err))
		return res
	}
	// Interrupted (ctx done), what is left is not synced, and did not
	// fail: the sync says it was interrupted, and the next run does it.
	for ctx.Err() == nil {
		q := 1 // the others, once no Standalone one is left
		if len(queues[0]) > 0 {
			q = 0
		}
		if len(queues[q]) == 0 {
			break
		}
		it := queues[q][0]
		queues[q] = queues[q][1:]
		m := it.mod
		raw, err := r.ops.ModuleVersions(ctx, m.Address)
		if interrupted(ctx, err) {
			break
		}
		held := r.heldBack(ctx, policy.Module, m.Address.String())
		if h, ok := held[""]; ok && err != nil {
			res.skipped = appendMissing(res.skipped, fmt.Sprintf("module %s: %s", m.Address, heldMessage(h)))
			continue
		}
		if err != nil {
			res.failures = append(res.failures, fmt.Sprintf("module %s: version list: %v", m.Address, err))
			continue
		}
		byVersion := map[string]string{}
		var available versions.List
		for _, s := range raw {
			v, err := addrs.ParseModuleVersion(s)
			if err != nil {
				continue
			}
			available = append(available, v)
			byVersion[v.String()] = s
		}
		var selected versions.List
		// The subdirectories each version is read at: those the calls
		// selecting it use, not those of calls selecting other versions
		// (a module's //modules/x at 2.0.0 is none of 1.0.0's).
		subdirsOf := map[string][]string{}
		for _, sel := range m.Selections {
			got, skipped := selectServed(sel, available, held, "module "+m.Address.String())
			res.skipped = appendMissing(res.skipped, skipped...)
			if len(got) == 0 && len(skipped) == 0 {
				res.failures = append(res.failures, fmt.Sprintf("module %s: no version matches %s (%s)", m.Address, quotedConstraint(sel.Text), askedBy(sel, "%d calls")))
			}
			if sel.Latest == 1 && len(got) > 0 {
				res.chosen[[2]string{m.Address.String(), sel.Text}] = got[0]
			}
			uses := sel.Subdirs
			if len(uses) == 0 {
				uses = m.Subdirs
			}
			for _, v := range got {
				if !slices.ContainsFunc(selected, v.Same) {
					selected = append(selected, v)
				}
				for _, s := range uses {
					if !slices.Contains(subdirsOf[v.String()], s) {
						subdirsOf[v.String()] = append(subdirsOf[v.String()], s)
					}
				}
			}
		}
		for _, v := range selected {
			key := m.Address.String() + "@" + v.String()
			prev, seen := read[key]
			subdirs := slices.DeleteFunc(slices.Clone(subdirsOf[v.String()]), func(s string) bool { return slices.Contains(prev, s) })
			if seen && len(subdirs) == 0 {
				continue
			}
			read[key] = append(prev, subdirs...)
			mod := *m
			mod.Subdirs = subdirs
			dir, err := os.MkdirTemp(work, "pkg-*")
			if err == nil {
				err = handToDataDirOwner(dir, r.cfg.DataDir)
			}
			if err != nil {
				res.failures = append(res.failures, fmt.Sprintf("module %s %s: %v", m.Address, v, err))
				continue
			}
			dir, _ = filepath.Abs(dir)
			calls, err := r.syncModule(ctx, spec, &mod, v, dir, byVersion[v.String()], !counted[key], &res)
			os.RemoveAll(dir)
			if err == nil {
				counted[key] = true
			}
			if interrupted(ctx, err) {
				break
			}
			if err != nil {
				res.failures = append(res.failures, err.Error())
				continue
			}
			if it.depth+1 > maxModuleDepth {
				for _, c := range calls {
					res.failures = append(res.failures, fmt.Sprintf("module %s: registry modules nested more than %d deep", c.Address, maxModuleDepth))
				}
				res.unfollowed(m, v, subdirs)
				continue
			}
			n := 0
			for _, c := range calls {
				n += max(c.Calls, 1)
			}
			if followed+n > bound {
				res.failures = append(res.failures, fmt.Sprintf("module %s %s: its %d registry module calls are not followed: they would take this sync past %d, the most it follows from the packages it reads (%d followed)", m.Address, v, n, bound, followed))
				res.unfollowed(m, v, subdirs)
				continue
			}
			followed += n
			for _, c := range calls {
				c.Standalone = m.Standalone
				queues[q] = append(queues[q], item{c, it.depth + 1})
			}
		}
	}
	return res
}

// syncModule caches the package of version v of m, unpacks it in dir and
// reads the configuration of the subdirectories calls use, within one
// deadline, --module-timeout: the package is a stranger's, and however
// long it took to come, the time left bounds the reading of its files.
// The package is counted in res (and reported) when count is set: not
// when an earlier call read other subdirectories of the same version.
// It returns the registry modules they call; an error names the module
// (and is one failure of the sync), but for a subdirectory's, which is
// added to res on its own so that the others are read. What each
// subdirectory asks of providers and the registry modules it calls are
// kept in res.packages. The module sources the configuration calls that
// are not registry addresses are listed as spec's Unmirrorable, unless
// they would take the sources listed from packages (res.listed) past
// maxSyncModuleSources: then none is, and that is a failure naming the
// module version and the bound.
func (r *syncRun) syncModule(ctx context.Context, spec *manifest.Spec, m *manifest.Module, v versions.Version, dir, listed string, count bool, res *moduleSync) ([]*manifest.Module, error) {
	timeout := r.cfg.ModuleTimeout
	parent := ctx
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("not done within --module-timeout (%s)", timeout))
	defer cancel()
	timedOut := func(err error) error {
		if ctx.Err() != nil && context.Cause(ctx) != ctx.Err() {
			return context.Cause(ctx)
		}
		return err
	}
	got, err := r.ops.UnpackModule(ctx, m.Address, v.String(), dir)
	if err != nil {
		return nil, fmt.Errorf("module %s %s: %w", m.Address, v, timedOut(err))
	}
	if count {
		if got.CachedAlready {
			res.cached++
		} else {
			res.fetched++
		}
		fmt.Fprintf(r.status, "module %s %s: cached (%s)\n", m.Address, listed, got.SHA256[:12])
	}
	var out []*manifest.Module
	for _, sub := range m.Subdirs {
		modDir := filepath.Join(dir, filepath.FromSlash(path.Join(got.Subdir, sub)))
		md, err := spec.ReadModuleDir(ctx, dir, modDir, fmt.Sprintf("module %s %s", m.Address, v))
		if parent.Err() != nil {
			return out, nil // interrupted: not read, not failed
		}
		if err != nil {
			// Its files by their names in the package, not in the scratch directory.
			msg := strings.ReplaceAll(timedOut(err).Error(), dir+string(filepath.Separator), "")
			res.failures = append(res.failures, fmt.Sprintf("module %s %s: reading its configuration: %s", m.Address, v, msg))
			continue
		}
		if m.Standalone {
			spec.AddOwnSelections(md.Requires)
		}
		out = append(out, md.Modules...)
		r.listSources(spec, m, v, md.Sources, res)
		res.packages[[3]string{m.Address.String(), v.String(), sub}] = manifest.ModuleDir{Requires: md.Requires, Calls: md.Calls}
	}
	return out, nil
}

// listSources lists others, the module sources that are not registry
// addresses which version v of m calls, as spec's Unmirrorable, within
// the bound on those listed from packages (maxSyncModuleSources, lowered
// by tests): past it none is, and that is one failure in res naming the
// module version, their number and the bound.
func (r *syncRun) listSources(spec *manifest.Spec, m *manifest.Module, v versions.Version, others []string, res *moduleSync) {
	bound := r.maxModuleSources
	if bound <= 0 {
		bound = maxSyncModuleSources
	}
	if n := len(others); res.listed+n > bound {
		res.failures = append(res.failures, fmt.Sprintf("module %s %s: its %d module sources that are not registry addresses are not listed: they would take this sync past %d, the most it lists from the packages it reads (%d listed)", m.Address, v, n, bound, res.listed))
		return
	}
	res.listed += len(others)
	for _, u := range others {
		spec.AddUnmirrorable(u)
	}
}

// askedBy says where sel was asked for: its file:line, and how many
// asked for it when more than one did, as many says it ("%d calls" of a
// module's, "asked %d times" of a provider's, which directories and
// packages ask as well as calls).
func askedBy(sel manifest.Selection, many string) string {
	if sel.Calls > 1 {
		return fmt.Sprintf(many+", the first at %s", sel.Calls, sel.Where)
	}
	return sel.Where
}

func trimV(s string) string {
	if len(s) > 1 && s[0] == 'v' {
		return s[1:]
	}
	return s
}

// modules syncs spec's registry modules (listing them only, on a dry
// run), says which module sources cannot be mirrored, and settles the
// platforms of the providers the modules added.
func (r *syncRun) modules(ctx context.Context, spec *manifest.Spec) moduleSync {
	var res moduleSync
	switch {
	case len(spec.Modules) == 0:
	case r.cfg.DryRun:
		for _, m := range spec.Modules {
			fmt.Fprintf(r.out, "would sync module %s and the providers and modules it calls\n", m.Address)
		}
	default:
		res = r.syncModules(ctx, spec)
		fmt.Fprintf(r.out, "modules: %d packages fetched, %d already cached\n", res.fetched, res.cached)
		// Each directory with the registry modules it calls, as
		// Terraform judges it, now that their packages are read.
		spec.AddConfigSelections(res.read)
		if err := resolvePlatforms(spec, r.cfg.SyncPlatforms); err != nil {
			res.failures = append(res.failures, err.Error())
		}
	}
	// Those the packages synced call too, now that they are read.
	for _, u := range spec.Unmirrorable {
		fmt.Fprintf(r.status, "not a registry module, fetched by the clients themselves (use a registry address to mirror it): %s\n", shown(u))
	}
	return res
}

// heldBack is what the package policy in force holds back of addr, by
// version ("" for the address itself); nil when the engine says nothing
// (a tfmirror serve of an earlier release).
func (r *syncRun) heldBack(ctx context.Context, kind policy.Kind, addr string) map[string]unsigned.Version {
	hs, err := r.ops.Held(ctx, admin.PolicyRequest{Kind: string(kind), Address: addr})
	if err != nil || len(hs) == 0 {
		return nil
	}
	out := map[string]unsigned.Version{}
	for _, h := range hs {
		out[h.Version] = h
	}
	return out
}

// heldMessage is why the policy holds h back, for the operator.
func heldMessage(h unsigned.Version) string {
	msg := "held back by the package policy (" + h.Rule + "): " + h.Reason
	if !h.AvailableAt.IsZero() {
		msg += "; available at " + h.AvailableAt.UTC().Format(time.RFC3339)
	}
	return msg
}

// selectServed applies sel to the versions served (available), and
// says which versions the policy holds back (held) that sel would have
// taken with them: each "what VERSION: why".
func selectServed(sel manifest.Selection, available versions.List, held map[string]unsigned.Version, what string) (versions.List, []string) {
	got := sel.Select(available)
	if len(held) == 0 {
		return got, nil
	}
	all := slices.Clone(available)
	for v := range held {
		if pv, err := addrs.ParseSemver(v); err == nil {
			all = append(all, pv)
		}
	}
	var skipped []string
	for _, v := range sel.Select(all) {
		if h, ok := held[v.String()]; ok && !slices.ContainsFunc(got, v.Same) {
			skipped = append(skipped, fmt.Sprintf("%s %s: %s", what, v, heldMessage(h)))
		}
	}
	return got, skipped
}
