// Command tfmirror-image writes tfmirror's container image, assembled by
// package image from the linux binaries of a GoReleaser build, as an OCI
// image layout. The release workflow runs it, then pushes the layout and
// signs what it pushed; deploy/release_test.go runs the same assembly on a
// snapshot build.
//
//	cd deploy && go run ./cmd/tfmirror-image -base REF|scratch -dist ../dist -out DIR
//
// -created is the commit's time (git log -1 --format=%ct), so that one
// commit gives one image digest. -base is the base image by digest (release.yml names distroless/static),
// pulled with the credentials of the Docker configuration, or "scratch"
// for an empty one. -dist is GoReleaser's output directory: the binaries,
// the version and commit come from its metadata.json and artifacts.json.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/tfmirror/tfmirror/deploy/internal/image"
)

func main() {
	base := flag.String("base", "", `the base image by digest, or "scratch"`)
	dist := flag.String("dist", "../dist", "GoReleaser's output directory")
	out := flag.String("out", "", "the OCI image layout to write (a new directory)")
	created := flag.Int64("created", 0, "the image's time in Unix seconds, the commit's (default $SOURCE_DATE_EPOCH)")
	flag.Parse()
	if *created == 0 {
		*created, _ = strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	}
	if err := run(*base, *dist, *out, time.Unix(*created, 0)); err != nil {
		fmt.Fprintln(os.Stderr, "tfmirror-image:", err)
		os.Exit(1)
	}
}

func run(base, dist, out string, created time.Time) error {
	if base == "" || out == "" || created.Unix() <= 0 {
		return errors.New("-base, -out and -created (or SOURCE_DATE_EPOCH) are required")
	}
	opts, err := image.FromDist(dist, created)
	if err != nil {
		return err
	}
	if base != "scratch" {
		ref, err := name.NewDigest(base)
		if err != nil {
			return fmt.Errorf("-base %s: pin the base image by digest: %w", base, err)
		}
		opts.Base, err = remote.Index(ref, remote.WithAuthFromKeychain(authn.DefaultKeychain))
		if err != nil {
			return err
		}
	}
	idx, err := image.Build(opts)
	if err != nil {
		return err
	}
	if err := image.WriteLayout(out, idx, opts.Version); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Println(d)
	return nil
}
