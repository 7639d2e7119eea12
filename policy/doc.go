// Package policy is the package policy: which providers and modules, and
// which of their versions, the mirror may serve, by address pattern,
// version constraint and minimum release age. Decode reads the `policy`
// block of the configuration file; a Policy answers Address, Window and
// Version, cheaply enough to be asked on every answer.
//
// It decides only: it does not learn release times (the engine does and
// passes them in as a Release), does not fetch, store or serve, and does
// not say how a refusal looks on the wire (each front door does). A nil
// *Policy allows everything. The order of evaluation is documented on
// Policy.Version and in docs/policy.md.
package policy
