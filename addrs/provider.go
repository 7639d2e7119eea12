package addrs

import (
	"fmt"
	"strings"

	tfaddr "github.com/hashicorp/terraform-registry-address"
	svchost "github.com/hashicorp/terraform-svchost"
)

// Provider is a provider address: HOST/NAMESPACE/TYPE, as ParseProvider
// or NewProvider return it (every part in its normal form).
type Provider struct {
	Hostname  svchost.Hostname
	Namespace string
	Type      string
}

// String returns "host/namespace/type".
func (p Provider) String() string {
	return string(p.Hostname) + "/" + p.Namespace + "/" + p.Type
}

// DefaultProviderHost is the registry host of provider addresses that name
// none, as in Terraform.
const DefaultProviderHost = "registry.terraform.io"

// OpenTofuRegistryHost is OpenTofu's default registry: the host of the
// provider and module addresses that name none in a configuration
// OpenTofu reads.
const OpenTofuRegistryHost = "registry.opentofu.org"

// Limits on provider addresses: far above real ones, so that what a
// stranger sends is bounded before it is parsed.
const (
	maxProviderPartLen    = 64
	maxProviderAddressLen = 253 + len(":65535") + 2*(1+maxProviderPartLen)
)

// ParseProvider parses a provider source address, [HOST/]NAMESPACE/TYPE,
// as Terraform and OpenTofu do. The host, registry.terraform.io when left
// out, is given as a user writes it or in its normal form, as String
// writes it, and normalised as ParseHost says (lowercase, punycode for
// IDN labels, no :443);
// namespace and type as NewProvider says. Unlike the clients, it refuses a
// bare TYPE and the legacy namespace "-", which name no provider a mirror
// could fetch.
func ParseProvider(s string) (Provider, error) {
	return ParseProviderOf(s, DefaultProviderHost)
}

// ParseProviderOf is ParseProvider with host, in its normal form, the
// host of an address that names none (OpenTofuRegistryHost for an
// address OpenTofu reads).
func ParseProviderOf(s, host string) (Provider, error) {
	if len(s) > maxProviderAddressLen {
		return Provider{}, fmt.Errorf("provider address %.40q...: too long (at most %d bytes)", s, maxProviderAddressLen)
	}
	parts := strings.Split(s, "/")
	switch len(parts) {
	case 2:
	case 3:
		host, parts = parts[0], parts[1:]
	default:
		return Provider{}, fmt.Errorf("provider address %q: want [HOST/]NAMESPACE/TYPE", s)
	}
	h, err := ParseHost(host)
	if err != nil {
		return Provider{}, fmt.Errorf("provider address %q: invalid host %q: %v", s, host, err)
	}
	p, err := NewProvider(h, parts[0], parts[1])
	if err != nil {
		return Provider{}, fmt.Errorf("provider address %q: %w", s, err)
	}
	return p, nil
}

// NewProvider checks a namespace and type by the clients' rules
// (terraform-registry-address, which Terraform uses and OpenTofu forks)
// and returns the provider with both in their normal form: letters
// (case-folded to lowercase, as IDNA does), digits and dashes, at most 64
// bytes, no leading, trailing or doubled dash, no dot or underscore; a
// type may not start with "terraform-". host must be in svchost's
// comparison form already.
func NewProvider(host svchost.Hostname, namespace, typ string) (Provider, error) {
	ns, err := providerPart("namespace", namespace)
	if err != nil {
		return Provider{}, err
	}
	t, err := providerPart("type", typ)
	if err != nil {
		return Provider{}, err
	}
	if strings.HasPrefix(t, "terraform-") {
		return Provider{}, fmt.Errorf("invalid type %q: the prefix \"terraform-\" is not allowed (a provider's source address names it without)", typ)
	}
	return Provider{Hostname: host, Namespace: ns, Type: t}, nil
}

func providerPart(what, s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("%s is empty", what)
	}
	if len(s) > maxProviderPartLen {
		return "", fmt.Errorf("%s %.20q...: too long (at most %d bytes)", what, s, maxProviderPartLen)
	}
	n, err := tfaddr.ParseProviderPart(s)
	if err != nil {
		return "", fmt.Errorf("invalid %s %q: %v", what, s, err)
	}
	if len(n) > maxProviderPartLen {
		return "", fmt.Errorf("%s %.20q...: too long (at most %d bytes)", what, n, maxProviderPartLen)
	}
	return n, nil
}
