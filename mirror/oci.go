package mirror

// Provider versions as OCI artifacts: package mirror/ocistore, built on
// ociEngine, the engine as it uses it; OCI adds the opening of its blobs
// as the engine's archives.

import (
	"context"
	"fmt"

	"github.com/apparentlymart/go-versions/versions"
	digest "github.com/opencontainers/go-digest"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/ocistore"
)

// OCI is the engine's OCI side: the documents of package mirror/ocistore,
// and their blobs opened as the engine's archives (Blob). It speaks no
// HTTP: the OCI front door does.
type OCI struct {
	*ocistore.OCI
	api packageAPI
}

// packageAPI is what the OCI side uses of the engine's package API, on
// which its documents are built: a version's verified package and whether
// the answer still holds, and an archive opened as OpenArchive opens it.
// *Engine implements it.
type packageAPI interface {
	Package(ctx context.Context, p addrs.Provider, v versions.Version, platforms []addrs.Platform) (*Package, error)
	Reuse(st Stamp) bool
	OpenArchive(ctx context.Context, p addrs.Provider, v versions.Version, pl addrs.Platform) (*Archive, error)
}

// NewOCI returns an OCI side of the engine. It learns the archive sizes
// the origin does not state from the engine's origin, behind the same
// guards as every other origin request (a sealed mirror asks nothing, a
// local-only host is never contacted).
func (s *Engine) NewOCI() (*OCI, error) {
	o, err := ocistore.New(ocistore.Config{OriginTimeout: s.cfg.OriginTimeout, Logger: s.log}, ocistore.Parts{Life: s.life, Shared: s.shared, Hosts: s.hosts, Records: s.memo, Lists: s.records.lists}, ociEngine{s}, s.store, s.origin, s.metrics)
	if err != nil {
		return nil, err
	}
	s.oci.Add(o)
	return &OCI{OCI: o, api: s}, nil
}

// Blob opens the archive of p's repository whose sha256 digest is d (an
// archive of a version whose index was handed out), as OpenArchive does:
// cached, or downloaded once however many callers, verified before its
// last bytes. size is its length in bytes, as the index said. Errors:
// ocistore.ErrDigestUnknown, and those of OpenArchive.
func (o *OCI) Blob(ctx context.Context, p addrs.Provider, d digest.Digest) (a *Archive, size int64, err error) {
	b, err := o.Resolve(ctx, p, d)
	if err != nil {
		return nil, 0, err
	}
	a, err = o.api.OpenArchive(ctx, p, b.Version, b.Platform)
	if err != nil {
		return nil, 0, err
	}
	if a.SHA256 != b.SHA256 {
		// The version's record names another archive for the platform
		// now: the digest is not this repository's any more.
		a.Close()
		return nil, 0, fmt.Errorf("%w: %s in %s", ocistore.ErrDigestUnknown, d, p)
	}
	size = a.Size
	if size < 0 {
		size = b.Size
	}
	return a, size, nil
}

// ociEngine is the engine's package API as the OCI documents read it
// (ocistore.Engine).
type ociEngine struct{ api packageAPI }

func (o ociEngine) Archives(ctx context.Context, p addrs.Provider, v versions.Version) ([]ocistore.Archive, func() bool, error) {
	pkg, err := o.api.Package(ctx, p, v, nil)
	if err != nil {
		return nil, nil, err
	}
	out := make([]ocistore.Archive, 0, len(pkg.Archives))
	for _, pa := range pkg.Archives {
		a := ocistore.Archive{Platform: pa.Platform, SHA256: pa.SHA256, URL: pa.URL}
		if ev := pa.Evidence; ev != nil {
			if ph, ok := ev.Packages[pa.Platform]; ok && ph.PackageSize > 0 {
				a.Size = ph.PackageSize
			}
		}
		out = append(out, a)
	}
	var holds func() bool
	if st := pkg.Stamp; !st.IsZero() {
		holds = func() bool { return o.api.Reuse(st) }
	}
	return out, holds, nil
}
