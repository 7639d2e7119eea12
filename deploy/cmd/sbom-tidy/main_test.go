package main

import (
	"strings"
	"testing"
)

// TestTidy: the hashes of the tools that wrote an SBOM are taken out,
// whichever form metadata.tools has (an array of tools, CycloneDX 1.4;
// an object of components and services, 1.5 on), and nothing else: the
// hashes of the components it describes stay. Two documents that differ
// only in the order of their keys give the same bytes. A document that
// is not CycloneDX is refused.
func TestTidy(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, wantErr string
	}{
		{name: "tools as an array",
			in:   `{"bomFormat":"CycloneDX","metadata":{"tools":[{"name":"cyclonedx-gomod","hashes":[{"alg":"SHA-256","content":"aa"}]}]},"components":[{"name":"mux","hashes":[{"alg":"SHA-256","content":"bb"}]}]}`,
			want: `{"bomFormat":"CycloneDX","components":[{"hashes":[{"alg":"SHA-256","content":"bb"}],"name":"mux"}],"metadata":{"tools":[{"name":"cyclonedx-gomod"}]}}`},
		{name: "tools as components and services",
			in:   `{"metadata":{"tools":{"services":[{"name":"s","hashes":[]}],"components":[{"name":"cyclonedx-gomod","hashes":[{"alg":"MD5","content":"cc"}]}]}},"bomFormat":"CycloneDX"}`,
			want: `{"bomFormat":"CycloneDX","metadata":{"tools":{"components":[{"name":"cyclonedx-gomod"}],"services":[{"name":"s"}]}}}`},
		{name: "not CycloneDX", in: `{"spdxVersion":"SPDX-2.3"}`, wantErr: "not a CycloneDX document"},
		{name: "not JSON", in: `<bom/>`, wantErr: "invalid character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tidy([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("tidy: %v, want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if compact := strings.Join(strings.Fields(string(got)), ""); compact != tc.want {
				t.Errorf("tidy gave\n%s\nwant\n%s", compact, tc.want)
			}
		})
	}
}
