package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// docSection returns the text of docs/operations.md's section titled
// title, up to the next section of its level.
func docSection(t *testing.T, file, title string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "\n## "+title+"\n")
	if start < 0 {
		t.Fatalf("%s has no section %q", file, title)
	}
	rest := text[start+1:]
	if end := strings.Index(rest[3:], "\n## "); end >= 0 {
		rest = rest[:end+4]
	}
	return rest
}

// fence is one fenced code block: its language and lines.
type fence struct {
	lang  string
	lines []string
}

func fences(text string) []fence {
	var out []fence
	var cur *fence
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &fence{lang: strings.TrimPrefix(line, "```")}
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
		}
	}
	return out
}

// TestEgressDocFollowed follows docs/operations.md's "Behind an egress
// proxy" word by word on a fresh machine: it writes the company's CA and
// the configuration file where the section says, runs the section's shell
// block line by line (each export into the environment, each tfmirror
// command as the real binary), with the proxy the section names being a
// TLS-inspecting proxy on loopback that signs with the company's CA and
// the public registry a fake origin behind it; then the mirror serves a
// provider from registry.terraform.io through the proxy, and logs what the
// section says it logs. Only the machine's paths and addresses are mapped
// to the test's: /etc/tfmirror/ to a temporary directory, the proxy's
// host to its loopback address, and the listener (which the section
// leaves at its default) to a free port through TFMIRROR_LISTEN.
func TestEgressDocFollowed(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	section := docSection(t, filepath.Join("..", "..", "docs", "operations.md"), "Behind an egress proxy")
	blocks := fences(section)

	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: []string{tfRegistry}, RelativeDownloadURLs: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64"})
	ca := newCompanyCA(t)
	egress := startInspectingProxy(t, ca, origin.Addr, origin.CertPool())

	root := t.TempDir()
	etc := filepath.Join(root, "etc", "tfmirror") + string(filepath.Separator)
	proxyHost := regexp.MustCompile(`proxy\.corp\.example:3128`)
	mapped := func(s string) string {
		s = strings.ReplaceAll(s, "/etc/tfmirror/", etc)
		return proxyHost.ReplaceAllString(s, strings.TrimPrefix(egress.URL(), "http://"))
	}
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	// "the company's CA in /etc/tfmirror/company-ca.pem"
	if !strings.Contains(section, "`/etc/tfmirror/company-ca.pem`") {
		t.Fatal("the section no longer says where the company's CA is")
	}
	if err := os.WriteFile(mapped("/etc/tfmirror/company-ca.pem"), ca.pem, 0o644); err != nil {
		t.Fatal(err)
	}

	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root, "TFMIRROR_LISTEN=127.0.0.1:0"}
	var p *proc
	ran := map[string]bool{}
	for _, b := range blocks {
		switch b.lang {
		case "hcl":
			// A file: its first line names it.
			name, ok := strings.CutPrefix(b.lines[0], "# ")
			if !ok || !strings.HasPrefix(name, "/") {
				t.Fatalf("hcl block %q does not name its file on its first line", b.lines)
			}
			if err := os.WriteFile(mapped(name), []byte(mapped(strings.Join(b.lines, "\n"))+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			ran["file"] = true
		case "sh":
			for _, line := range b.lines {
				line = strings.TrimSpace(line)
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				words := strings.Fields(mapped(line))
				switch {
				case words[0] == "export" && len(words) == 2 && strings.Contains(words[1], "="):
					env = append(env, words[1])
					ran["export"] = true
				case words[0] == "tfmirror" && len(words) > 1 && words[1] == "serve":
					if p != nil {
						t.Fatal("the section starts tfmirror serve twice")
					}
					cmd := exec.Command(bin, words[1:]...)
					cmd.Dir, cmd.Env = root, env
					p = startCmd(t, cmd, filepath.Join(root, "tfmirror-data"))
					ran["serve"] = true
				case words[0] == "tfmirror":
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					cmd := exec.CommandContext(ctx, bin, words[1:]...)
					cmd.Dir, cmd.Env = root, env
					out, err := cmd.CombinedOutput()
					cancel()
					if err != nil {
						t.Fatalf("%s: %v\n%s", line, err, out)
					}
					ran[words[1]] = true
				default:
					t.Fatalf("the section runs %q, which this test does not know how to follow", line)
				}
			}
		default:
			t.Fatalf("a %q block in the section, which this test does not know how to follow", b.lang)
		}
	}
	for _, step := range []string{"file", "export", "config", "serve"} {
		if !ran[step] {
			t.Fatalf("the section has no %s step any more (ran %v)", step, ran)
		}
	}

	// What the section says the log says.
	said := regexp.MustCompile("The log says `([^`]+)` with the CAs'\\s+names, then `([^`]+)`").FindAllStringSubmatch(section, -1)
	if len(said) != 1 {
		t.Error("the section no longer says what the log says")
	}
	for _, m := range said {
		for _, msg := range m[1:] {
			if !p.loggedPrefix(msg) {
				t.Errorf("the log has no %q, as the section says", msg)
			}
		}
	}
	if l := p.logged("origin TLS trusts the system roots and the CAs of origin_ca_file"); l == nil || !strings.Contains(strings.Join(toStrings(l["cas"]), ","), "Example Corp egress inspection CA") {
		t.Errorf("the log does not name the company's CA: %v", l)
	}

	// The mirror serves a provider of the public registry, reached
	// through the proxy.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body, _, err := p.get(ctx, "/registry.terraform.io/hashicorp/random/index.json")
	if err != nil || !strings.Contains(string(body), "3.6.0") {
		t.Fatalf("the mirror's version list: %v %s", err, body)
	}
	if egress.inspected.Load() == 0 {
		t.Error("the origin was not reached through the inspecting proxy")
	}
}

// loggedPrefix reports whether a log line's message starts with prefix.
func (p *proc) loggedPrefix(prefix string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

func toStrings(v any) []string {
	items, _ := v.([]any)
	var out []string
	for _, it := range items {
		s, _ := it.(string)
		out = append(out, s)
	}
	return out
}
