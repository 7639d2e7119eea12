package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSyncCLIReportsHeldAndUnmatched: a sync's cli blocks say what the
// package policy holds back, and fail a selection no version matches,
// as provider blocks do: a version deny_version refuses is listed as
// skipped with its reason, a product the policy denies whole too, and
// `versions = ["9.9.9"]` fails the sync (exit 1) naming the selection.
// They were left out in silence: a typo in a version, or a version held
// back, ended a sync with status 0 and no word, and the sealed mirror it
// fed lacked the release.
func TestSyncCLIReportsHeldAndUnmatched(t *testing.T) {
	c := newCLIOrigin(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	conf := filepath.Join(t.TempDir(), "mirror.hcl")
	pol := "policy {\n  deny = [{ pattern = \"get.opentofu.org/opentofu/tofu\", reason = \"terraform only here\" }]\n" +
		"  deny_version \"releases.hashicorp.com/hashicorp/terraform\" {\n    versions = [\"1.6.0\"]\n    reason   = \"use 1.5.7\"\n  }\n}\n"
	if err := os.WriteFile(conf, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	sync := func(src string) (int, string) {
		t.Helper()
		m := filepath.Join(t.TempDir(), "sync.hcl")
		if err := os.WriteFile(m, []byte("platforms = [\""+platform+"\"]\n"+src), 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		args := append(append(c.flags(dataDir), "--config", conf), m)
		code := runSync(context.Background(), args, func(string) (string, bool) { return "", false }, &stdout, &stderr,
			overrides{rootCAs: c.pool(), keepStdLog: true})
		return code, stdout.String() + stderr.String()
	}

	code, out := sync("cli \"terraform\" {\n  versions = [\">= 1.5\"]\n}\ncli \"tofu\" {\n  versions = [\">= 1.8\"]\n}\n")
	if code != 0 {
		t.Fatalf("sync: exit %d\n%s", code, out)
	}
	for _, want := range []string{
		"skipped: cli terraform 1.6.0: held back by the package policy (deny_version): use 1.5.7",
		"skipped: cli tofu: held back by the package policy (deny): terraform only here",
		"cli summary: 1 archives fetched",
		"2 held back by the package policy",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("sync output lacks %q:\n%s", want, out)
		}
	}

	code, out = sync("cli \"terraform\" {\n  versions = [\"9.9.9\"]\n}\n")
	if code != 1 || !strings.Contains(out, `failed: cli terraform: no version matches "9.9.9"`) {
		t.Errorf("a cli selection no version matches: exit %d, want 1 naming it:\n%s", code, out)
	}
}
