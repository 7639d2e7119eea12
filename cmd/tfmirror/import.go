package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tfmirror/tfmirror/proxy"
)

const importUsage = "tfmirror import [--data-dir DIR] [--allow-unsigned] IN"

// runImport is `tfmirror import`. When a tfmirror serve runs on the data
// directory, that process does the import (and reads IN); otherwise this
// one opens the cache, sealed.
func runImport(args []string, stdout, stderr io.Writer) int {
	var allowUnsigned bool
	cfg, rest, err := parseCacheCommandFlags("import", args, os.LookupEnv, stderr, importUsage, func(fs *flag.FlagSet) {
		fs.BoolVar(&allowUnsigned, "allow-unsigned", false, "also import packages without the origin's signed evidence (a `terraform providers mirror` directory, in-house builds): checked against the h1: hashes of VERSION.json where present and recorded as imported without signature")
	})
	if errors.Is(err, errHelp) {
		return 0
	}
	if err == nil && len(rest) != 1 {
		err = fmt.Errorf("want one IN (a directory, or a tar file), got %d arguments", len(rest))
	}
	req := proxy.AdminImportRequest{AllowUnsigned: allowUnsigned}
	if err == nil {
		req.Shown = rest[0]
		req.In, err = filepath.Abs(rest[0])
	}
	if err != nil {
		fmt.Fprintf(stderr, "tfmirror import: %v\nUsage: %s\n", err, importUsage)
		return 2
	}
	if _, err := os.Stat(req.In); err != nil {
		fmt.Fprintf(stderr, "tfmirror import: %v\n", err)
		return 1
	}
	return runSealed("import", cfg, stdout, stderr, func(ctx context.Context, ops engineOps) (airGapResult, error) {
		res, err := ops.Import(ctx, req)
		return airGapResult{
			summary: fmt.Sprintf("imported %d packages (%d bytes), %d already present, %d failed, %d files ignored",
				res.Imported, res.Bytes, res.Present, res.Failed, res.Ignored),
			failures: res.Failures, failed: res.Failed,
		}, err
	})
}
