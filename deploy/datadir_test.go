package deploy_test

import (
	"strings"
	"testing"
)

// TestHelmChartDataDirInNotes: the NOTES tell where the generated CA is,
// in the data directory the workload gives tfmirror: the claim's root by
// default, the directory tfmirror makes in the emptyDir without a claim.
func TestHelmChartDataDirInNotes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		values map[string]any
		dir    string
	}{
		{"claim", map[string]any{}, "/var/lib/tfmirror"},
		// A cache limit that fits the default emptyDir (10Gi); behind an
		// Ingress, the one place the chart generates a certificate on an
		// emptyDir (TestHelmChartGeneratedCA).
		{"emptyDir", map[string]any{"persistence": map[string]any{"enabled": false}, "config": map[string]any{"cache-max-bytes": "7GiB"},
			"ingress": map[string]any{"enabled": true, "hosts": []any{map[string]any{"host": "mirror.example.com"}}}}, "/var/lib/tfmirror/data"},
	} {
		m, notes := helmTemplate(t, tc.name, tc.values)
		w := checkWorkload(t, m)
		if w.dataDir != tc.dir {
			t.Errorf("%s: the data directory is %s, want %s", tc.name, w.dataDir, tc.dir)
		}
		if !strings.Contains(notes, " "+w.dataDir+"/tls/ca.pem ") {
			t.Errorf("%s: the NOTES do not name the CA in the data directory %s:\n%s", tc.name, w.dataDir, notes)
		}
	}
}
