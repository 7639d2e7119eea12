package failure

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/apparentlymart/go-versions/versions"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// VerificationCounter counts the packages refused by verification, by
// reason (a verify.Reason); package metrics implements it.
type VerificationCounter interface {
	VerificationFailed(reason string)
}

// RefusePackage is what the engine does with a provider package that
// failed verification, whether fetched from its origin or imported: err
// holding a *verify.Error is counted by its reason, logged once, and
// returned naming the package (p, v, platform); any other err is
// returned as it is.
func RefusePackage(log *slog.Logger, m VerificationCounter, p addrs.Provider, v versions.Version, platform string, err error) error {
	var verr *verify.Error
	if !errors.As(err, &verr) {
		return err
	}
	m.VerificationFailed(string(verr.Reason))
	log.Error("provider package failed verification; nothing was cached",
		"provider", p.String(), "version", v.String(), "platform", platform, "reason", string(verr.Reason), "error", err)
	return fmt.Errorf("%s %s %s: %w", p, v, platform, err)
}
