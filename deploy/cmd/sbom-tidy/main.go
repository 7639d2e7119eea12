// Command sbom-tidy takes out of a CycloneDX SBOM in JSON what depends on
// the build of the tool that wrote it, not on what it describes: the
// hashes of the tool's own executable, which cyclonedx-gomod records in
// metadata.tools. The release's SHA256SUMS lists the SBOMs, so with them
// a rebuild of a release with another build of the tool (docs/install.md)
// would not give the published SHA256SUMS. .goreleaser.yaml's sboms step
// runs it on each SBOM cyclonedx-gomod wrote:
//
//	cd deploy && go run ./cmd/sbom-tidy IN OUT
//
// It writes OUT whole or not at all (a file beside it, renamed), with
// the document's keys in sorted order, two spaces of indent: one input
// gives one output.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: sbom-tidy IN OUT")
		os.Exit(2)
	}
	if err := tidyFile(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "sbom-tidy:", err)
		os.Exit(1)
	}
}

// tidyFile writes to out the SBOM in, tidied.
func tidyFile(in, out string) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	tidied, err := tidy(data)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".sbom-tidy-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(tidied); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}

// tidy is the SBOM data without the hashes of the tools that wrote it:
// metadata.tools as an array of tools (CycloneDX 1.4) or as an object of
// components and services (1.5 on).
func tidy(data []byte) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc["bomFormat"] != "CycloneDX" {
		return nil, errors.New("not a CycloneDX document (no bomFormat CycloneDX)")
	}
	if meta, ok := doc["metadata"].(map[string]any); ok {
		switch tools := meta["tools"].(type) {
		case []any:
			dropHashes(tools)
		case map[string]any:
			for _, kind := range []string{"components", "services"} {
				if list, ok := tools[kind].([]any); ok {
					dropHashes(list)
				}
			}
		}
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// dropHashes removes the hashes of each tool in tools.
func dropHashes(tools []any) {
	for _, t := range tools {
		if tool, ok := t.(map[string]any); ok {
			delete(tool, "hashes")
		}
	}
}
