package manifest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/hclfile"
	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/internal/logbound"
)

// where formats a source position as file:line.
func where(r hcl.Range) string { return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line) }

// posError is an error at a position in a file.
func posError(r hcl.Range, format string, args ...any) error {
	return fmt.Errorf("%s: %s", where(r), fmt.Sprintf(format, args...))
}

// diagError turns HCL's error diagnostics into one error naming file:line.
func diagError(diags hcl.Diagnostics) error {
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		if d.Subject != nil {
			return posError(*d.Subject, "%s", msg)
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

func parseFile(p *hclparse.Parser, path string) (*hcl.File, error) {
	return parsed(hclfile.Parse(p, path))
}

// parsed is a file hclfile parsed, its error diagnostics an error.
func parsed(f *hcl.File, diags hcl.Diagnostics, err error) (*hcl.File, error) {
	if err != nil {
		return nil, err
	}
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	return f, nil
}

// parsePinFile is parseFile of a pins directory's file, which others may
// replace while it is read again: what the name leads to when it is
// opened is checked and read (internal/inputfile.ReadTrusted), so a FIFO
// swapped in after the directory was listed is refused, not waited on,
// and no more than maxPinFileBytes is read of a file that grew since. A
// file its group or all users may write, or that a user other than root
// and the mirror's owns, is refused, naming it with the chmod or chown
// to run, unless on a read-only mount (a ConfigMap's): whoever may write
// it decides what retention keeps and the size limit evicts.
func parsePinFile(path string) (*hcl.File, error) {
	data, err := inputfile.ReadTrusted(path, maxPinFileBytes)
	if err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	return parsed(hclfile.ParseFrom(hclparse.NewParser(), path, bytes.NewReader(data)))
}

var manifestSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "platforms"}},
	Blocks: []hcl.BlockHeaderSchema{{Type: "provider", LabelNames: []string{"source"}}, {Type: "module", LabelNames: []string{"source"}},
		{Type: "cli", LabelNames: []string{"product"}}},
}

var manifestProviderSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "versions", Required: true},
		{Name: "latest"},
		{Name: "platforms"},
	},
}

// loadManifest reads a sync manifest:
//
//	platforms = ["linux_amd64", "darwin_arm64"]
//	provider "registry.terraform.io/hashicorp/aws" {
//	  versions  = [">= 5.0, < 6.0", "4.67.0"]
//	  latest    = 1                 # optional
//	  platforms = ["linux_arm64"]   # optional, added to the top-level list
//	}
func (s *Spec) loadManifest(path string) error {
	f, err := parseFile(hclparse.NewParser(), path)
	if err != nil {
		return err
	}
	return s.loadManifestFile(path, f)
}

// loadManifestFrom is loadManifest of the manifest read from r (standard
// input), called name in its errors.
func (s *Spec) loadManifestFrom(name string, r io.Reader) error {
	f, err := parsed(hclfile.ParseFrom(hclparse.NewParser(), name, r))
	if err != nil {
		return err
	}
	return s.loadManifestFile(name, f)
}

// loadManifestFile is loadManifest of f, the file at path parsed.
func (s *Spec) loadManifestFile(path string, f *hcl.File) error {
	content, diags := f.Body.Content(manifestSchema)
	if diags.HasErrors() {
		return diagError(diags)
	}
	if attr, ok := content.Attributes["platforms"]; ok {
		pls, err := platformList(attr)
		if err != nil {
			return err
		}
		s.Platforms = appendNew(s.Platforms, pls...)
	}
	if len(content.Blocks) == 0 {
		return fmt.Errorf("%s: no provider blocks: a manifest names at least one provider \"HOST/NAMESPACE/TYPE\" { versions = [...] }, module \"HOST/NAMESPACE/NAME/SYSTEM\" { versions = [...] } or cli \"terraform\" { versions = [...] }", path)
	}
	seen := map[addrs.Provider]string{}
	seenModules := map[string]string{} // by the module's normal form
	seenCLIs := map[string]string{}
	for _, b := range content.Blocks {
		if b.Type == "cli" {
			if err := s.loadManifestCLI(b, seenCLIs); err != nil {
				return err
			}
			continue
		}
		if b.Type == "module" {
			if err := s.loadManifestModule(b, seenModules); err != nil {
				return err
			}
			continue
		}
		addr, err := addrs.ParseProvider(b.Labels[0])
		if err != nil {
			return posError(b.LabelRanges[0], "%v", err)
		}
		if prev, dup := seen[addr]; dup {
			return posError(b.DefRange, "provider %s is already declared at %s", addr, prev)
		}
		seen[addr] = where(b.DefRange)
		sels, pls, err := providerBlock(b)
		if err != nil {
			return err
		}
		s.add(addr, sels, pls)
	}
	return nil
}

// providerBlock reads the body of a manifest's provider or cli block: its
// versions (and latest) and its platforms.
func providerBlock(b *hcl.Block) ([]Selection, []string, error) {
	pc, diags := b.Body.Content(manifestProviderSchema)
	if diags.HasErrors() {
		return nil, nil, diagError(diags)
	}
	sels, err := manifestSelections(pc, parseConstraint)
	if err != nil {
		return nil, nil, err
	}
	var pls []string
	if attr, ok := pc.Attributes["platforms"]; ok {
		if pls, err = platformList(attr); err != nil {
			return nil, nil, err
		}
	}
	return sels, pls, nil
}

// manifestSelections reads the versions (and latest) of a manifest's
// provider, cli or module block, each constraint parsed with parse.
func manifestSelections(c *hcl.BodyContent, parse func(string) (versions.Set, error)) ([]Selection, error) {
	latest := 0
	if attr, ok := c.Attributes["latest"]; ok {
		v, err := attrValue(attr, cty.Number)
		if err != nil {
			return nil, err
		}
		n, acc := v.AsBigFloat().Int64()
		if acc != 0 || n < 1 || n > 1<<20 {
			return nil, posError(attr.Expr.Range(), "latest must be a whole number of at least 1")
		}
		latest = int(n)
	}
	attr := c.Attributes["versions"]
	list, err := stringList(attr)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, posError(attr.Expr.Range(), "versions must name at least one version constraint")
	}
	var sels []Selection
	for _, c := range list {
		set, err := parse(c)
		if err != nil {
			return nil, posError(attr.Expr.Range(), "%v", err)
		}
		sels = append(sels, Selection{Text: c, Set: set, Latest: latest, Where: where(attr.Range)})
	}
	return sels, nil
}

// attrValue evaluates attr (constants only) as type ty.
func attrValue(attr *hcl.Attribute, ty cty.Type) (cty.Value, error) {
	v, diags := hclfile.Value(attr.Expr)
	if diags.HasErrors() {
		return cty.NilVal, diagError(diags)
	}
	if v.IsNull() || !v.IsKnown() {
		return cty.NilVal, posError(attr.Expr.Range(), "%s must not be null", attr.Name)
	}
	if !v.Type().Equals(ty) {
		return cty.NilVal, posError(attr.Expr.Range(), "%s must be a %s", attr.Name, ty.FriendlyName())
	}
	return v, nil
}

// stringList evaluates attr as a list of strings.
func stringList(attr *hcl.Attribute) ([]string, error) {
	v, diags := hclfile.Value(attr.Expr)
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	if v.IsNull() || !(v.Type().IsTupleType() || v.Type().IsListType()) {
		return nil, posError(attr.Expr.Range(), "%s must be a list of strings", attr.Name)
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() || !e.Type().Equals(cty.String) {
			return nil, posError(attr.Expr.Range(), "%s must be a list of strings", attr.Name)
		}
		out = append(out, e.AsString())
	}
	return out, nil
}

// platformList evaluates attr as a list of os_arch platforms.
func platformList(attr *hcl.Attribute) ([]string, error) {
	list, err := stringList(attr)
	if err != nil {
		return nil, err
	}
	for _, pl := range list {
		if _, err := addrs.ParsePlatform(pl); err != nil {
			return nil, posError(attr.Expr.Range(), "%v", err)
		}
	}
	return appendNew(nil, list...), nil
}

// lockedProvider is one provider of a lock file.
type lockedProvider struct {
	addr      addrs.Provider
	selection Selection // the locked version, exactly
}

var lockSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "provider", LabelNames: []string{"source"}}},
}

var lockProviderSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "version", Required: true}},
}

// parseLockFile reads the provider blocks of a Terraform dependency lock
// file. Attributes other than version (constraints, hashes) and other
// blocks are not needed and not checked.
func parseLockFile(path string) ([]lockedProvider, error) {
	f, err := parseFile(hclparse.NewParser(), path)
	if err != nil {
		return nil, err
	}
	return lockedProviders(f)
}

// lockedProviders are the provider blocks of f, a lock file parsed.
func lockedProviders(f *hcl.File) ([]lockedProvider, error) {
	content, _, diags := f.Body.PartialContent(lockSchema)
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	var out []lockedProvider
	for _, b := range content.Blocks {
		addr, err := addrs.ParseProvider(b.Labels[0])
		if err != nil {
			return nil, posError(b.LabelRanges[0], "%v", err)
		}
		pc, _, diags := b.Body.PartialContent(lockProviderSchema)
		if diags.HasErrors() {
			return nil, diagError(diags)
		}
		attr := pc.Attributes["version"]
		v, err := attrValue(attr, cty.String)
		if err != nil {
			return nil, err
		}
		ver, err := addrs.ParseSemver(v.AsString())
		if err != nil {
			return nil, posError(attr.Expr.Range(), "version: %v", err)
		}
		out = append(out, lockedProvider{addr: addr, selection: Selection{
			Text: ver.String(), Set: versions.Only(ver), Where: where(attr.Range),
		}})
	}
	return out, nil
}

var configSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "terraform"},
		{Type: "provider", LabelNames: []string{"name"}},
		{Type: "resource", LabelNames: []string{"type", "name"}},
		{Type: "data", LabelNames: []string{"type", "name"}},
		{Type: "ephemeral", LabelNames: []string{"type", "name"}},
		{Type: "check", LabelNames: []string{"name"}},
		{Type: "import"},
		{Type: "module", LabelNames: []string{"name"}},
	},
}

// checkSchema is the data block a check block may scope to itself.
var checkSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "data", LabelNames: []string{"type", "name"}}},
}

// importSchema is what of an import block names a provider.
var importSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "to"}, {Name: "provider"}}}

// providerVersionSchema is what of a provider block says which
// configuration it is and which versions it takes.
var providerVersionSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "alias"}, {Name: "version"}}}

// constraintAt is a version constraint as written, with its exact set
// (parseConstraintExact).
type constraintAt struct {
	text string
	set  versions.Set
}

// providerBlockVersion returns the alias of the provider block b ("" for
// none) and its version constraint, nil when it has none: deprecated
// since Terraform 0.13, and still a constraint Terraform and OpenTofu
// install by, with those of required_providers ("Finding
// hashicorp/kubernetes versions matching ~> 1.10.0" for a configuration
// naming it nowhere else).
func providerBlockVersion(b *hcl.Block) (string, *constraintAt, error) {
	content, _, diags := b.Body.PartialContent(providerVersionSchema)
	if diags.HasErrors() {
		return "", nil, diagError(diags)
	}
	var alias string
	if attr, ok := content.Attributes["alias"]; ok {
		if v, diags := hclfile.Value(attr.Expr); !diags.HasErrors() && !v.IsNull() && v.Type().Equals(cty.String) {
			alias = v.AsString()
		}
	}
	attr, ok := content.Attributes["version"]
	if !ok {
		return alias, nil, nil
	}
	v, diags := hclfile.Value(attr.Expr)
	if diags.HasErrors() {
		return "", nil, diagError(diags)
	}
	if v.IsNull() || !v.Type().Equals(cty.String) {
		return "", nil, posError(attr.Expr.Range(), "version of provider %q must be a string", b.Labels[0])
	}
	if v.AsString() == "" {
		return alias, nil, nil
	}
	set, err := parseConstraintExact(v.AsString())
	if err != nil {
		return "", nil, posError(attr.Expr.Range(), "%v", err)
	}
	return alias, &constraintAt{v.AsString(), set}, nil
}

// isOverride says whether the configuration file path is an override
// file (override.tf, NAME_override.tf, their .tf.json, and OpenTofu's
// .tofu and .tofu.json of those names), which
// Terraform and OpenTofu merge into the module's other files after
// them: a required_providers entry there replaces the module's for its
// local name, a provider block's version the version of the block of its
// name and alias.
func isOverride(path string) bool {
	base := filepath.Base(path)
	base = strings.TrimSuffix(base, ".json")
	base = strings.TrimSuffix(strings.TrimSuffix(base, configKind.tf), configKind.tofu)
	return base == "override" || strings.HasSuffix(base, "_override")
}

// primaryThenOverrides is files, the override files (isOverride) moved
// after the others, each part in its order.
func primaryThenOverrides(files []string) []string {
	out := make([]string, 0, len(files))
	for _, f := range files {
		if !isOverride(f) {
			out = append(out, f)
		}
	}
	for _, f := range files {
		if isOverride(f) {
			out = append(out, f)
		}
	}
	return out
}

// providerArgSchema is the provider meta-argument of a resource, data or
// ephemeral block.
var providerArgSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "provider"}}}

// moduleSchema is the part of a module block that says where it is.
var moduleSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "source"}, {Name: "version"}}}

var terraformBlockSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "required_providers"}},
}

// requirement is what a configuration asks of one provider.
type requirement struct {
	addr addrs.Provider
	// constraints are the distinct version constraints asked, in
	// first-seen order, each with its set of versions in sets,
	// prereleases among them (parseConstraintExact).
	constraints []string
	sets        []versions.Set
	named       versions.List   // the prereleases they name exactly
	has         map[string]bool // the set of constraints
	where       string
	name        string // the local name of the module that asked first
}

// constrain adds constraint c, whose versions are set, unless r has it.
// A stranger's package may name one provider with thousands of
// constraints: each is kept once, and the versions meeting them all
// are intersected once (set), not each constraint with those before it,
// which copied them all each time.
func (r *requirement) constrain(c string, set versions.Set) {
	if r.has == nil {
		r.has = map[string]bool{}
	}
	if r.has[c] {
		return
	}
	r.has[c] = true
	r.constraints = append(r.constraints, c)
	r.sets = append(r.sets, set)
	r.named = prereleasesNamed(r.named, set)
}

// exact is the set of versions meeting all of r's constraints,
// prereleases among them; all versions when it has none.
func (r *requirement) exact() versions.Set {
	return intersection(r.sets)
}

// selection is what q selects alone: the newest version meeting its
// constraints as Terraform takes them (meetingAll), as it installs.
func (q Requirement) selection() Selection {
	text := "any version"
	if len(q.Constraints) > 0 {
		text = joinConstraints(q.Constraints)
	}
	return Selection{Text: text, Set: meetingAll(q.Exact, q.Named), Latest: 1, Where: q.Where}
}

// loadDir reads the configuration in dir (its configuration files, and
// those of the local child modules it calls, as the spec's Client reads
// them: readTree; and the modules its test files' run blocks load:
// readTests) and its lock file, if any, and asks for what
// `terraform providers mirror` (`tofu providers mirror`) would install
// there: each locked provider's locked version, and for each provider the
// configuration needs that the lock file lacks, the newest version
// meeting its constraints from every module.
func (s *Spec) loadDir(dir string) error {
	var locked []lockedProvider
	lockPath := filepath.Join(dir, LockFileName)
	if _, err := os.Stat(lockPath); err == nil {
		if locked, err = parseLockFile(lockPath); err != nil {
			return err
		}
	}
	// The operator's own configuration: read whole, however long it
	// takes, and every module call it makes followed.
	t, err := s.readTree(context.Background(), "", dir, remoteCalls{})
	if err == nil {
		err = readTests(context.Background(), t, dir)
	}
	var none *noFilesError
	if errors.As(err, &none) {
		if len(locked) == 0 {
			return fmt.Errorf("%s: %v and no %s", dir, err, LockFileName)
		}
		t, err = &treeRead{}, nil // a lock file alone: what it locks
	}
	if err != nil {
		return err
	}
	s.addRemoteCalls(t.remotes.list)
	config := &Config{Dir: dir}
	for _, c := range t.remotes.list {
		if c.module != nil {
			config.Calls = append(config.Calls, callOf(c))
		}
	}
	isLocked := map[addrs.Provider]Selection{}
	for _, l := range locked {
		isLocked[l.addr] = l.selection
		config.Locked = append(config.Locked, l.addr)
		s.add(l.addr, []Selection{l.selection}, nil)
	}
	for _, r := range t.reqs.list {
		if lock, ok := isLocked[r.addr]; ok {
			if w := lockBreaks(lockPath, r.addr, lock, requirementOf(r)); w != "" {
				s.Warnings = append(s.Warnings, w)
			}
			continue
		}
		q := requirementOf(r)
		config.Requires = append(config.Requires, q)
		sel := q.selection()
		s.add(q.Provider, []Selection{sel}, nil)
		if config.own == nil {
			config.own = map[addrs.Provider]Selection{}
		}
		config.own[q.Provider] = sel
	}
	s.Configs = append(s.Configs, config)
	return nil
}

// lockBreaks is the warning that the lock file at lockPath locks p at
// lock's version, which q, the configuration's requirement of p, does
// not allow: Terraform and OpenTofu then refuse to init until -upgrade
// selects another, which sync does not fetch. "" when q allows it.
func lockBreaks(lockPath string, p addrs.Provider, lock Selection, q Requirement) string {
	v, err := versions.ParseVersion(lock.Text)
	if err != nil || q.selection().Set.Has(v) {
		return ""
	}
	return fmt.Sprintf("%s: locks %s at %s, which its configuration's version constraint %s (%s) does not allow: "+
		"terraform init (tofu init) fails there until -upgrade selects another version, which this sync does not fetch; "+
		"sync again after upgrading the lock file", lockPath, p, lock.Text, strconv.Quote(logbound.Cut(strings.Join(q.Constraints, ", "), 200)), q.Where)
}

// fileKind is a kind of file both clients read, by its extensions:
// Terraform's native and JSON ones, and OpenTofu's, where NAME+tofu
// (NAME+tofuJSON) stands in for NAME+tf (NAME+tfJSON) beside it, which
// OpenTofu then ignores.
type fileKind struct{ tf, tfJSON, tofu, tofuJSON string }

// Configuration files: Terraform reads a module's *.tf and *.tf.json
// files; OpenTofu its *.tofu and *.tofu.json too. Both ignore a hidden
// file (".old.tf"), an editor's or a tool's.
var configKind = fileKind{".tf", ".tf.json", ".tofu", ".tofu.json"}

// list lists the files of kind k in dir that OpenTofu reads (tofu) or
// Terraform, sorted (filesByExt), and says whether dir holds any that
// only OpenTofu reads.
func (k fileKind) list(dir string, tofu bool) (files []string, hasTofu bool, err error) {
	byExt, err := filesByExt(dir, k.tf, k.tfJSON, k.tofu, k.tofuJSON)
	if err != nil {
		return nil, false, err
	}
	hasTofu = len(byExt[k.tofu])+len(byExt[k.tofuJSON]) > 0
	files = append(byExt[k.tf], byExt[k.tfJSON]...)
	if tofu {
		files = standIn(files, byExt[k.tofu], k.tofu, k.tf)
		files = standIn(files, byExt[k.tofuJSON], k.tofuJSON, k.tfJSON)
	}
	sort.Strings(files)
	return files, hasTofu, nil
}

// configFiles lists the configuration files of the module in dir that
// OpenTofu reads (tofu) or Terraform (configKind), sorted, and says
// whether dir holds any that only OpenTofu reads.
func configFiles(dir string, tofu bool) (files []string, hasTofu bool, err error) {
	return configKind.list(dir, tofu)
}

// moduleFiles is configFiles of the module in dir, a *noFilesError when
// there is none.
func moduleFiles(dir string, tofu bool) ([]string, error) {
	files, hasTofu, err := configFiles(dir, tofu)
	if err == nil && len(files) == 0 {
		err = &noFilesError{tofu: tofu, hasTofu: hasTofu}
	}
	return files, err
}

// filesByExt lists the files in dir named NAME followed by one of exts,
// none a suffix of another, by that ext: not a hidden one (".old.tf"),
// which the clients ignore as an editor's or a tool's, nor a directory
// (a "modules.tf" directory), which they do not read. A dir that is not
// there holds none.
func filesByExt(dir string, exts ...string) (map[string][]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	byExt := map[string][]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		for _, ext := range exts {
			if len(name) > len(ext) && strings.HasSuffix(name, ext) {
				byExt[ext] = append(byExt[ext], filepath.Join(dir, name))
				break
			}
		}
	}
	return byExt, nil
}

// standIn is files with OpenTofu's files tofuFiles (named NAME+tofuExt)
// added, each in place of NAME+tfExt among files, which OpenTofu then
// does not read.
func standIn(files, tofuFiles []string, tofuExt, tfExt string) []string {
	replaced := map[string]bool{}
	for _, f := range tofuFiles {
		replaced[strings.TrimSuffix(f, tofuExt)+tfExt] = true
	}
	files = slices.DeleteFunc(files, func(f string) bool { return replaced[f] })
	return append(files, tofuFiles...)
}

// noFilesError is the error for a module directory holding no
// configuration file its client reads.
type noFilesError struct {
	tofu    bool // read as OpenTofu reads it
	hasTofu bool // it holds files only OpenTofu reads
}

func (e *noFilesError) Error() string {
	msg := "no *.tf or *.tf.json files"
	if e.tofu {
		msg = "no *.tf, *.tf.json, *.tofu or *.tofu.json files"
	}
	if e.hasTofu && !e.tofu {
		msg += " (its *.tofu files are OpenTofu's, which sync reads with --client opentofu)"
	}
	return msg
}

// treeRead is a module tree (a module and the local modules it calls,
// recursively) as one client reads it (loadModule).
type treeRead struct {
	// root is the directory within which a local source is followed (a
	// downloaded package's; "": the operator's own configuration, read
	// wherever it points).
	root string
	// tofu: read as OpenTofu reads it (configFiles, defaultHost).
	tofu bool
	// seen are the directories read, by absolute path (and arguments,
	// moduleCall.key): one called again (by any module, in any
	// spelling, or itself) is read once.
	seen    map[string]bool
	remotes remoteCalls
	reqs    requirements
	// names are the providers of the local names of the tree's root
	// module (the first read), as its required_providers or the default
	// (hashicorp/NAME) give them: what its test files' provider blocks
	// name (readTests).
	names map[string]addrs.Provider
}

// readTree reads the module tree in dir as the spec's Client reads it,
// its remote calls within bounds (remoteCalls.max, maxOthers). A
// directory with no file the client reads is a *noFilesError.
func (s *Spec) readTree(ctx context.Context, root, dir string, bounds remoteCalls) (*treeRead, error) {
	t := &treeRead{root: root, tofu: s.Client == OpenTofu, seen: map[string]bool{}, remotes: bounds}
	files, err := moduleFiles(dir, t.tofu)
	if err != nil {
		return nil, err
	}
	var sc *staticScope
	if t.tofu && root == "" {
		sc = rootScope(dir, files, s.inputs)
	}
	if err := loadModule(ctx, t, dir, files, sc, ""); err != nil {
		return nil, err
	}
	return t, nil
}

// loadModule adds to t.reqs the provider requirements of the module in
// dir (its configuration files, files) and of the local modules it calls
// (source "./..." or "../..."), merged by provider: constraints from
// several modules all apply, as in Terraform. Calls of modules from a
// registry or another remote source are added to t.remotes (whose bound
// ends the reading with its error): their requirements are known only
// once they are downloaded (tfmirror sync does, for registry modules).
// A directory is read once (t.seen); ctx is checked before each file
// (parseConfig) and each local module. A local source is followed within
// t.root only. sc is the module's scope (nil: its module sources and
// versions are literals), key what tells it apart from the module read
// with other arguments.
func loadModule(ctx context.Context, t *treeRead, dir string, files []string, sc *staticScope, key string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if t.seen[abs+key] {
		return nil
	}
	t.seen[abs+key] = true
	own, calls, err := parseConfig(ctx, sc, abs, files, defaultHost(t.tofu), &t.remotes)
	if err != nil {
		return err
	}
	if t.names == nil {
		t.names = map[string]addrs.Provider{}
		for _, r := range own {
			t.names[r.name] = r.addr
		}
	}
	t.reqs.merge(own)
	for _, c := range calls {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if err := loadLocal(ctx, t, c); err != nil {
			return err
		}
	}
	return nil
}

// loadLocal reads into t the local module c calls, as loadModule does
// (within t.root): a directory with no configuration file its client
// reads is an empty module, as the clients take it; one that is not
// there is refused, as they refuse it.
func loadLocal(ctx context.Context, t *treeRead, c moduleCall) error {
	if t.root != "" && !within(t.root, c.dir) {
		return posError(c.rng, "module source %q: outside the module package (a local source names a directory of its package)", c.source)
	}
	files, _, err := configFiles(c.dir, t.tofu)
	if err == nil && len(files) == 0 {
		if fi, statErr := os.Stat(c.dir); statErr != nil || !fi.IsDir() {
			err = errors.New("no such directory")
		}
	}
	if err != nil {
		return posError(c.rng, "module source %q: %v", c.source, err)
	}
	if c.scope != nil {
		c.scope.files = files
	}
	return loadModule(ctx, t, c.dir, files, c.scope, c.key)
}

// defaultHost is the registry host of an address that names none as
// OpenTofu (tofu) or Terraform reads it.
func defaultHost(tofu bool) string {
	if tofu {
		return addrs.OpenTofuRegistryHost
	}
	return addrs.DefaultProviderHost
}

// within reports whether path is root or a path under it, by their
// names: a downloaded package holds no link that leaves it (the one
// writer of untrusted trees, internal/safetree, makes none).
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && filepath.IsLocal(rel)
}

// requirements are what a module and the local modules it calls ask of
// providers, one requirement per provider, in first-seen order.
type requirements struct {
	list   []*requirement
	byAddr map[addrs.Provider]*requirement
}

// merge adds the requirements of add, each merged with the one of its
// provider by a lookup: a stranger's package that sync reads may name
// tens of thousands of providers, which a search of those before each
// took time quadratic in.
func (rs *requirements) merge(add []*requirement) {
	if rs.byAddr == nil {
		rs.byAddr = map[addrs.Provider]*requirement{}
	}
	for _, r := range add {
		if m, dup := rs.byAddr[r.addr]; dup {
			for i, c := range r.constraints {
				m.constrain(c, r.sets[i])
			}
			continue
		}
		rs.byAddr[r.addr] = r
		rs.list = append(rs.list, r)
	}
}

// moduleCall is a module block with a local source.
type moduleCall struct {
	source string
	dir    string // the directory it names, absolute and clean
	rng    hcl.Range
	// scope is the module's as this call makes it (nil: literals
	// only), and key tells it apart from the module's with other
	// arguments (staticScope.childScope).
	scope *staticScope
	key   string
}

// joinConstraints writes constraints as one: "~> 5.0, >= 5.2".
func joinConstraints(cs []string) string { return strings.Join(cs, ", ") }

// parseConfig reads the providers one module's files need: those of its
// required_providers blocks and provider blocks (with the version
// constraint a provider block may still give), those its resource, data,
// ephemeral and check-scoped data blocks imply (the provider
// meta-argument's local name, or else the type's prefix: aws for
// aws_instance), and those of its import blocks that generate their
// resource's configuration (importTarget), as `terraform providers`
// lists them; and the module calls with a local source, each directory
// (relative to dir, the module's, absolute) once and not one remotes
// counted already; it adds the other module calls to remotes, and
// returns the error of the one past its bound. Providers are keyed by
// local name, as in Terraform: a local name without a source address
// means hashicorp/NAME; constraints given for one provider in several
// places all apply. host is the registry of a provider address or a
// registry module source that names none, as the client reading takes
// it (defaultHost).
//
// Each file is parsed on its own, what it holds let go before the next is
// read: a parser keeps every file it parsed, and a module fetched from a
// stranger may hold thousands, each up to hclfile's bounds. For the same
// reason ctx is checked before each file: once it is done, parseConfig
// returns context.Cause(ctx), the files after it unread.
func parseConfig(ctx context.Context, sc *staticScope, dir string, files []string, host string, remotes *remoteCalls) ([]*requirement, []moduleCall, error) {
	// The client reading: OpenTofu's registry is the one a name with no
	// host is of (defaultHost).
	tofu := host == addrs.OpenTofuRegistryHost
	byName := map[string]*requirement{}
	var order []string
	get := func(name string, r hcl.Range) *requirement {
		if req, ok := byName[name]; ok {
			return req
		}
		req := &requirement{where: where(r), name: name}
		byName[name] = req
		order = append(order, name)
		return req
	}
	// implied notes the provider a resource, data or ephemeral block b
	// uses (impliedProvider), unless it is Terraform's own.
	implied := func(b *hcl.Block) error {
		name, err := impliedProvider(b)
		if err == nil && name != builtinProvider {
			get(name, b.DefRange)
		}
		return err
	}
	sources := map[string]addrs.Provider{}
	var calls []moduleCall
	// The module's import blocks, by the resource ("TYPE.NAME") each
	// imports into, each once.
	imports := map[string]importBlock{}
	var importOrder []string
	// The version constraints of each local name's required_providers
	// entries, and of each provider block by name and alias: an override
	// file's replace those they override (overrides).
	required := map[string][]constraintAt{}
	versionsOf := map[[2]string][]constraintAt{}
	var blockOrder [][2]string
	overridden, err := overridesOf(ctx, files, remotes)
	if err != nil {
		return nil, nil, err
	}
	for _, path := range primaryThenOverrides(files) {
		override := isOverride(path)
		replaced := map[string]bool{} // the names this override file replaces
		fileBlocks, err := blocksOf(ctx, path, configSchema)
		if err != nil {
			return nil, nil, err
		}
		for _, b := range fileBlocks {
			switch b.Type {
			case "provider":
				get(b.Labels[0], b.DefRange)
				alias, c, err := providerBlockVersion(b)
				if err != nil {
					return nil, nil, err
				}
				k := [2]string{b.Labels[0], alias}
				if _, seen := versionsOf[k]; !seen {
					versionsOf[k] = nil // seen, and in blockOrder once
					blockOrder = append(blockOrder, k)
				}
				switch {
				case c == nil:
				case override:
					versionsOf[k] = []constraintAt{*c}
				default:
					versionsOf[k] = append(versionsOf[k], *c)
				}
				continue
			case "resource", "data", "ephemeral":
				// An override file's block that names a provider
				// replaces the one its base block implies; one that
				// does not keeps it.
				if override && !namesProvider(b) || !override && overridden.providers[blockKey(b)] {
					continue
				}
				if err := implied(b); err != nil {
					return nil, nil, err
				}
				continue
			case "check":
				cc, _, diags := b.Body.PartialContent(checkSchema)
				if diags.HasErrors() {
					return nil, nil, diagError(diags)
				}
				for _, d := range cc.Blocks {
					if err := implied(d); err != nil {
						return nil, nil, err
					}
				}
				continue
			case "import":
				imp, ok, err := importTarget(b)
				if err != nil {
					return nil, nil, err
				}
				if tofu {
					// OpenTofu asks for the provider every import block
					// names or implies, whatever its target declares,
					// in this module or in the module it lies in.
					if imp.provider != "" && imp.provider != builtinProvider {
						get(imp.provider, imp.rng)
					}
					continue
				}
				if _, seen := imports[imp.resource]; ok && !seen {
					if len(imports) >= maxImportTargets {
						return nil, nil, posError(b.DefRange, "more than %d resources imported into by one module's import blocks", maxImportTargets)
					}
					imports[imp.resource] = imp
					importOrder = append(importOrder, imp.resource)
				}
				continue
			case "module":
				if override {
					continue // merged into the block it overrides
				}
				attrs, err := moduleAttributes(b, overridden.modules)
				if err != nil {
					return nil, nil, err
				}
				call, local, err := addModuleCall(ctx, sc, dir, fmt.Sprintf("module %q", b.Labels[0]), b.DefRange, attrs, host, remotes)
				if err != nil {
					return nil, nil, err
				}
				if local {
					calls = append(calls, call)
				}
				continue
			}
			tc, _, diags := b.Body.PartialContent(terraformBlockSchema)
			if diags.HasErrors() {
				return nil, nil, diagError(diags)
			}
			for _, rp := range tc.Blocks {
				attrs, diags := rp.Body.JustAttributes()
				if diags.HasErrors() {
					return nil, nil, diagError(diags)
				}
				names := make([]string, 0, len(attrs))
				for name := range attrs {
					names = append(names, name)
				}
				sort.Slice(names, func(i, j int) bool { return attrs[names[i]].Range.Start.Byte < attrs[names[j]].Range.Start.Byte })
				for _, name := range names {
					attr := attrs[name]
					source, constraint, err := requiredProvider(attr)
					if err != nil {
						return nil, nil, err
					}
					req := get(name, attr.Range)
					req.where = where(attr.Range)
					if source != "" {
						addr, err := addrs.ParseProviderOf(source, host)
						if err != nil {
							return nil, nil, posError(attr.Expr.Range(), "%v", err)
						}
						if prev, ok := sources[name]; ok && prev != addr && !override {
							return nil, nil, posError(attr.Range, "provider %q has two source addresses: %s and %s", name, prev, addr)
						}
						sources[name] = addr
					} else if override {
						// The entry is replaced whole: a source it does
						// not give is the default's (hashicorp/NAME).
						delete(sources, name)
					}
					if override && !replaced[name] {
						replaced[name] = true
						required[name] = nil
					}
					if constraint != "" {
						set, err := parseConstraintExact(constraint)
						if err != nil {
							return nil, nil, posError(attr.Expr.Range(), "%v", err)
						}
						required[name] = append(required[name], constraintAt{constraint, set})
					}
				}
			}
		}
	}
	// An import into a resource the module declares uses that
	// resource's provider; one generating its resource's configuration,
	// the provider it names or implies.
	if len(imports) > 0 {
		declared, err := declaredResources(ctx, files, imports)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range importOrder {
			if imp := imports[r]; !declared[r] && imp.provider != builtinProvider {
				get(imp.provider, imp.rng)
			}
		}
	}
	for _, name := range order {
		for _, c := range required[name] {
			byName[name].constrain(c.text, c.set)
		}
	}
	for _, k := range blockOrder {
		for _, c := range versionsOf[k] {
			byName[k[0]].constrain(c.text, c.set)
		}
	}
	var out []*requirement
	for _, name := range order {
		req := byName[name]
		addr, err := providerOf(name, sources, host)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", req.where, err)
		}
		if addr.Hostname == "terraform.io" && addr.Namespace == "builtin" {
			continue // Terraform's own (terraform.io/builtin/terraform): nothing to install
		}
		req.addr = addr
		out = append(out, req)
	}
	// Two local names may stand for one provider: merge them.
	var rs requirements
	rs.merge(out)
	return rs.list, calls, nil
}

// providerOf is the provider the local name stands for in a module:
// its source address there (sources, by local name), or else
// hashicorp/NAME of host, the registry of an address naming none, as
// the clients imply it.
func providerOf(name string, sources map[string]addrs.Provider, host string) (addrs.Provider, error) {
	if addr, ok := sources[name]; ok {
		return addr, nil
	}
	addr, err := addrs.ParseProviderOf("hashicorp/"+name, host)
	if err != nil {
		return addrs.Provider{}, fmt.Errorf("provider local name %q: %v", name, err)
	}
	return addr, nil
}

// builtinProvider is the local name of Terraform's built-in provider
// (terraform_data, terraform_remote_state), which no registry serves.
const builtinProvider = "terraform"

// namesProvider reports whether the resource, data or ephemeral block b
// sets its provider argument.
func namesProvider(b *hcl.Block) bool {
	content, _, _ := b.Body.PartialContent(providerArgSchema)
	_, ok := content.Attributes["provider"]
	return ok
}

// impliedProvider returns the local name of the provider a resource,
// data or ephemeral block uses: its provider meta-argument's (aws for
// aws.west), or else its type's prefix before the first underscore.
func impliedProvider(b *hcl.Block) (string, error) {
	content, _, diags := b.Body.PartialContent(providerArgSchema)
	if diags.HasErrors() {
		return "", diagError(diags)
	}
	if attr, ok := content.Attributes["provider"]; ok {
		return providerRef(attr, b.Type+" "+strconv.Quote(b.Labels[0]))
	}
	name, _, _ := strings.Cut(b.Labels[0], "_")
	return name, nil
}

// stringReference is the reference the string expr holds, read up to
// its first bracket (reference).
func stringReference(expr hcl.Expression) (hcl.Traversal, bool) {
	v, diags := hclfile.Value(expr)
	if diags.HasErrors() || v.IsNull() || !v.Type().Equals(cty.String) {
		return nil, false
	}
	s, _, _ := strings.Cut(v.AsString(), "[")
	rng := expr.Range()
	tr, diags := hclsyntax.ParseTraversalAbs([]byte(s), rng.Filename, rng.Start)
	return tr, s != "" && !diags.HasErrors()
}

// isQuoted reports whether expr is a quoted string with no template
// sequence: a reference written as Terraform 0.11 wrote them
// (provider = "aws.west"), which both clients still take.
func isQuoted(expr hcl.Expression) bool {
	t, ok := expr.(*hclsyntax.TemplateExpr)
	if !ok || len(t.Parts) != 1 {
		return false
	}
	_, ok = t.Parts[0].(*hclsyntax.LiteralValueExpr)
	return ok
}

// providerRef returns the local name of the provider configuration the
// provider argument attr of what refers to (aws for aws.west).
func providerRef(attr *hcl.Attribute, what string) (string, error) {
	tr, ok := reference(attr.Expr)
	if !ok && isQuoted(attr.Expr) {
		tr, ok = stringReference(attr.Expr)
	}
	if !ok {
		return "", posError(attr.Expr.Range(), "provider of %s must be a provider reference such as aws.west", what)
	}
	return tr.RootName(), nil
}

// reference is the reference expr makes (aws.west, aws_instance.web),
// read from the string that holds it in JSON, and without the index of
// its last step (aws_instance.web[each.key]): false for an expression
// that is none. A string is read up to its first bracket, never parsed
// as an expression: a stranger's string may nest without the bound
// hclfile puts on its files.
func reference(expr hcl.Expression) (hcl.Traversal, bool) {
	if _, native := expr.(hclsyntax.Expression); !native {
		return stringReference(expr)
	}
	for {
		ie, ok := expr.(*hclsyntax.IndexExpr)
		if !ok {
			break
		}
		expr = ie.Collection
	}
	tr, diags := hcl.AbsTraversalForExpr(expr)
	return tr, !diags.HasErrors()
}

// maxImportTargets is the most distinct resources one module's import
// blocks may import into: each is held while the module's files are
// read, and those the module declares are found by reading its files
// again (declaredResources).
const maxImportTargets = 10000

// declaredResources reads the configuration files again and returns
// which of the resources imports names the module declares (a resource
// block "TYPE" "NAME"): holding every resource of a stranger's package
// as it is read would take memory in proportion to its hundreds of MiB,
// and few modules import at all.
func declaredResources(ctx context.Context, files []string, imports map[string]importBlock) (map[string]bool, error) {
	declared := map[string]bool{}
	for _, path := range files {
		blocks, err := blocksOf(ctx, path, resourcesSchema)
		if err != nil {
			return nil, err
		}
		for _, b := range blocks {
			if r := b.Labels[0] + "." + b.Labels[1]; imports[r].resource != "" {
				declared[r] = true
			}
		}
	}
	return declared, nil
}

// blocksOf parses the configuration file path and returns its blocks of
// schema, or context.Cause(ctx) once ctx is done, before the file is
// read: a module fetched from a stranger may hold thousands of files,
// each parsed on its own and let go before the next.
func blocksOf(ctx context.Context, path string, schema *hcl.BodySchema) (hcl.Blocks, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	f, err := parseFile(nil, path)
	if err != nil {
		return nil, err
	}
	content, _, diags := f.Body.PartialContent(schema)
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	return content.Blocks, nil
}

// resourcesSchema is the resource blocks of a configuration file.
var resourcesSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "resource", LabelNames: []string{"type", "name"}}},
}

// importBlock is an import block into a resource of its own module.
type importBlock struct {
	resource string // TYPE.NAME
	provider string // the local name it names or implies
	rng      hcl.Range
}

// importTarget reads the import block b: false for one into a resource of
// a module it calls, whose module block says which provider it uses.
func importTarget(b *hcl.Block) (importBlock, bool, error) {
	content, _, diags := b.Body.PartialContent(importSchema)
	if diags.HasErrors() {
		return importBlock{}, false, diagError(diags)
	}
	to, ok := content.Attributes["to"]
	if !ok {
		return importBlock{}, false, posError(b.DefRange, "import block has no to argument")
	}
	tr, ok := reference(to.Expr)
	if ok && tr.RootName() == "module" {
		// The resource's type after the module steps (module.NAME,
		// each with its index), for OpenTofu, which asks for its
		// provider too; it is none of this module's.
		rest := resourceSteps(tr)
		imp := importBlock{rng: b.DefRange}
		if len(rest) > 0 {
			imp.provider, _, _ = strings.Cut(rest[0], "_")
		}
		return imp, false, importProvider(content, &imp)
	}
	var name hcl.TraverseAttr
	if ok && len(tr) >= 2 {
		name, ok = tr[1].(hcl.TraverseAttr)
	}
	if !ok || len(tr) < 2 {
		return importBlock{}, false, posError(to.Expr.Range(), "to of an import block must be a resource address such as aws_instance.web")
	}
	imp := importBlock{resource: tr.RootName() + "." + name.Name, rng: b.DefRange}
	imp.provider, _, _ = strings.Cut(tr.RootName(), "_")
	if err := importProvider(content, &imp); err != nil {
		return importBlock{}, false, err
	}
	return imp, true, nil
}

// importProvider sets the provider of imp to the one its import block's
// provider argument (in content) names, when it has one.
func importProvider(content *hcl.BodyContent, imp *importBlock) error {
	attr, ok := content.Attributes["provider"]
	if !ok {
		return nil
	}
	var err error
	imp.provider, err = providerRef(attr, "import of "+imp.resource)
	return err
}

// resourceSteps are the names of tr after its module steps (module.NAME
// and their indexes): the resource's TYPE and NAME.
func resourceSteps(tr hcl.Traversal) []string {
	var names []string
	for _, step := range tr {
		switch st := step.(type) {
		case hcl.TraverseRoot:
			names = append(names, st.Name)
		case hcl.TraverseAttr:
			names = append(names, st.Name)
		}
	}
	for len(names) >= 2 && names[0] == "module" {
		names = names[2:]
	}
	return names
}

// moduleOverrides are the arguments of module blocks that a module's
// override files set (isOverride), by module name: Terraform and OpenTofu
// merge each into the module block of its name, an argument set there
// replacing the block's (a version pinned, a source moved).
type moduleOverrides map[string]hcl.Attributes

// overrides are what a module's override files change of what sync
// reads: the module blocks' arguments, and the resource, data and
// ephemeral blocks whose provider they name (by blockKey), which
// replaces the one the base block implies.
type overrides struct {
	modules   moduleOverrides
	providers map[string]bool
}

// blockKey is what tells a resource, data or ephemeral block from the
// others of its module: "resource.aws_instance.web".
func blockKey(b *hcl.Block) string {
	return b.Type + "." + strings.Join(b.Labels, ".")
}

// overridesOf reads the module, resource, data and ephemeral blocks
// of the override files among files, later files' arguments replacing
// earlier ones'. A stranger's package overrides at most as many module
// blocks as remotes takes calls (its max and maxOthers, any number for
// none), and the providers of at most maxImportTargets blocks: a block
// past them is refused.
func overridesOf(ctx context.Context, files []string, remotes *remoteCalls) (overrides, error) {
	out := overrides{modules: moduleOverrides{}, providers: map[string]bool{}}
	for _, path := range files {
		if !isOverride(path) {
			continue
		}
		blocks, err := blocksOf(ctx, path, configSchema)
		if err != nil {
			return overrides{}, err
		}
		for _, b := range blocks {
			switch b.Type {
			case "resource", "data", "ephemeral":
				if !namesProvider(b) || out.providers[blockKey(b)] {
					continue
				}
				if remotes.max > 0 && len(out.providers) >= maxImportTargets {
					return overrides{}, posError(b.DefRange, "%s: more than %d blocks' providers overridden", blockKey(b), maxImportTargets)
				}
				out.providers[blockKey(b)] = true
				continue
			case "module":
			default:
				continue
			}
			args, err := moduleArguments(b)
			if err != nil {
				return overrides{}, err
			}
			if out.modules[b.Labels[0]] == nil {
				if limit := remotes.max + remotes.maxOthers; limit > 0 && len(out.modules) >= limit {
					return overrides{}, posError(b.DefRange, "module %q: more than %d module blocks overridden", b.Labels[0], limit)
				}
				out.modules[b.Labels[0]] = hcl.Attributes{}
			}
			for name, a := range args {
				out.modules[b.Labels[0]][name] = a
			}
		}
	}
	return out, nil
}

// moduleArguments are the arguments of the module block b: its source
// and version, and the others (meta-arguments and its module's
// variables), whatever blocks it holds besides.
func moduleArguments(b *hcl.Block) (hcl.Attributes, error) {
	content, remain, diags := b.Body.PartialContent(moduleSchema)
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	attrs, _ := remain.JustAttributes()
	for name, a := range content.Attributes {
		attrs[name] = a
	}
	return attrs, nil
}

// moduleAttributes are the arguments of the module block b
// (moduleArguments), with those its override files set for it
// (overrides).
func moduleAttributes(b *hcl.Block, overrides moduleOverrides) (hcl.Attributes, error) {
	attrs, err := moduleArguments(b)
	if err != nil {
		return nil, err
	}
	for name, a := range overrides[b.Labels[0]] {
		attrs[name] = a
	}
	return attrs, nil
}

// addModuleCall takes the call a module block makes from the module in
// dir (what, for messages: `module "net"`; def, where the block is;
// attrs, its arguments: moduleAttributes), its source and version
// evaluated in sc (staticScope.stringOf; nil: literals only): a local
// source is counted in remotes (remoteCalls.addLocal) and returned to be
// read, true unless its directory was counted already with the same
// arguments; any other is added to remotes (remoteModule, host the
// registry of a source naming none).
func addModuleCall(ctx context.Context, sc *staticScope, dir, what string, def hcl.Range, attrs hcl.Attributes, host string, remotes *remoteCalls) (moduleCall, bool, error) {
	attr, ok := attrs["source"]
	if !ok {
		return moduleCall{}, false, posError(def, "%s has no source", what)
	}
	src, err := sc.stringOf(ctx, attr.Expr, "source", what)
	if err != nil {
		return moduleCall{}, false, err
	}
	if strings.HasPrefix(src, "./") || strings.HasPrefix(src, "../") {
		if _, ok := attrs["version"]; ok {
			return moduleCall{}, false, versionNeedsRegistry(attr, what, src)
		}
		call := moduleCall{source: src, rng: attr.Range, dir: filepath.Join(dir, filepath.FromSlash(src))}
		call.scope, call.key = sc.childScope(ctx, what, attr.Range, call.dir, attrs)
		if call.scope != nil && call.scope.depth > maxStaticDepth {
			return moduleCall{}, false, posError(attr.Range, "%s: local modules called more than %d deep, each with other arguments (a module calling itself?)", what, maxStaticDepth)
		}
		ok, err = remotes.addLocal(call.dir+call.key, where(call.rng), call.source)
		return call, ok && err == nil, err
	}
	rc, err := remoteModule(ctx, sc, what, src, attrs, host)
	if err == nil {
		err = remotes.add(rc)
	}
	return moduleCall{}, false, err
}

// staticOnly says, for a module's source or version expr that refers to
// variables or locals (which OpenTofu evaluates when it installs
// modules) where sync reads a literal only, when sync evaluates it, and
// what to do else: "" for one that refers to none.
func staticOnly(expr hcl.Expression) string {
	vars := expr.Variables()
	if len(vars) == 0 {
		return ""
	}
	t := vars[0]
	name := t.RootName()
	if len(t) > 1 {
		if a, ok := t[1].(hcl.TraverseAttr); ok {
			name += "." + a.Name
		}
	}
	return fmt.Sprintf(" (it refers to %s: sync evaluates variables and locals as OpenTofu does with --client opentofu, in the configuration directories it is given, not in the registry module packages it fetches; else name the module and its version in a sync manifest)", name)
}

// requiredProvider reads one entry of required_providers: an object with
// source and version (other keys, such as configuration_aliases, are not
// evaluated), or a version constraint string (the pre-0.13 form).
func requiredProvider(attr *hcl.Attribute) (source, constraint string, err error) {
	// field sets source or constraint, whichever key names, to v.
	field := func(key string, v cty.Value, rng hcl.Range) error {
		if v.IsNull() || !v.Type().Equals(cty.String) {
			return posError(rng, "%s of provider %q must be a string", key, attr.Name)
		}
		if key == "source" {
			source = v.AsString()
		} else {
			constraint = v.AsString()
		}
		return nil
	}
	if obj, ok := attr.Expr.(*hclsyntax.ObjectConsExpr); ok {
		for _, item := range obj.Items {
			key := hcl.ExprAsKeyword(item.KeyExpr)
			if key == "" {
				kv, diags := hclfile.Value(item.KeyExpr)
				if diags.HasErrors() || kv.IsNull() || !kv.Type().Equals(cty.String) {
					return "", "", posError(item.KeyExpr.Range(), "invalid key in required_providers entry %q", attr.Name)
				}
				key = kv.AsString()
			}
			if key != "source" && key != "version" {
				continue
			}
			v, diags := hclfile.Value(item.ValueExpr)
			if diags.HasErrors() {
				return "", "", diagError(diags)
			}
			if err := field(key, v, item.ValueExpr.Range()); err != nil {
				return "", "", err
			}
		}
		return source, constraint, nil
	}
	v, diags := hclfile.Value(attr.Expr)
	if diags.HasErrors() {
		return "", "", diagError(diags)
	}
	if !v.IsNull() && v.Type().Equals(cty.String) {
		return "", v.AsString(), nil
	}
	if !v.IsNull() && v.Type().IsObjectType() {
		// JSON syntax: { "source": "...", "version": "..." }.
		for _, key := range []string{"source", "version"} {
			if !v.Type().HasAttribute(key) {
				continue
			}
			if err := field(key, v.GetAttr(key), attr.Expr.Range()); err != nil {
				return "", "", err
			}
		}
		return source, constraint, nil
	}
	return "", "", posError(attr.Expr.Range(), "required_providers entry %q must be an object { source, version } or a version constraint string", attr.Name)
}

// loadManifestCLI reads a cli "PRODUCT" block: versions (and latest,
// platforms) as a provider block's.
func (s *Spec) loadManifestCLI(b *hcl.Block, seen map[string]string) error {
	product := b.Labels[0]
	if product == "" || len(product) > 64 || strings.HasPrefix(product, "terraform-provider-") || strings.Trim(product, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return posError(b.LabelRanges[0], "cli %q: a product is a release name such as \"terraform\" or \"tofu\" (lowercase letters, digits, dashes; not a provider)", product)
	}
	if prev, dup := seen[product]; dup {
		return posError(b.DefRange, "cli %s is already declared at %s", product, prev)
	}
	seen[product] = where(b.DefRange)
	sels, pls, err := providerBlock(b)
	if err != nil {
		return err
	}
	s.CLIs = append(s.CLIs, &CLI{Product: product, Selections: sels, Platforms: pls})
	return nil
}
