package manifest

// A configuration's test files, as `terraform init` and `tofu init` read
// them: the module a run block loads is installed with the
// configuration, and the providers it asks are the configuration's.

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
)

// Test files: Terraform reads *.tftest.hcl and *.tftest.json files;
// OpenTofu its *.tofutest.hcl and *.tofutest.json too, each standing in
// for the .tftest file of its name. Both read them in a configuration's
// directory and in its tests directory (testsDir, the default of
// -test-directory).
var testKind = fileKind{".tftest.hcl", ".tftest.json", ".tofutest.hcl", ".tofutest.json"}

const testsDir = "tests"

var (
	testFileSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "run", LabelNames: []string{"name"}},
		{Type: "provider", LabelNames: []string{"name"}},
	}}
	runSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "module"}}}
)

// testFiles lists the test files of the configuration in dir, and of
// its tests directory, that OpenTofu reads (tofu) or Terraform, sorted
// within each directory (testKind).
func testFiles(dir string, tofu bool) ([]string, error) {
	var out []string
	for _, d := range []string{dir, filepath.Join(dir, testsDir)} {
		files, _, err := testKind.list(d, tofu)
		if err != nil {
			return nil, err
		}
		out = append(out, files...)
	}
	return out, nil
}

// readTests adds to t, the configuration in dir as its client reads it
// (readTree), what the run blocks of its test files load: the module of
// a run block's module block, a local one read with the local modules it
// calls (relative to dir, as the clients resolve it), a registry one
// added to t.remotes, as `terraform init` installs them; its providers'
// constraints all apply with the configuration's. A run block without a
// module block tests the configuration itself, read already. Read as
// OpenTofu reads it, a test file's provider blocks ask for their
// provider too (a local name of the configuration's root module, t.names,
// or hashicorp/NAME, with the block's version constraint), as `tofu
// providers` lists them; Terraform's ask nothing. ctx is checked before
// each file.
func readTests(ctx context.Context, t *treeRead, dir string) error {
	files, err := testFiles(dir, t.tofu)
	if err != nil {
		return err
	}
	host := defaultHost(t.tofu)
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for _, path := range files {
		blocks, err := blocksOf(ctx, path, testFileSchema)
		if err != nil {
			return err
		}
		for _, b := range blocks {
			if b.Type == "provider" {
				if t.tofu {
					if err := testProvider(t, b, host); err != nil {
						return err
					}
				}
				continue
			}
			rc, _, diags := b.Body.PartialContent(runSchema)
			if diags.HasErrors() {
				return diagError(diags)
			}
			for _, mb := range rc.Blocks {
				mc, _, diags := mb.Body.PartialContent(moduleSchema)
				if diags.HasErrors() {
					return diagError(diags)
				}
				call, local, err := addModuleCall(ctx, nil, abs, fmt.Sprintf("the module of run %q", b.Labels[0]), mb.DefRange, mc.Attributes, host, &t.remotes)
				if err == nil && local {
					err = loadLocal(ctx, t, call)
				}
				if err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// testProvider adds to t the provider a test file's provider block b
// asks for, as OpenTofu reads it (readTests): host is the registry of a
// local name the root module does not name.
func testProvider(t *treeRead, b *hcl.Block, host string) error {
	name := b.Labels[0]
	addr, err := providerOf(name, t.names, host)
	if err != nil {
		return posError(b.LabelRanges[0], "%v", err)
	}
	r := &requirement{addr: addr, where: where(b.DefRange), name: name}
	_, c, err := providerBlockVersion(b)
	if err != nil {
		return err
	}
	if c != nil {
		r.constrain(c.text, c.set)
	}
	t.reqs.merge([]*requirement{r})
	return nil
}
