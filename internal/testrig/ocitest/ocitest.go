// Package ocitest finds the OCI tools the tests drive and starts an OCI
// registry for them: the oras CLI, the distribution registry (a real
// OCI registry to push an export into, on loopback) and the OCI
// distribution-spec conformance program.
//
// .ci/run installs each, pinned, into .ci/bin with go install. A tool
// is found in its environment variable (TFMIRROR_ORAS,
// TFMIRROR_OCI_REGISTRY, TFMIRROR_OCI_CONFORMANCE), else in .ci/bin of
// the module, else on PATH. When it is missing the test is skipped,
// saying how to install it, except in CI ($CI set), where that is a
// failure. It is a test rig: no production package imports it.
package ocitest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A Tool is one of the programs the tests drive, with the release
// .ci/run installs (keep the two in step).
type Tool struct {
	Name    string // the binary's name
	Env     string // the variable that names the binary
	Package string // what go install installs
	Version string
}

// The tools.
var (
	Oras = Tool{Name: "oras", Env: "TFMIRROR_ORAS",
		Package: "oras.land/oras/cmd/oras", Version: "v1.3.6"}
	Registry = Tool{Name: "registry", Env: "TFMIRROR_OCI_REGISTRY",
		Package: "github.com/distribution/distribution/v3/cmd/registry", Version: "v3.1.2"}
	Conformance = Tool{Name: "conformance", Env: "TFMIRROR_OCI_CONFORMANCE",
		Package: "github.com/opencontainers/distribution-spec/conformance", Version: "v0.0.0-20260831232431-97274622c111"}
)

// Binary returns the tool's binary, skipping t (failing it in CI) when
// there is none.
func (tool Tool) Binary(t testing.TB) string {
	t.Helper()
	p, err := tool.Find()
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal(err)
	}
	t.Skip(err)
	return ""
}

// Find returns the tool's binary, or an error saying how to install it.
func (tool Tool) Find() (string, error) {
	if p := os.Getenv(tool.Env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", errors.New(tool.Env + ": " + err.Error())
		}
		return p, nil
	}
	if root, err := moduleRoot(); err == nil {
		p := filepath.Join(root, ".ci", "bin", tool.Name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(tool.Name); err == nil {
		return p, nil
	}
	return "", errors.New(tool.Name + " not found: run .ci/run, or GOBIN=$PWD/.ci/bin go install " +
		tool.Package + "@" + tool.Version + ", or set " + tool.Env)
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, ".ci")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no module with .ci above the working directory")
		}
		dir = parent
	}
}
