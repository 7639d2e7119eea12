package manifest

// Configurations as Terraform judges them: a root module and every module
// it calls, local and from a registry, are one configuration, whose
// constraints on a provider all apply; configuration directories are
// judged each on its own.

import (
	"fmt"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// ModuleDir is what AddModuleDir read of the configuration of a module
// (with the local modules it calls).
type ModuleDir struct {
	// Modules are the registry modules it calls, each once, with every
	// call of them merged (see AddModuleDir).
	Modules []*Module
	// Sources are its module calls of other sources (git::, URLs), each
	// source once, as "WHAT: SOURCE".
	Sources []string
	// Requires are what it asks of each provider, one Requirement a
	// provider, in first-seen order.
	Requires []Requirement
	// Calls are its registry module calls, each distinct one once.
	Calls []Call
}

// Requirement is what one module, with the local modules it calls, asks
// of one provider.
type Requirement struct {
	Provider addrs.Provider
	// Constraints are the version constraints asked, as written, each
	// once, in first-seen order; none for any version.
	Constraints []string
	// Set is the set of released versions meeting all of Constraints.
	Set versions.Set
	// Where is the file:line of the first that asked.
	Where string
}

// Call is one registry module call: the module, the subdirectory of its
// package (a source's //SUBDIR; "" for the module itself), and the Text
// of the Selection its version constraint makes of the module's versions
// (the newest meeting it, as Terraform installs).
type Call struct {
	Module    addrs.Module
	Subdir    string
	Selection string
}

// Config is one configuration directory Load read: a root module, which
// Terraform judges with every module it calls as one configuration.
type Config struct {
	Dir string
	// Requires are what its root module and the local modules it calls
	// ask of each provider its lock file does not lock.
	Requires []Requirement
	// Locked are the providers its lock file locks: Terraform installs
	// the version locked, whatever the modules it calls ask.
	Locked []addrs.Provider
	// Calls are its registry module calls.
	Calls []Call
}

// maxSelectionConstraints is the most constraints the Text of a
// selection AddConfigSelections makes names: a configuration calling
// many modules may constrain a provider thousands of times.
const maxSelectionConstraints = 8

// AddConfigSelections adds to the spec, for each configuration directory
// Load read (Configs), the version of each provider that Terraform would
// install for the configuration as a whole: the newest version meeting
// the constraints of its root module, of the local modules it calls and
// of the registry modules it calls, all together, and those these call,
// each module version's package resolved by read (false for one not
// read: its constraints are unknown, and left out). A provider the
// registry modules ask nothing of, or that the directory's lock file
// locks, has the selection Load gave it already and gets none. Each
// directory is judged on its own: the selections of two are both synced.
// A selection nothing meets names the directory; Terraform would refuse
// to install the configuration.
func (s *Spec) AddConfigSelections(read func(Call) (ModuleDir, bool)) {
	// asked is what the modules of one configuration ask of a provider.
	type asked struct {
		texts     []string
		has       map[string]bool
		sets      []versions.Set
		own, mods bool // asked by the directory's modules, by registry modules
	}
	for _, c := range s.Configs {
		byAddr := map[addrs.Provider]*asked{}
		var order []addrs.Provider
		add := func(q Requirement, registry bool) {
			a, ok := byAddr[q.Provider]
			if !ok {
				a = &asked{has: map[string]bool{}}
				byAddr[q.Provider] = a
				order = append(order, q.Provider)
			}
			a.own = a.own || !registry
			a.mods = a.mods || registry
			a.sets = append(a.sets, q.Set)
			for _, t := range q.Constraints {
				if !a.has[t] {
					a.has[t] = true
					a.texts = append(a.texts, t)
				}
			}
		}
		for _, q := range c.Requires {
			add(q, false)
		}
		visited := map[[3]string]bool{}
		queue := append([]Call(nil), c.Calls...)
		for len(queue) > 0 {
			call := queue[0]
			queue = queue[1:]
			key := [3]string{call.Module.String(), call.Subdir, call.Selection}
			if visited[key] {
				continue
			}
			visited[key] = true
			md, ok := read(call)
			if !ok {
				continue
			}
			for _, q := range md.Requires {
				add(q, true)
			}
			queue = append(queue, md.Calls...)
		}
		locked := map[addrs.Provider]bool{}
		for _, p := range c.Locked {
			locked[p] = true
		}
		for _, p := range order {
			a := byAddr[p]
			if !a.mods || locked[p] {
				continue
			}
			text := "any version"
			if n := len(a.texts); n > maxSelectionConstraints {
				// Told apart from another configuration's of the same first few.
				text = fmt.Sprintf("%s and %d more, of the configuration in %s", joinConstraints(a.texts[:maxSelectionConstraints]), n-maxSelectionConstraints, c.Dir)
			} else if n > 0 {
				text = joinConstraints(a.texts)
			}
			where := "the configuration in " + c.Dir + " with the registry modules it calls"
			if !a.own {
				where = "the registry modules the configuration in " + c.Dir + " calls"
			}
			set := versions.Intersection(append([]versions.Set{versions.Released}, a.sets...)...)
			s.add(p, []Selection{{Text: text, Set: set, Latest: 1, Where: where}}, nil)
		}
	}
}

// requirementOf is r as a Requirement.
func requirementOf(r *requirement) Requirement {
	return Requirement{Provider: r.addr, Constraints: r.constraints, Set: r.set(), Where: r.where}
}

// callOf is the registry module call c (c.module set) as a Call.
func callOf(c remoteCall) Call {
	return Call{Module: *c.module, Subdir: c.subdir, Selection: c.selection().Text}
}
