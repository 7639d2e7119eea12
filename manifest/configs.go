package manifest

// Configurations as Terraform judges them: a root module and every module
// it calls, local and from a registry, are one configuration, whose
// constraints on a provider all apply; configuration directories are
// judged each on its own.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// ModuleDir is what ReadModuleDir read of the configuration of a module
// (with the local modules it calls).
type ModuleDir struct {
	// Modules are the registry modules it calls, each once, with every
	// call of them merged (see ReadModuleDir).
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
	// Exact is the set of versions meeting all of Constraints,
	// prereleases among them (versions.MeetingConstraintsExact): what
	// Terraform installs, judging them with the rest of a
	// configuration's, is meetingAll of that intersection.
	Exact versions.Set
	// Named are the prereleases Constraints name exactly, each once.
	Named versions.List
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

	// own is the selection Load gave each provider of Requires alone,
	// which AddConfigSelections takes back where it gives the
	// configuration's as a whole.
	own map[addrs.Provider]Selection
}

// maxSelectionConstraints is the most constraints the Text of a
// selection AddConfigSelections makes names: a configuration calling
// many modules may constrain a provider thousands of times.
const maxSelectionConstraints = 8

// asked is what some modules ask of one provider: the distinct
// constraints, in first-seen order, and the sets of versions that meet
// them, each set kept only when it brings a constraint not seen before
// (so that a provider constrained alike by thousands of modules is
// intersected a few times, not thousands).
type asked struct {
	texts []string
	has   map[string]bool
	sets  []versions.Set
	named versions.List // the prereleases the constraints name exactly
}

// askedOf is what some modules ask of each provider, in first-seen order.
type askedOf struct {
	byAddr map[addrs.Provider]*asked
	order  []addrs.Provider
}

// of is what is asked of p, added when nothing was.
func (o *askedOf) of(p addrs.Provider) *asked {
	if o.byAddr == nil {
		o.byAddr = map[addrs.Provider]*asked{}
	}
	a, ok := o.byAddr[p]
	if !ok {
		a = &asked{has: map[string]bool{}}
		o.byAddr[p] = a
		o.order = append(o.order, p)
	}
	return a
}

// add adds the constraints texts, all of whose versions set meets
// (prereleases among them), and named, the prereleases they name exactly.
func (a *asked) add(texts []string, set versions.Set, named versions.List) {
	for _, v := range named {
		if !slices.ContainsFunc(a.named, v.Same) {
			a.named = append(a.named, v)
		}
	}
	fresh := false
	for _, t := range texts {
		if !a.has[t] {
			a.has[t] = true
			a.texts = append(a.texts, t)
			fresh = true
		}
	}
	// A set is that of its constraints, each parsed alike wherever it
	// is written: one whose constraints were all seen narrows nothing
	// the sets kept have not (and none narrows nothing).
	if fresh {
		a.sets = append(a.sets, set)
	}
}

// shared is the intersection of sets as one set (none for none) that
// an intersection it joins holds as one: versions.Intersection copies
// the members of each intersection it is given into its own, and the
// sets of thousands of modules, shared by a thousand directories, were
// copied into each directory's.
func shared(sets []versions.Set) []versions.Set {
	if len(sets) == 0 {
		return nil
	}
	set := versions.Intersection(sets...)
	// A union is not taken apart by an intersection; of one set twice,
	// it is that set.
	return []versions.Set{versions.Union(set, set)}
}

// callKey is a registry module call as AddConfigSelections tells them
// apart: module, subdirectory and the text of its selection.
type callKey [3]string

func keyOf(c Call) callKey { return callKey{c.Module.String(), c.Subdir, c.Selection} }

// AddConfigSelections adds to the spec, for each configuration directory
// Load read (Configs), the version of each provider that Terraform would
// install for the configuration as a whole: the newest version meeting
// the constraints of its root module, of the local modules it calls and
// of the registry modules it calls, all together, and those these call,
// each module version's package resolved by read (false for one not
// read: its constraints are unknown, and left out). A provider the
// registry modules ask nothing of, or that the directory's lock file
// locks, has the selection Load gave it already and gets none. One they
// do ask of gets the directory's selection in place of the one Load gave
// for the directory's own constraints alone: Terraform installs the one
// version meeting them all, not also the newest the root module alone
// allows. Each directory is judged on its own: the selections of two
// are both synced.
// A selection nothing meets names the directory; Terraform would refuse
// to install the configuration.
//
// The packages are strangers', and may call one another in cycles and
// diamonds: read is called once for each distinct call (module,
// subdirectory, selection), and what a call asks with all it reaches is
// gathered once for each distinct call a directory makes, not again for
// each directory making it, so that the work is bounded by the distinct
// calls of the directories times the calls the packages make, not by the
// number of directories; the directories making the same calls share
// what these ask, one set of versions for each provider, which each
// directory's selection holds, not a copy of its thousands of
// constraints.
func (s *Spec) AddConfigSelections(read func(Call) (ModuleDir, bool)) {
	type readOf struct {
		md ModuleDir
		ok bool
	}
	packages := map[callKey]readOf{}
	readOnce := func(c Call) (ModuleDir, bool) {
		k := keyOf(c)
		r, done := packages[k]
		if !done {
			r.md, r.ok = read(c)
			packages[k] = r
		}
		return r.md, r.ok
	}
	// reached is what each call a directory makes asks with all the
	// registry modules it reaches, each provider's sets intersected
	// into one.
	reached := map[callKey]*askedOf{}
	reach := func(root Call) *askedOf {
		if o, ok := reached[keyOf(root)]; ok {
			return o
		}
		o := &askedOf{}
		visited := map[callKey]bool{}
		queue := []Call{root}
		for len(queue) > 0 {
			call := queue[0]
			queue = queue[1:]
			k := keyOf(call)
			if visited[k] {
				continue
			}
			visited[k] = true
			md, ok := readOnce(call)
			if !ok {
				continue
			}
			for _, q := range md.Requires {
				o.of(q.Provider).add(q.Constraints, q.Exact, q.Named)
			}
			queue = append(queue, md.Calls...)
		}
		for _, a := range o.byAddr {
			a.sets = shared(a.sets)
			a.has = nil // no longer added to
		}
		reached[keyOf(root)] = o
		return o
	}
	// merged is what the registry module calls of a directory reach, by
	// the distinct calls it makes, in order: the directories making the
	// same calls (a thousand calling one module) share it.
	merged := map[string]*askedOf{}
	mergedOf := func(calls []Call) *askedOf {
		seen := map[callKey]bool{}
		var distinct []Call
		var id strings.Builder
		for _, call := range calls {
			k := keyOf(call)
			if seen[k] {
				continue
			}
			seen[k] = true
			distinct = append(distinct, call)
			for _, part := range k {
				id.WriteString(part)
				id.WriteByte(0)
			}
		}
		if o, ok := merged[id.String()]; ok {
			return o
		}
		o := &askedOf{}
		for _, call := range distinct {
			r := reach(call)
			for _, p := range r.order {
				from := r.byAddr[p]
				set := versions.All // none when nothing is constrained
				if len(from.sets) == 1 {
					set = from.sets[0]
				}
				o.of(p).add(from.texts, set, from.named)
			}
		}
		for _, a := range o.byAddr {
			a.sets = shared(a.sets)
		}
		merged[id.String()] = o
		return o
	}
	for _, c := range s.Configs {
		var own askedOf
		for _, q := range c.Requires {
			own.of(q.Provider).add(q.Constraints, q.Exact, q.Named)
		}
		mods := mergedOf(c.Calls)
		locked := map[addrs.Provider]bool{}
		for _, p := range c.Locked {
			locked[p] = true
		}
		order := slices.Clone(own.order)
		for _, p := range mods.order {
			if own.byAddr[p] == nil {
				order = append(order, p)
			}
		}
		for _, p := range order {
			m, a := mods.byAddr[p], own.byAddr[p]
			if m == nil || locked[p] {
				continue
			}
			// The directory's constraints, then its modules' it lacks:
			// the first few named, all counted.
			var first []string
			n := len(m.texts)
			var sets []versions.Set
			named := m.named
			if a != nil {
				named = append(slices.Clone(a.named), named...)
				first = append(first, a.texts[:min(len(a.texts), maxSelectionConstraints)]...)
				for _, t := range a.texts {
					if !m.has[t] {
						n++
					}
				}
				sets = append(sets, a.sets...)
			}
			for _, t := range m.texts {
				if len(first) >= maxSelectionConstraints {
					break
				}
				if a == nil || !a.has[t] {
					first = append(first, t)
				}
			}
			sets = append(sets, m.sets...)
			text := "any version"
			if n > maxSelectionConstraints {
				// Told apart from another configuration's of the same first few.
				text = fmt.Sprintf("%s and %d more, of the configuration in %s", joinConstraints(first), n-maxSelectionConstraints, c.Dir)
			} else if n > 0 {
				text = joinConstraints(first)
			}
			where := "the configuration in " + c.Dir + " with the registry modules it calls"
			if a == nil {
				where = "the registry modules the configuration in " + c.Dir + " calls"
			}
			s.add(p, []Selection{{Text: text, Set: meetingAll(intersection(sets), named), Latest: 1, Where: where}}, nil)
			if sel, ok := c.own[p]; ok {
				s.retract(p, sel)
			}
		}
	}
}

// requirementOf is r as a Requirement.
func requirementOf(r *requirement) Requirement {
	return Requirement{Provider: r.addr, Constraints: r.constraints, Exact: r.exact(), Named: r.named, Where: r.where}
}

// callOf is the registry module call c (c.module set) as a Call.
func callOf(c remoteCall) Call {
	return Call{Module: *c.module, Subdir: c.subdir, Selection: c.selection().Text}
}
