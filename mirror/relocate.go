package mirror

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/internal/redact"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
)

// relocated is a, the archive record of the version k names for platform
// pl, with the download URL its origin gives for it now, when the
// download from a's URL failed with err as a moved or expired one does:
// a download URL is not one for ever (a pre-signed URL expires, a
// download host moves), and a client asks the registry for it before
// each install, where a package record keeps the one the version was
// first asked with. So when the archive's origin answered with an error
// status, or its host could not be reached (not a timeout: a slow host
// is the same host), the registry is asked for the platform's package
// again; an answer naming the same signed sha256 at another URL gives
// the record to download from (its bytes held to that sha256 as ever),
// ok true. The record kept is not changed: each cold archive of the
// version meets the old URL once.
func relocated(ctx context.Context, origin ProviderOrigin, log *slog.Logger, k records.VersionKeys, pl addrs.Platform, a records.ArchiveRecord, err error) (records.ArchiveRecord, bool) {
	var oe *discovery.OriginError
	if ctx.Err() != nil || !errors.As(err, &oe) || oe.Op != discovery.OpArchive && oe.Op != discovery.OpArchiveSize || oe.Timeout() {
		return a, false
	}
	pkg, perr := origin.Package(ctx, k.Provider, k.Version.String(), pl)
	if perr != nil || !strings.EqualFold(pkg.SHASum, a.SHA256) || pkg.DownloadURL == "" || pkg.DownloadURL == a.URL {
		return a, false
	}
	log.Warn("provider archive not fetched from the URL its record keeps; the origin gives another, fetching from it",
		"provider", k.Provider.String(), "version", k.Version.String(), "platform", pl.String(),
		"now", redact.Location(pkg.DownloadURL), "error", err)
	a.URL = pkg.DownloadURL
	return a, true
}
