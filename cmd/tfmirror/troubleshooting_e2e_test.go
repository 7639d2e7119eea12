package main

// The troubleshooting guide (docs/troubleshooting.md) quotes what the
// real terraform prints, and what the mirror answers, when an install
// through the mirror fails. TestTroubleshootingGuide makes each of those
// failures happen and holds every quote of the guide to what was
// printed, so that the guide says what a user will see.

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/verify"
)

// guideQuote is one quoted block of the guide: the scenario it is
// checked against and its lines.
type guideQuote struct {
	scenario string
	lines    []string
	at       []int // each line's number in the guide
}

// readGuide returns the guide's quoted blocks: each fenced block that
// follows a line "<!-- scenario: NAME -->".
func readGuide(t *testing.T, path string) []guideQuote {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	marker := regexp.MustCompile(`^<!-- scenario: ([a-z0-9-]+) -->$`)
	var quotes []guideQuote
	var cur *guideQuote
	scenario, inFence, n := "", false, 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case inFence && strings.HasPrefix(line, "```"):
			inFence = false
			quotes = append(quotes, *cur)
			cur = nil
		case inFence:
			if strings.TrimSpace(line) != "" {
				cur.lines = append(cur.lines, line)
				cur.at = append(cur.at, n)
			}
		case strings.HasPrefix(line, "```") && scenario != "":
			inFence = true
			cur = &guideQuote{scenario: scenario}
			scenario = ""
		case marker.MatchString(line):
			scenario = marker.FindStringSubmatch(line)[1]
		}
	}
	if inFence || scenario != "" {
		t.Fatalf("%s: a scenario marker without its closed block", path)
	}
	return quotes
}

// quoteRegexp is the pattern of one quoted line: its words in order,
// any white space between them (terraform wraps its messages), "…"
// standing for one word of the user's own (an address, a port, a
// version).
func quoteRegexp(line string) *regexp.Regexp {
	var parts []string
	for _, w := range strings.Fields(line) {
		var pw []string
		for _, piece := range strings.Split(w, "…") {
			pw = append(pw, regexp.QuoteMeta(piece))
		}
		parts = append(parts, strings.Join(pw, `\S+`))
	}
	return regexp.MustCompile(strings.Join(parts, `\s+`))
}

// TestTroubleshootingGuide makes every failure the troubleshooting guide
// describes happen with the real terraform (through the network mirror
// and through a host block) and checks each line the guide quotes for it
// against what terraform printed and the mirror answered. A scenario the
// guide does not quote, or a quote of a scenario not made here, fails.
func TestTroubleshootingGuide(t *testing.T) {
	t.Parallel()
	quotes := readGuide(t, filepath.Join("..", "..", "docs", "troubleshooting.md"))

	e, _ := newPolicyE2E(t)
	origin := e.origin
	platforms := registryPlatforms()
	yearAgo := time.Now().AddDate(-1, 0, 0)
	origin.AddProvider("acme", "widget", []string{"1.0.0", "1.1.0", "1.2.0", "1.3.0"}, platforms)
	for _, v := range []string{"1.0.0", "1.1.0", "1.2.0"} {
		origin.SetSignedAt("acme", "widget", v, yearAgo)
		file := "vpc-" + v + ".tar.gz"
		origin.AddTarball(file, fakeorigin.TarGz(map[string][]byte{"main.tf": []byte("output \"v\" {\n  value = \"" + v + "\"\n}\n")}))
		origin.AddModule("acme", "vpc", "aws", v, origin.TarballURL(file))
		origin.AddModule("other", "net", "aws", v, origin.TarballURL(file))
	}
	origin.SetSignedAt("acme", "widget", "1.3.0", time.Now().Add(-time.Hour))
	origin.AddProvider("other", "gadget", []string{"1.0.0"}, platforms)
	origin.AddProvider("acme", "lonely", []string{"1.0.0"}, []string{"windows_386"})
	origin.SetSignedAt("acme", "lonely", "1.0.0", yearAgo)
	origin.AddProvider("acme", "gone", []string{"1.0.0"}, platforms)
	origin.SetSignedAt("acme", "gone", "1.0.0", yearAgo)
	if err := os.WriteFile(e.config, []byte(policyConfig(`  deny_version "`+privateRegistry+`/acme/widget" {
    versions = "= 1.2.0"
    reason   = "`+cve+`"
  }
  deny_version "`+privateRegistry+`/acme/vpc/aws" {
    versions = "= 1.2.0"
    reason   = "`+cve+`"
  }
  minimum_release_age = "72h"
`)), 0o600); err != nil {
		t.Fatal(err)
	}

	widget := privateRegistry + "/acme/widget"
	host := runtime.GOOS + "_" + runtime.GOARCH
	var netMirror, hostBlock string // the CLI configurations of the two doors
	start := func(dataDir string, flags ...string) {
		t.Helper()
		if e.stop != nil {
			e.stop()
		}
		e.startMirror(filepath.Join(t.TempDir(), dataDir), flags...)
		netMirror = filepath.Join(t.TempDir(), "cli.tfrc")
		if err := os.WriteFile(netMirror, []byte(fmt.Sprintf("provider_installation {\n  network_mirror {\n    url = %q\n  }\n}\n", e.url)), 0o644); err != nil {
			t.Fatal(err)
		}
		hostBlock = throughMirrorAs(t, e, privateRegistry, "").conf
	}
	// initIn runs terraform init in dir with the CLI configuration conf
	// and the mirror's CA, and returns what it printed; the init must fail.
	initIn := func(dir, conf, caFile string) string {
		t.Helper()
		out, err := runCLI(e.tf, dir, conf, caFile, "init", "-no-color")
		if err == nil {
			t.Errorf("terraform init in %s succeeded where the guide says it fails:\n%s", dir, out)
		}
		return out
	}
	provider := func(src string) string { return writeConfig(t, map[string]string{"p": src}) }
	module := func(src, version string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte("module \"m\" {\n  source  = \""+src+"\"\n  version = \""+version+"\"\n}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	withLock := func(version, hash string) string {
		dir := provider(widget + "@~> 1.0")
		lock := fmt.Sprintf("provider %q {\n  version     = %q\n  constraints = \"~> 1.0\"\n  hashes = [\n    %q,\n  ]\n}\n", widget, version, hash)
		if err := os.WriteFile(filepath.Join(dir, ".terraform.lock.hcl"), []byte(lock), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	// answer is what the mirror answers for path, after terraform's output.
	answer := func(path string) string {
		status, body := e.get(t, path)
		return fmt.Sprintf("\nthe mirror answers %s: %d %s\n", path, status, body)
	}
	// counted is the line of series in the mirror's metrics once it is
	// above zero (a failed handshake is counted as the server's
	// connection ends, after the client left).
	counted := func(series string) string {
		line := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` [1-9][0-9]*$`)
		for range 50 {
			_, body := e.get(t, "metrics")
			if m := line.FindString(body); m != "" {
				return "\nthe mirror's metrics say: " + m + "\n"
			}
			time.Sleep(100 * time.Millisecond)
		}
		return "\nthe mirror's metrics do not count " + series + "\n"
	}
	archive := origin.Archive("acme", "widget", "1.2.0", host)
	deniedH1, err := verify.H1(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		t.Fatal(err)
	}
	emptyCA := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(emptyCA, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	// The scenarios, in order: each mirror's before the next starts.
	type scenario struct {
		name string
		run  func() string
	}
	scenarios := []scenario{
		{"start", func() string { start("data"); return "" }},
		{"untrusted-ca", func() string {
			return initIn(provider(widget+"@1.1.0"), netMirror, emptyCA) + counted(`tfmirror_tls_handshake_failures_total{reason="certificate_refused"}`)
		}},
		{"unknown-provider-network-mirror", func() string {
			return initIn(provider(privateRegistry+"/other/gadget@1.0.0"), netMirror, e.caFile) +
				answer(privateRegistry+"/other/gadget/index.json")
		}},
		{"unknown-provider-host-block", func() string {
			return initIn(provider(privateRegistry+"/other/gadget@1.0.0"), hostBlock, e.caFile)
		}},
		{"held-version-network-mirror", func() string {
			return initIn(provider(widget+"@1.2.0"), netMirror, e.caFile) + answer(widget+"/1.2.0.json")
		}},
		{"held-version-host-block", func() string { return initIn(provider(widget+"@1.3.0"), hostBlock, e.caFile) }},
		{"lock-pins-held-version", func() string { return initIn(withLock("1.2.0", deniedH1), hostBlock, e.caFile) }},
		{"lock-checksums", func() string {
			return initIn(withLock("1.1.0", "h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="), netMirror, e.caFile)
		}},
		{"no-platform", func() string { return initIn(provider(privateRegistry+"/acme/lonely@1.0.0"), netMirror, e.caFile) }},
		{"module-held-version", func() string {
			return initIn(module(privateRegistry+"/acme/vpc/aws", "1.2.0"), hostBlock, e.caFile)
		}},
		{"module-not-found", func() string {
			return initIn(module(privateRegistry+"/other/net/aws", "1.0.0"), hostBlock, e.caFile)
		}},
		{"origin-down", func() string {
			origin.SetDown(503)
			defer origin.SetDown(0)
			return initIn(provider(privateRegistry+"/acme/gone@1.0.0"), netMirror, e.caFile) +
				answer(privateRegistry+"/acme/gone/index.json")
		}},
		{"offline", func() string {
			start("offline", "--offline")
			return initIn(provider(widget+"@1.1.0"), netMirror, e.caFile) + answer(widget+"/index.json")
		}},
		{"origin-certificate", func() string {
			e.originRoots = x509.NewCertPool()
			defer func() { e.originRoots = nil }()
			start("origin-certificate")
			return initIn(provider(widget+"@1.1.0"), netMirror, e.caFile) + answer(widget+"/index.json")
		}},
		{"client-auth", func() string {
			tokens := filepath.Join(t.TempDir(), "tokens")
			if err := os.WriteFile(tokens, []byte("a-client-token-0123456789\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			start("client-auth", "--auth-tokens-file", tokens)
			return initIn(provider(widget+"@1.1.0"), netMirror, e.caFile)
		}},
	}
	quoted := map[string]bool{}
	for _, q := range quotes {
		quoted[q.scenario] = true
		if len(q.lines) == 0 {
			t.Errorf("troubleshooting.md: a block of scenario %q quotes nothing", q.scenario)
		}
		if !slices.ContainsFunc(scenarios, func(s scenario) bool { return s.name == q.scenario }) {
			t.Errorf("troubleshooting.md quotes scenario %q, which this test does not make", q.scenario)
		}
	}
	for _, s := range scenarios {
		out := s.run()
		if s.name == "start" {
			continue
		}
		if !quoted[s.name] {
			t.Errorf("scenario %q is quoted nowhere in troubleshooting.md", s.name)
		}
		for _, q := range quotes {
			if q.scenario != s.name {
				continue
			}
			for i, line := range q.lines {
				if !quoteRegexp(line).MatchString(out) {
					t.Errorf("troubleshooting.md:%d (scenario %s): %q is not what was printed:\n%s", q.at[i], s.name, line, out)
				}
			}
		}
	}
}
