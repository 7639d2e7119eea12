package manifest

import (
	"strings"
	"testing"
	"time"
)

// TestStaticEvaluationHugeNumberBounded: a number past 10^±308 written
// in an expression sync evaluates (with --client opentofu) is refused at
// once naming its file:line, as every other reader refuses it
// (hclfile.Value): one of fourteen bytes, interpolated into a source,
// took minutes to turn into text.
func TestStaticEvaluationHugeNumberBounded(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"main.tf": "module \"m\" {\n  source = \"hashicorp/consul/aws\"\n  version = \"${1e3000000}\"\n}\n",
	})
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := LoadFor(OpenTofu, nil, dir)
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("%v after %v", err, time.Since(start))
		if err == nil || !strings.Contains(err.Error(), "main.tf:3") || len(err.Error()) > 4096 {
			t.Errorf("a version of a huge number was not refused naming main.tf:3 alone: %.300v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("still evaluating after 5s")
	}
}
