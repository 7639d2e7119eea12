// Package image assembles tfmirror's container image from the release's
// linux binaries, with go-containerregistry, without a Docker daemon: the
// base image's layers (distroless/static in a release), then one layer
// holding the binary at /usr/local/bin/tfmirror and the data directory
// /var/lib/tfmirror owned by the runtime user, then the configuration:
// entry point tfmirror, command serve, user 65532:65532 (not root), the
// data directory as a volume, TFMIRROR_DATA_DIR and TFMIRROR_LISTEN, the
// OCI labels naming the version, revision and source. Every time in it is
// the commit's, so one commit gives one image digest.
//
// It does not build the binaries (GoReleaser does, .goreleaser.yaml), pull
// the base image or push the result (cmd/tfmirror-image and the release
// workflow do).
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image is, and what deploy/ (the chart, the kustomize base)
// relies on.
const (
	Binary  = "/usr/local/bin/tfmirror"
	DataDir = "/var/lib/tfmirror"
	UID     = 65532 // distroless's nonroot
	User    = "65532:65532"
)

// Runtime is the image's configuration for running it: what `docker run
// IMAGE` and a pod without a command do. The base image's environment
// (PATH, SSL_CERT_FILE) is kept before these variables.
func Runtime() v1.Config {
	return v1.Config{
		Entrypoint: []string{Binary},
		Cmd:        []string{"serve"},
		User:       User,
		Env: []string{
			"TFMIRROR_DATA_DIR=" + DataDir,
			// 8443: the mirror over HTTPS (also /healthz, /readyz,
			// /metrics); 9090: /metrics over plain HTTP when
			// TFMIRROR_METRICS_LISTEN=:9090 is set.
			"TFMIRROR_LISTEN=:8443",
		},
		Volumes:      map[string]struct{}{DataDir: {}},
		ExposedPorts: map[string]struct{}{"8443/tcp": {}, "9090/tcp": {}},
	}
}

// Options says what to assemble.
type Options struct {
	// Base is the base image index (distroless/static in a release); nil
	// is an empty base, with nothing but what this package adds.
	Base v1.ImageIndex
	// Binaries are the tfmirror binaries by platform, "linux/amd64" and
	// "linux/arm64": the files GoReleaser built for the archives.
	Binaries map[string]string
	Version  string    // the release's version, "2.0.0"
	Revision string    // the commit
	Source   string    // the repository's URL
	Created  time.Time // the commit's time
}

// Build assembles the image index, one image per platform of
// opts.Binaries, in the order of their names.
func Build(opts Options) (v1.ImageIndex, error) {
	if len(opts.Binaries) == 0 {
		return nil, errors.New("no binaries")
	}
	if opts.Version == "" || opts.Created.IsZero() {
		return nil, errors.New("the version and the creation time are required")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, platform := range slices.Sorted(maps.Keys(opts.Binaries)) {
		goos, arch, ok := strings.Cut(platform, "/")
		if !ok || goos != "linux" {
			return nil, fmt.Errorf("platform %q: want linux/ARCH", platform)
		}
		img, err := buildOne(opts, arch, opts.Binaries[platform])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", platform, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}},
		})
	}
	return idx, nil
}

func buildOne(opts Options, arch, binary string) (v1.Image, error) {
	base, err := baseFor(opts.Base, arch)
	if err != nil {
		return nil, err
	}
	layer, err := appLayer(binary, opts.Created)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: opts.Created.UTC()}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "tfmirror-image: " + Binary + ", " + DataDir, Comment: opts.Version},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", arch, created
	rt := Runtime()
	env := cf.Config.Env
	if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "PATH=") }) {
		env = append(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	rt.Env = append(env, rt.Env...)
	rt.Labels = maps.Clone(cf.Config.Labels)
	if rt.Labels == nil {
		rt.Labels = map[string]string{}
	}
	maps.Copy(rt.Labels, map[string]string{
		"org.opencontainers.image.title":    "tfmirror",
		"org.opencontainers.image.version":  opts.Version,
		"org.opencontainers.image.revision": opts.Revision,
		"org.opencontainers.image.source":   opts.Source,
		"org.opencontainers.image.created":  created.Format(time.RFC3339),
	})
	cf.Config = rt
	return mutate.ConfigFile(img, cf)
}

// baseFor is the base image of one architecture, or an empty image.
func baseFor(base v1.ImageIndex, arch string) (v1.Image, error) {
	if base == nil {
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		return mutate.ConfigMediaType(img, types.OCIConfigJSON), nil
	}
	im, err := base.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == arch {
			return base.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("the base image has no linux/%s image", arch)
}

// appLayer is the layer tfmirror adds: its binary, and the data directory
// owned by the runtime user (a fresh volume mounted there takes its owner
// from it), with the parent directories; root owns everything else.
func appLayer(binary string, mtime time.Time) (v1.Layer, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime = mtime.UTC().Truncate(time.Second)
	dir := func(name string, mode int64, uid int) tar.Header {
		return tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: uid, Gid: uid, ModTime: mtime, Format: tar.FormatPAX}
	}
	for _, h := range []tar.Header{
		dir("usr/", 0o755, 0), dir("usr/local/", 0o755, 0), dir("usr/local/bin/", 0o755, 0),
		{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(Binary, "/"), Mode: 0o755, Size: int64(len(bin)), ModTime: mtime, Format: tar.FormatPAX},
		dir("var/", 0o755, 0), dir("var/lib/", 0o755, 0), dir(strings.TrimPrefix(DataDir, "/")+"/", 0o750, UID),
	} {
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(bin); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression))
}

// WriteLayout writes idx as an OCI image layout in dir, which must not
// exist or be empty, under the tag ref (org.opencontainers.image.ref.name).
func WriteLayout(dir string, idx v1.ImageIndex, ref string) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref}))
}

// FromDist reads GoReleaser's metadata.json and artifacts.json in dist:
// the version, the commit and the linux binaries. created is the commit's
// time (metadata.json's date is the build's).
func FromDist(dist string, created time.Time) (Options, error) {
	var meta struct {
		Version, Commit string
	}
	var artifacts []struct {
		Type, Path, Goos, Goarch string
	}
	for file, v := range map[string]any{"metadata.json": &meta, "artifacts.json": &artifacts} {
		data, err := os.ReadFile(filepath.Join(dist, file))
		if err != nil {
			return Options{}, err
		}
		if err := json.Unmarshal(data, v); err != nil {
			return Options{}, fmt.Errorf("%s: %w", file, err)
		}
	}
	opts := Options{
		Binaries: map[string]string{},
		Version:  meta.Version,
		Revision: meta.Commit,
		Source:   "https://github.com/tfmirror/tfmirror",
		Created:  created,
	}
	for _, a := range artifacts {
		if a.Type == "Binary" && a.Goos == "linux" {
			path := a.Path
			if !filepath.IsAbs(path) {
				// artifacts.json paths are relative to the directory
				// GoReleaser ran in, dist's parent.
				path = filepath.Join(dist, "..", path)
			}
			opts.Binaries["linux/"+a.Goarch] = path
		}
	}
	return opts, nil
}
