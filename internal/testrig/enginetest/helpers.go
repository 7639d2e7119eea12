package enginetest

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apparentlymart/go-versions/versions"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/tfmirror/tfmirror/v2/addrs"
	"github.com/tfmirror/tfmirror/v2/mirror/imports"
	"github.com/tfmirror/tfmirror/v2/mirror/records"
	"github.com/tfmirror/tfmirror/v2/policy"
)

// MustModuleVersion parses s as a module version (a leading "v"
// allowed: addrs.ParseModuleVersion) or fails the test.
func MustModuleVersion(t testing.TB, s string) versions.Version {
	t.Helper()
	v, err := addrs.ParseModuleVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// FakeClock is an engine's clock (mirror.Config.Now) that tests move.
type FakeClock struct{ now atomic.Int64 }

// NewFakeClock returns a clock set to the real time.
func NewFakeClock() *FakeClock {
	c := &FakeClock{}
	c.now.Store(time.Now().UnixNano())
	return c
}

func (c *FakeClock) Now() time.Time      { return time.Unix(0, c.now.Load()) }
func (c *FakeClock) Add(d time.Duration) { c.now.Add(int64(d)) }
func (c *FakeClock) Set(t time.Time)     { c.now.Store(t.UnixNano()) }

// NoMetrics is an engine's metrics (mirror.Metrics) that observe nothing,
// for a test's metrics to embed and override what they count.
type NoMetrics struct{}

func (NoMetrics) CacheLookup(string, bool)                         {}
func (NoMetrics) StaleServed(string)                               {}
func (NoMetrics) Coalesced(string)                                 {}
func (NoMetrics) VerificationFailed(string)                        {}
func (NoMetrics) ArchiveFetchStarted() func()                      { return func() {} }
func (NoMetrics) ArchiveFetchWaiting() func()                      { return func() {} }
func (NoMetrics) CacheWriteFailed()                                {}
func (NoMetrics) OCIWrongSizeDropped()                             {}
func (NoMetrics) ModuleFetch(string, string, int64, time.Duration) {}
func (NoMetrics) CacheChecked(time.Time, int, int)                 {}
func (NoMetrics) PolicyRefused(string)                             {}
func (NoMetrics) NotFoundRemembered(string)                        {}
func (NoMetrics) NotFoundEntries(string, int)                      {}

// InHouseZip is a provider package of type typ built by the test.
func InHouseZip(t testing.TB, typ string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "terraform-provider-" + typ, Method: zip.Deflate}
	h.SetMode(0o755)
	f, err := zw.CreateHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "#!/bin/sh\nexit 1\n")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ZipOfSize is an in-house provider package of type typ with an
// incompressible payload of about size bytes, distinct per seed.
func ZipOfSize(t testing.TB, typ string, size int, seed uint64) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	fh := &zip.FileHeader{Name: "terraform-provider-" + typ, Method: zip.Store}
	fh.SetMode(0o755)
	f, err := zw.CreateHeader(fh)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "#!/bin/sh\nexit 1\n")
	pad := make([]byte, size)
	r := rand.New(rand.NewPCG(seed, seed+1))
	for i := range pad {
		pad[i] = byte(r.Uint32())
	}
	pf, err := zw.CreateHeader(&zip.FileHeader{Name: "padding", Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	pf.Write(pad)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ImportedFrom makes an imports.Imported from the evidence ev, each archive's
// bytes given by body.
func ImportedFrom(ev *records.Evidence, body func(pl string) []byte) imports.Imported {
	in := imports.Imported{Provider: ev.Provider, Documents: ev.Documents}
	for _, pe := range ev.Platforms {
		data := body(pe.Platform)
		in.Packages = append(in.Packages, imports.Package{
			Platform: pe.Platform, Filename: pe.Filename, DownloadURL: pe.DownloadURL, Protocols: pe.Protocols,
			OS: pe.OS, Arch: pe.Arch, Shasum: pe.Shasum, Document: pe.Document,
			Open: func(context.Context) (io.ReadCloser, int64, error) {
				return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
			},
		})
	}
	return in
}

// DecodePolicy decodes the body of a policy block.
func DecodePolicy(t testing.TB, src string) *policy.Policy {
	t.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(src), "policy.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p, diags := policy.Decode(f.Body)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return p
}
