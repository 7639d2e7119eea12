package main

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"

	svchost "github.com/hashicorp/terraform-svchost"
	"golang.org/x/sync/errgroup"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/cache"
	"github.com/tfmirror/tfmirror/v2/discovery"
	"github.com/tfmirror/tfmirror/v2/mirror"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// The in-house packages of the growth curve (figure 8): a local-only host,
// providers of fixtureVersions versions × fixturePlatforms platforms each.
const (
	fixtureHost = "tf.corp.test"
	fixtureNS   = "platform"
)

var (
	fixtureVersions  = 10
	fixturePlatforms = []string{"linux_amd64", "darwin_arm64"}
)

func fixtureProvider(i int) string { return fmt.Sprintf("p%05d", i) }

func fixtureVersion(j int) string { return fmt.Sprintf("1.%d.0", j) }

// fixtureArchive is a tiny installable provider package, different for
// every provider, version and platform.
func fixtureArchive(typ, version, platform string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("terraform-provider-" + typ + "_v" + version)
	fmt.Fprintf(w, "#!/bin/sh\n# %s %s %s\n", typ, version, platform)
	zw.Close()
	return buf.Bytes()
}

// writeFixture writes packages in-house packages (rounded up to whole
// providers) into the cache of the data directory dataDir, as
// `tfmirror import --allow-unsigned` stores them, without HTTP: the
// archives are committed straight into the cache by several writers at
// once, then every version goes through the engine's Import, which finds
// its archives cached and writes the records and version lists. It
// returns the number of providers.
func writeFixture(ctx context.Context, dataDir string, packages int) (int, error) {
	perProvider := fixtureVersions * len(fixturePlatforms)
	providers := (packages + perProvider - 1) / perProvider
	store, err := cache.Open(cache.Options{Dir: filepath.Join(dataDir, "cache"), DiskReserve: -1})
	if err != nil {
		return 0, err
	}
	defer store.Close()

	type pkg struct {
		sha, h1, filename string
	}
	// sums[provider][version*platforms+platform]
	sums := make([][]pkg, providers)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range providers {
		sums[i] = make([]pkg, perProvider)
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			typ := fixtureProvider(i)
			for j := range fixtureVersions {
				for k, pl := range fixturePlatforms {
					b := fixtureArchive(typ, fixtureVersion(j), pl)
					s := sha256.Sum256(b)
					sha := hex.EncodeToString(s[:])
					h1, err := verify.H1(bytes.NewReader(b), int64(len(b)))
					if err != nil {
						return err
					}
					w, err := store.NewBlobWriter(sha)
					if err != nil {
						return err
					}
					if _, err := w.Write(b); err != nil {
						w.Close()
						return err
					}
					if _, err := w.Commit(h1); err != nil {
						w.Close()
						return err
					}
					if err := w.Close(); err != nil {
						return err
					}
					sums[i][j*len(fixturePlatforms)+k] = pkg{sha: sha, h1: h1,
						filename: fmt.Sprintf("terraform-provider-%s_%s_%s.zip", typ, fixtureVersion(j), pl)}
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, fmt.Errorf("writing archives: %w", err)
	}

	engine, err := mirror.New(mirror.Config{AllowedOrigins: []string{"registry.terraform.io"}}, noOrigin{}, store)
	if err != nil {
		return 0, err
	}
	defer engine.Close()
	for i := range providers {
		p, err := addrs.ParseProvider(fixtureHost + "/" + fixtureNS + "/" + fixtureProvider(i))
		if err != nil {
			return 0, err
		}
		for j := range fixtureVersions {
			v, err := addrs.ParseSemver(fixtureVersion(j))
			if err != nil {
				return 0, err
			}
			in := imports.Imported{Provider: p, Version: v, Protocols: []string{"5.0"}, Unsigned: true}
			for k, pl := range fixturePlatforms {
				s := sums[i][j*len(fixturePlatforms)+k]
				in.Packages = append(in.Packages, imports.Package{Platform: pl, Filename: s.filename,
					SHA256: s.sha, H1: s.h1, Open: func(context.Context) (io.ReadCloser, int64, error) {
						return nil, 0, errors.New("the fixture's archives are cached before they are imported")
					}})
			}
			if _, err := engine.AirGap().Import(ctx, in); err != nil {
				return 0, fmt.Errorf("importing %s %s: %w", p, v, err)
			}
		}
	}
	return providers, nil
}

// noOrigin is the fixture engine's origin: the fixture's host is
// local-only, never contacted.
type noOrigin struct{}

var errNoOrigin = errors.New("the fixture has no origin")

func (noOrigin) Versions(context.Context, addrs.Provider) (discovery.VersionList, error) {
	return discovery.VersionList{}, errNoOrigin
}

func (noOrigin) Package(context.Context, addrs.Provider, string, addrs.Platform) (*discovery.Package, error) {
	return nil, errNoOrigin
}

func (noOrigin) FetchSums(context.Context, addrs.Provider, *discovery.Package, int64, int64) ([]byte, []byte, error) {
	return nil, nil, errNoOrigin
}

func (noOrigin) OpenArchive(context.Context, addrs.Provider, string) (io.ReadCloser, int64, error) {
	return nil, 0, errNoOrigin
}

func (noOrigin) ArchiveSize(context.Context, addrs.Provider, string) (int64, error) {
	return 0, errNoOrigin
}

func (noOrigin) ModuleVersions(context.Context, addrs.Module) ([]string, error) {
	return nil, errNoOrigin
}

func (noOrigin) ModuleLocation(context.Context, addrs.Module, string) (discovery.ModuleDownload, error) {
	return discovery.ModuleDownload{}, errNoOrigin
}

func (noOrigin) OpenSource(context.Context, svchost.Hostname, string) (io.ReadCloser, int64, error) {
	return nil, 0, errNoOrigin
}

// SourceHTTPClient's client refuses every request.
func (noOrigin) SourceHTTPClient(svchost.Hostname) *http.Client {
	return &http.Client{Transport: refuseTransport{}}
}

type refuseTransport struct{}

func (refuseTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, errNoOrigin }
