// Package manifest reads what `tfmirror sync` is asked to put in the cache:
// sync manifests, Terraform dependency lock files (.terraform.lock.hcl) and
// the providers a configuration directory needs (its .tf and .tf.json
// files and those of its local child modules: required_providers,
// provider blocks, and the providers resources and data sources imply,
// as its Client reads it: Terraform, or OpenTofu, which reads its own
// .tofu and .tofu.json files too and evaluates a module's source and
// version from variables and locals: static.go), all parsed with
// HashiCorp's HCL library.
//
// It owns the formats and their validation (errors name file:line) and
// turns them into a Spec: providers, each with version selections, and
// platforms. It does not resolve selections against any version list
// (Selection.Select does that for a list its caller obtained) and contacts
// nothing.
package manifest

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/apparentlymart/go-versions/versions/constraints"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// Client is a client whose install sync reproduces.
type Client int

const (
	// Terraform reads a module's *.tf and *.tf.json files, and takes an
	// address naming no host as registry.terraform.io's.
	Terraform Client = iota
	// OpenTofu reads its *.tofu and *.tofu.json files too, each standing
	// in for the .tf (.tf.json) file of its name, and takes an address
	// naming no host as registry.opentofu.org's.
	OpenTofu
)

// String is the client's name as --client takes it.
func (c Client) String() string {
	if c == OpenTofu {
		return "opentofu"
	}
	return "terraform"
}

// MarshalText is the client's name (String).
func (c Client) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText parses a client's name: "terraform" or "opentofu".
func (c *Client) UnmarshalText(b []byte) error {
	switch string(b) {
	case "terraform":
		*c = Terraform
	case "opentofu":
		*c = OpenTofu
	default:
		return fmt.Errorf("client %q: want terraform or opentofu", b)
	}
	return nil
}

// LockFileName is the name Terraform gives dependency lock files.
const LockFileName = ".terraform.lock.hcl"

// Spec is what to sync: providers with their selections, and platforms.
type Spec struct {
	// Client is the client whose reading of a configuration the spec
	// takes, for the configuration directories it loads and the registry
	// module packages ReadModuleDir reads: the files it reads, and the
	// registry of a provider address or module source that names none
	// (Terraform's registry.terraform.io, OpenTofu's
	// registry.opentofu.org). A sync manifest's addresses are tfmirror's,
	// whatever the client: one naming no host is registry.terraform.io's.
	Client Client
	// Platforms are the os_arch platforms every provider is synced for,
	// from the manifests' top-level platforms attributes, in first-seen
	// order.
	Platforms []string
	// Providers are the providers asked for, each once, in first-seen
	// order.
	Providers []*Provider
	// Modules are the registry modules asked for (by manifests' module
	// blocks and configurations' module calls), each once, in first-seen
	// order (see modules.go).
	Modules []*Module
	// CLIs are the command-line releases asked for (cli blocks), each
	// product once, in first-seen order.
	CLIs []*CLI
	// Configs are the configuration directories read, each as Terraform
	// judges a root module with what it calls (see AddConfigSelections),
	// in the order given.
	Configs []*Config
	// Unmirrorable are the module calls of configurations whose source is
	// neither local nor a registry address (git::, URLs), as "file:line:
	// source" (and those of packages its caller listed, ReadModuleDir):
	// the clients fetch those themselves.
	Unmirrorable []string
	// Warnings are what the configuration directories hold that the
	// clients will refuse, and sync still does what they ask: a lock
	// file locking a version that the configuration's constraints do
	// not allow ("terraform init" fails there until -upgrade), as
	// "dir/.terraform.lock.hcl: ...".
	Warnings []string

	unmirrorable map[string]bool              // the set of Unmirrorable (AddUnmirrorable)
	inputs       []Input                      // the values of configuration directories' variables (Reading.Inputs)
	providers    map[addrs.Provider]*Provider // Providers by address (add)
}

// Provider is one provider asked for, with everything that asked for it.
type Provider struct {
	Address addrs.Provider
	// Selections say which versions to sync; the union of what they
	// select is synced. Those alike are one (Selection.Calls).
	Selections []Selection
	// Platforms are platforms this provider is synced for in addition
	// to Spec.Platforms.
	Platforms []string

	alike alikeIndex // Selections by constraint (mergeSelections)
}

// CLI is one command-line product asked for by a manifest's cli block:
// "tofu" is OpenTofu's, any other name a HashiCorp product ("terraform").
type CLI struct {
	Product string
	// Selections say which versions to sync, as a provider's do.
	Selections []Selection
	// Platforms are platforms it is synced for in addition to
	// Spec.Platforms.
	Platforms []string
}

// Selection selects versions of a provider from its version list.
type Selection struct {
	// Text is the constraint as written ("~> 5.0", "4.67.0"), or the
	// exact version of a lock file.
	Text string
	// Set is the set of versions the constraint allows, with Terraform's
	// rules (prereleases only when named exactly).
	Set versions.Set
	// Call, when set, selects in place of Set: the version constraint of
	// a configuration's module call, which the clients read by rules of
	// their own (addrs.ModuleCallVersions).
	Call *addrs.ModuleCallVersions
	// Latest, when positive, keeps only the newest Latest versions of
	// the list that Set allows; 0 keeps them all.
	Latest int
	// Where is the file:line that asked for it (the first of them, when
	// Calls counts more than one).
	Where string
	// Calls is how many asked for it alike (module calls, directories,
	// packages, a manifest's blocks: the same Text and Latest, which the
	// spec merges into one Selection); 0 or 1 is the one at Where.
	Calls int
	// Subdirs are, for a module's, the subdirectories of its package
	// that the calls selecting by it use (a source's //SUBDIR; "" is the
	// module itself): those of the versions it selects are read, not
	// every subdirectory another constraint's calls use. None: the
	// module's Subdirs.
	Subdirs []string
}

// Has reports whether s allows v (Call's rules, or Set's), before Latest.
func (s Selection) Has(v versions.Version) bool {
	if s.Call != nil {
		return s.Call.Has(v)
	}
	return s.Set.Has(v)
}

// Select returns the versions of available that s selects, newest first.
func (s Selection) Select(available versions.List) versions.List {
	var out versions.List
	for _, v := range available {
		if s.Has(v) {
			out = append(out, v)
		}
	}
	out.Sort()
	slices.Reverse(out)
	out = slices.CompactFunc(out, func(a, b versions.Version) bool { return a.Same(b) })
	if s.Latest > 0 && len(out) > s.Latest {
		out = out[:s.Latest]
	}
	return out
}

// Stdin is the path that names a sync manifest read from standard input
// (LoadFrom), as "tfmirror sync -" takes it.
const Stdin = "-"

// StdinName is what the diagnostics of a manifest read from standard
// input call it.
const StdinName = "(standard input)"

// Load reads each path: a directory (its configuration, as Terraform
// reads it, and lock file), a file named .terraform.lock.hcl (a lock
// file), or any other file (a sync manifest). What the paths ask for is
// merged into one Spec. Every file is opened as an operator's file is
// (internal/hclfile.Parse): a FIFO, a device or a socket, which would
// keep a read waiting or never end, is refused; Stdin is refused too
// (see LoadFrom).
func Load(paths ...string) (*Spec, error) {
	return LoadFrom(nil, paths...)
}

// LoadFrom is Load, and reads the sync manifest the path Stdin names from
// stdin, up to hclfile.MaxBytes: the one stream a command reads that is
// no regular file, which its operator asked for. Stdin may be given once;
// without stdin (nil) it is refused.
func LoadFrom(stdin io.Reader, paths ...string) (*Spec, error) {
	return LoadFor(Terraform, stdin, paths...)
}

// LoadFor is LoadFrom of the configuration directories as client reads
// them (Spec.Client).
func LoadFor(client Client, stdin io.Reader, paths ...string) (*Spec, error) {
	return LoadWith(Reading{Client: client}, stdin, paths...)
}

// Reading is how the configuration directories are read: as Client
// reads them, and with OpenTofu the values Inputs gives their variables.
type Reading struct {
	Client Client
	// Inputs are the values given for the variables of each
	// configuration directory (each root module), in their order, a
	// later one replacing an earlier: with Client OpenTofu, a module
	// block's source and version may refer to variables and locals,
	// which sync evaluates as `tofu init` does (staticScope), taking
	// Inputs as it takes -var and -var-file. Terraform reads them as
	// literals.
	Inputs []Input
}

// LoadWith is LoadFrom of the configuration directories as r says.
func LoadWith(r Reading, stdin io.Reader, paths ...string) (*Spec, error) {
	spec := &Spec{Client: r.Client, inputs: r.Inputs}
	if n := countStdin(paths); n > 1 {
		return nil, fmt.Errorf("%q (standard input) is given %d times: it can be read once", Stdin, n)
	} else if n == 1 && stdin == nil {
		return nil, fmt.Errorf("%q (standard input) is not read here", Stdin)
	}
	for _, path := range paths {
		if path == Stdin {
			if err := spec.loadManifestFrom(StdinName, stdin); err != nil {
				return nil, err
			}
			continue
		}
		fi, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		switch {
		case fi.IsDir():
			err = spec.loadDir(path)
		case filepath.Base(path) == LockFileName:
			var locked []lockedProvider
			if locked, err = parseLockFile(path); err == nil {
				for _, l := range locked {
					spec.add(l.addr, []Selection{l.selection}, nil)
				}
			}
		default:
			err = spec.loadManifest(path)
		}
		if err != nil {
			return nil, err
		}
	}
	return spec, nil
}

func countStdin(paths []string) int {
	n := 0
	for _, p := range paths {
		if p == Stdin {
			n++
		}
	}
	return n
}

// add merges selections and platforms for addr into the spec.
//
// A provider is found by a lookup in an index of Providers (made again
// when Providers was changed by other means), not by a search of them:
// a stranger's package that sync reads may name tens of thousands.
func (s *Spec) add(addr addrs.Provider, sel []Selection, platforms []string) {
	p := s.provider(addr)
	if p == nil {
		p = &Provider{Address: addr}
		s.providers[addr] = p
		s.Providers = append(s.Providers, p)
	}
	p.Selections, p.alike = mergeSelections(p.Selections, p.alike, sel)
	p.Platforms = appendNew(p.Platforms, platforms...)
}

// provider is the provider of Providers at addr, nil for none, found in
// their index (made again when Providers was changed by other means).
func (s *Spec) provider(addr addrs.Provider) *Provider {
	if s.providers == nil || len(s.providers) != len(s.Providers) {
		s.providers = make(map[addrs.Provider]*Provider, len(s.Providers))
		for _, p := range s.Providers {
			s.providers[p.Address] = p
		}
	}
	return s.providers[addr]
}

// retract takes back one add of sel for addr: the selection alike in
// its list counts one call fewer, and goes when it counted one.
func (s *Spec) retract(addr addrs.Provider, sel Selection) {
	p := s.provider(addr)
	if p == nil {
		return
	}
	i := slices.IndexFunc(p.Selections, func(have Selection) bool {
		return have.Text == sel.Text && have.Latest == sel.Latest
	})
	switch {
	case i < 0:
	case p.Selections[i].Calls > 1:
		p.Selections[i].Calls--
	default:
		p.Selections = slices.Delete(p.Selections, i, i+1)
		p.alike = nil // made again by the next merge
	}
}

// alikeKey tells selections apart: those of one constraint (Text) and
// one Latest, read by the same rules (a module call's or not), select
// the same versions, and are one.
type alikeKey struct {
	text   string
	latest int
	call   bool
}

// alikeIndex is the position of each selection of a list by its
// alikeKey.
type alikeIndex map[alikeKey]int

// mergeSelections appends to list the selections of add, each merged
// into the one alike in list when there is one: its Calls counts both,
// its Where stays the first's. A provider or module required alike by
// many directories, packages and calls is then one selection, checked
// against its version list once and reported once when nothing meets
// it. Each is merged by a lookup in index, list's (made anew when nil or
// not list's: a list set without it); it returns list and index.
func mergeSelections(list []Selection, index alikeIndex, add []Selection) ([]Selection, alikeIndex) {
	if index == nil || len(index) != len(list) {
		index = make(alikeIndex, len(list))
		var merged []Selection
		merged, index = appendSelections(merged, index, list)
		list = merged
	}
	return appendSelections(list, index, add)
}

// appendSelections is mergeSelections once index is list's.
func appendSelections(list []Selection, index alikeIndex, add []Selection) ([]Selection, alikeIndex) {
	for _, sel := range add {
		k := alikeKey{sel.Text, sel.Latest, sel.Call != nil}
		if i, ok := index[k]; ok {
			list[i].Calls = max(list[i].Calls, 1) + max(sel.Calls, 1)
			// Clipped: the list's selection may share its slice.
			list[i].Subdirs = appendNew(slices.Clip(list[i].Subdirs), sel.Subdirs...)
			continue
		}
		index[k] = len(list)
		list = append(list, sel)
	}
	return list, index
}

// appendNew appends the items of add that list does not hold yet.
func appendNew(list []string, add ...string) []string {
	for _, a := range add {
		if !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	return list
}

// parseConstraint parses a Terraform provider version constraint ("~> 5.0",
// ">= 1.2, < 2.0", "4.67.0"), as Terraform does.
func parseConstraint(s string) (versions.Set, error) {
	return meeting(addrs.ParseConstraint(s))
}

// parseModuleConstraint parses a registry module's version constraint,
// whose versions may be spelt with a leading "v" (addrs.ParseModuleConstraint).
func parseModuleConstraint(s string) (versions.Set, error) {
	return meeting(addrs.ParseModuleConstraint(s))
}

func meeting(spec constraints.IntersectionSpec, err error) (versions.Set, error) {
	if err != nil {
		return versions.None, err
	}
	return versions.MeetingConstraints(spec), nil
}

// parseConstraintExact is the set of versions meeting the provider
// version constraint s, prereleases among them
// (versions.MeetingConstraintsExact): what a configuration asks of a
// provider, judged with what the rest of it asks (meetingAll).
func parseConstraintExact(s string) (versions.Set, error) {
	spec, err := addrs.ParseConstraint(s)
	if err != nil {
		return versions.None, err
	}
	return versions.MeetingConstraintsExact(spec), nil
}

// intersection is the intersection of sets, all versions for none
// (where versions.Intersection gives none).
func intersection(sets []versions.Set) versions.Set {
	if len(sets) == 0 {
		return versions.All
	}
	return versions.Intersection(sets...)
}

// meetingAll is the set of versions Terraform and OpenTofu install from
// for a provider that a configuration constrains with exact, the
// intersection of every constraint's exact set (parseConstraintExact),
// named being the prereleases the constraints name exactly
// (prereleasesNamed): released versions meeting them all, and a
// prerelease named meeting them all, as versions.MeetingConstraints
// judges the configuration's constraints together. A prerelease one
// module names exactly ("5.1.0-beta1") and another admits (">= 5.0") is
// installed; each judged alone, the second would exclude it. named is
// given, not read from exact (versions.Set.AllRequested), which copies
// every member of an intersection of thousands of constraints.
func meetingAll(exact versions.Set, named versions.List) versions.Set {
	set := versions.Intersection(versions.Released, exact)
	if named = named.Filter(exact); len(named) > 0 {
		set = versions.Union(versions.Selection(named...), set)
	}
	return set
}

// prereleasesNamed appends to list the prereleases that the exact set
// of one constraint (parseConstraintExact) names exactly, each once.
func prereleasesNamed(list versions.List, exact versions.Set) versions.List {
	named := exact.AllRequested()
	if named == versions.None {
		return list
	}
	for _, v := range named.List() {
		if v.Prerelease != "" && !slices.ContainsFunc(list, v.Same) {
			list = append(list, v)
		}
	}
	return list
}
