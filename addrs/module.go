package addrs

import (
	"fmt"
	"regexp"
	"strings"

	svchost "github.com/hashicorp/terraform-svchost"
)

// Module is a registry module's address: HOST/NAMESPACE/NAME/SYSTEM.
type Module struct {
	Hostname  svchost.Hostname
	Namespace string
	Name      string
	System    string
}

// String is HOST/NAMESPACE/NAME/SYSTEM.
func (m Module) String() string {
	return string(m.Hostname) + "/" + m.Namespace + "/" + m.Name + "/" + m.System
}

// DefaultModuleHost is the host of a module address that names none.
const DefaultModuleHost = "registry.terraform.io"

// ParseModule parses a registry module address as Terraform does:
// [HOST/]NAMESPACE/NAME/SYSTEM (no //SUBDIR), the host defaulting to
// registry.terraform.io and normalised as svchost does. Parts are as
// CheckModulePart accepts them; the system is compared in lowercase.
func ParseModule(s string) (Module, error) {
	parts := strings.Split(s, "/")
	host := DefaultModuleHost
	switch len(parts) {
	case 3:
	case 4:
		host, parts = parts[0], parts[1:]
	default:
		return Module{}, fmt.Errorf("module address %q: want [HOST/]NAMESPACE/NAME/SYSTEM", s)
	}
	h, err := svchost.ForComparison(host)
	if err != nil {
		return Module{}, fmt.Errorf("module address %q: invalid host: %v", s, err)
	}
	for i, what := range []string{"namespace", "name", "system"} {
		if err := CheckModulePart(what, parts[i]); err != nil {
			return Module{}, fmt.Errorf("module address %q: %w", s, err)
		}
	}
	return Module{Hostname: h, Namespace: parts[0], Name: parts[1], System: strings.ToLower(parts[2])}, nil
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
// every front door and ParseModule.
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
