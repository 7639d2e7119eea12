package harness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/enginetest"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
	"github.com/tfmirror/tfmirror/v2/mirror/modules"
)

// Module is the test module, published by tests at the fake origin.
var Module = addrs.Module{Hostname: OriginHost, Namespace: "acme", Name: "vpc", System: "aws"}

// TarballModule is a test module whose package tests publish as a tarball.
var TarballModule = addrs.Module{Hostname: OriginHost, Namespace: "acme", Name: "tarball", System: "aws"}

// ReadModule opens version of Module (in either spelling) and reads it
// to the end.
func (h *Harness) ReadModule(version string) (*modules.Package, []byte, error) {
	h.T.Helper()
	pkg, err := h.Engine.Modules().OpenModule(context.Background(), Module, enginetest.MustModuleVersion(h.T, version))
	if err != nil {
		return nil, nil, err
	}
	defer pkg.Close()
	b, err := io.ReadAll(pkg.Content())
	return pkg, b, err
}

// UnsignedImport is an unsigned import of version v of p, one in-house
// package for linux_amd64, and the package's sha256.
func UnsignedImport(t *testing.T, p addrs.Provider, version string) (imports.Imported, string) {
	t.Helper()
	zipped := enginetest.InHouseZip(t, p.Type)
	sum := sha256.Sum256(zipped)
	return imports.Imported{Provider: p, Version: MustVersion(t, version), Unsigned: true, Packages: []imports.Package{{
		Platform: "linux_amd64", Filename: "terraform-provider-" + p.Type + "_" + version + "_linux_amd64.zip", Document: -1,
		Open: func(context.Context) (io.ReadCloser, int64, error) {
			return io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped)), nil
		},
	}}}, hex.EncodeToString(sum[:])
}
