package addrs

import (
	"fmt"
	"regexp"
	"strings"

	svchost "github.com/hashicorp/terraform-svchost"
)

// Module is a registry module's address: HOST/NAMESPACE/NAME/SYSTEM, as
// ParseModule or NewModule return it: every part in its normal form
// (the host as svchost compares it, namespace, name and system in
// lowercase), so that every spelling of one module is one address, keyed,
// judged by the policy and named at the OCI door once. The module
// registries that clients meet compare these parts without case
// (registry.terraform.io answers Terraform-AWS-Modules/VPC/AWS as
// terraform-aws-modules/vpc/aws, OpenTofu's registry lowercases them)
// and this mirror's policy always has; Terraform itself sends a module's
// namespace and name as written, since a registry may match them with
// their case (terraform-registry-address). So the address keeps the
// namespace and name as they were given as well, for the request to the
// origin only (OriginPath): compared, keyed and shown, it is its normal
// form (Normal, String).
type Module struct {
	Hostname  svchost.Hostname
	Namespace string
	Name      string
	System    string

	// given is NAMESPACE/NAME as written, "" when it is the normal form
	// (or the address was not made by ParseModule or NewModule).
	given string
}

// String is HOST/NAMESPACE/NAME/SYSTEM in the normal form: what keys and
// names the module, whatever spelling it was given in.
func (m Module) String() string {
	n := m.Normal()
	return string(n.Hostname) + "/" + n.Namespace + "/" + n.Name + "/" + n.System
}

// Normal is m in its normal form, without the spelling it was given in:
// the address to compare (==) and to key maps by.
func (m Module) Normal() Module {
	return Module{Hostname: m.Hostname, Namespace: strings.ToLower(m.Namespace), Name: strings.ToLower(m.Name), System: strings.ToLower(m.System)}
}

// OriginPath is NAMESPACE/NAME/SYSTEM as the module's registry is asked
// for it: the namespace and name as they were given (a registry may
// match them with their case, as Terraform allows), the system in
// lowercase.
func (m Module) OriginPath() [3]string {
	if m.given != "" {
		if ns, name, ok := strings.Cut(m.given, "/"); ok {
			return [3]string{ns, name, strings.ToLower(m.System)}
		}
	}
	return [3]string{m.Namespace, m.Name, strings.ToLower(m.System)}
}

// DefaultModuleHost is the host of a module address that names none.
const DefaultModuleHost = "registry.terraform.io"

// ParseModule parses a registry module address as Terraform does:
// [HOST/]NAMESPACE/NAME/SYSTEM (no //SUBDIR), the host defaulting to
// registry.terraform.io, read and normalised as ParseHost says (so that
// what String writes parses back), the other parts
// as NewModule says.
func ParseModule(s string) (Module, error) {
	return ParseModuleOf(s, DefaultModuleHost)
}

// ParseModuleOf is ParseModule with host, in its normal form, the host
// of an address that names none (OpenTofuRegistryHost for a source
// OpenTofu reads).
func ParseModuleOf(s, host string) (Module, error) {
	parts := strings.Split(s, "/")
	switch len(parts) {
	case 3:
	case 4:
		host, parts = parts[0], parts[1:]
	default:
		return Module{}, fmt.Errorf("module address %q: want [HOST/]NAMESPACE/NAME/SYSTEM", s)
	}
	h, err := ParseHost(host)
	if err != nil {
		return Module{}, fmt.Errorf("module address %q: invalid host: %v", s, err)
	}
	m, err := NewModule(h, parts[0], parts[1], parts[2])
	if err != nil {
		return Module{}, fmt.Errorf("module address %q: %w", s, err)
	}
	return m, nil
}

// NewModule checks a namespace, name and system as CheckModulePart does
// (the Terraform client's rules) and returns the module in its normal
// form, every part in lowercase, keeping the namespace and name as given
// for the request to the origin (OriginPath). host must be in svchost's
// comparison form already. It is the one place a module address is made
// of its parts: every front door and ParseModule.
func NewModule(host svchost.Hostname, namespace, name, system string) (Module, error) {
	for _, p := range []struct{ what, s string }{{"namespace", namespace}, {"name", name}, {"system", system}} {
		if err := CheckModulePart(p.what, p.s); err != nil {
			return Module{}, err
		}
	}
	m := Module{Hostname: host, Namespace: namespace, Name: name, System: system}.Normal()
	if m.Namespace != namespace || m.Name != name {
		m.given = namespace + "/" + name
	}
	return m, nil
}

// Module address parts as the Terraform client accepts them
// (terraform-registry-address): a namespace or name is 1 to 64 ASCII
// letters, digits, dashes and underscores, neither starting nor ending
// with a dash or underscore; a system is 1 to 64 ASCII letters or digits
// (the client takes lowercase ones only; this mirror compares it in
// lowercase).
var (
	moduleNamePattern   = regexp.MustCompile(`^[0-9A-Za-z](?:[0-9A-Za-z_-]{0,62}[0-9A-Za-z])?$`)
	moduleSystemPattern = regexp.MustCompile(`^[0-9A-Za-z]{1,64}$`)
)

// CheckModulePart checks what ("namespace", "name" or "system") of a
// module address, s, as the Terraform client does: the one rule for
// every front door, NewModule and ParseModule.
func CheckModulePart(what, s string) error {
	pattern, rule := moduleNamePattern, "1 to 64 ASCII letters, digits, dashes and underscores, not starting or ending with a dash or underscore"
	if what == "system" {
		pattern, rule = moduleSystemPattern, "1 to 64 ASCII letters or digits"
	}
	if !pattern.MatchString(s) {
		return fmt.Errorf("invalid %s %q: want %s", what, s, rule)
	}
	return nil
}
