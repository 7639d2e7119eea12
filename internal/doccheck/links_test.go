package doccheck

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, from this directory.
const root = "../.."

// TestRelativeLinksResolve checks every relative link of the project's
// Markdown documents (README.md, docs/, ARCHITECTURE.md, SECURITY.md,
// the deployment assets' READMEs: every .md file of the repository) offline:
// the file or directory it names exists, and the anchor it names, if any,
// is a heading of that document by GitHub's rules.
func TestRelativeLinksResolve(t *testing.T) {
	docs, err := markdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"README.md", "docs/configuration.md", "docs/operations.md"} {
		if !slices.Contains(docs, must) {
			t.Fatalf("%s not found among %v", must, docs)
		}
	}
	links := 0
	for _, doc := range docs {
		n, problems, err := checkLinks(root, doc)
		if err != nil {
			t.Fatal(err)
		}
		links += n
		for _, p := range problems {
			t.Errorf("%s", p)
		}
	}
	if links < 100 {
		t.Errorf("only %d relative links found: the parser misses some", links)
	}
}

// TestCheckLinksFindsBrokenOnes runs the checker on documents with
// broken links of each kind: each must be reported, and the good ones not.
func TestCheckLinksFindsBrokenOnes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/guide.md", "# Guide\n\n## Set-up: the `--flag` (v2)\n\n## Set-up: the `--flag` (v2)\n\n```sh\n# not a heading\n```\n")
	write("deploy/x.yaml", "")
	write("README.md", strings.Join([]string{
		"# Top",
		"[ok file](docs/guide.md)",
		"[ok anchor](docs/guide.md#set-up-the---flag-v2)",
		"[ok duplicate](docs/guide.md#set-up-the---flag-v2-1)",
		"[ok own](#top)",
		"[ok dir](deploy/)",
		"[ok absolute](https://example.com/nothing#here)",
		"[ok ref]",
		"`[in code](missing.md)`",
		"[missing file](docs/missing.md)",
		"[missing anchor](docs/guide.md#install)",
		"[no second duplicate](docs/guide.md#set-up-the---flag-v2-2)",
		"[code heading](docs/guide.md#not-a-heading)",
		"[missing own](#bottom)",
		"[anchor into yaml](deploy/x.yaml#top)",
		"[bad ref]",
		"",
		"[ok ref]: docs/guide.md#guide",
		"[bad ref]: docs/gone.md",
		"```",
		"[in fence](missing.md)",
		"```",
	}, "\n"))
	n, problems, err := checkLinks(dir, "README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"docs/missing.md", "docs/guide.md#install", "docs/guide.md#set-up-the---flag-v2-2",
		"docs/guide.md#not-a-heading", "#bottom", "deploy/x.yaml#top", "docs/gone.md"}
	if n != 13 || len(problems) != len(want) {
		t.Errorf("%d links, problems:\n%s\nwant 13 links and %d problems", n, strings.Join(problems, "\n"), len(want))
	}
	for _, w := range want {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, "("+w+")") }) {
			t.Errorf("no problem reported for %s", w)
		}
	}
}

func TestAnchor(t *testing.T) {
	tests := []struct{ name, heading, want string }{
		{"words", "Cache size and eviction", "cache-size-and-eviction"},
		{"parentheses", "Offline (sealed) mode", "offline-sealed-mode"},
		{"code and flags", "`tfmirror sync` and `--data-dir`", "tfmirror-sync-and---data-dir"},
		{"underscore kept", "tfmirror_cache_bytes", "tfmirror_cache_bytes"},
		{"link text only", "See [Trust](trust.md) now", "see-trust-now"},
		{"emphasis", "A *very* **bold** claim", "a-very-bold-claim"},
		{"punctuation", "What's new: v1.2, 3/4!", "whats-new-v12-34"},
		{"non-ASCII letters", "Übersicht", "übersicht"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := anchor(tc.heading); got != tc.want {
				t.Errorf("anchor(%q) = %q, want %q", tc.heading, got, tc.want)
			}
		})
	}
}

// markdownFiles are the .md files under dir, as slash paths relative to
// it, but for what git and the tools keep (.git, testdata, .ci/bin).
func markdownFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case rel == ".git", rel == ".ci/bin", d.Name() == "testdata", d.Name() == "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".md") {
			out = append(out, rel)
		}
		return nil
	})
	return out, err
}

var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^ {0,3}\[([^\]]+)\]:\s+<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// body is a document's lines outside fenced code blocks, with inline
// code removed.
func body(text string) []string {
	var out []string
	fence := ""
	for line := range strings.SplitSeq(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			out = append(out, "")
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			out = append(out, "")
			continue
		}
		out = append(out, codeSpan.ReplaceAllString(line, "``"))
	}
	return out
}

// anchors are the anchors GitHub gives the headings of a document, and
// its explicit <a name> and <a id> anchors.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for line := range strings.SplitSeq(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if level == 0 || level > 6 || !strings.HasPrefix(line[level:], " ") {
			continue
		}
		a := anchor(strings.TrimSpace(line[level:]))
		if n, dup := seen[a]; dup {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n+1)
		} else {
			seen[a] = 0
		}
		out[a] = true
	}
	return out
}

var linkInHeading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// anchor is the anchor GitHub gives a heading: its text (links' text
// only), lower case, spaces made '-', and every other character that is
// not a letter, a digit, '-' or '_' removed.
func anchor(heading string) string {
	heading = linkInHeading.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkLinks checks the relative links of doc (a slash path under
// root): it returns how many it checked and a line for each that does not
// resolve.
func checkLinks(root, doc string) (int, []string, error) {
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
	if err != nil {
		return 0, nil, err
	}
	lines := body(string(data))
	type link struct {
		line   int
		target string
	}
	var links []link
	for i, l := range lines {
		if m := refDef.FindStringSubmatch(l); m != nil {
			links = append(links, link{i + 1, m[2]})
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(l, -1) {
			links = append(links, link{i + 1, m[1]})
		}
	}
	anchorCache := map[string]map[string]bool{}
	var problems []string
	n := 0
	for _, l := range links {
		if scheme.MatchString(l.target) {
			continue
		}
		n++
		path, frag, _ := strings.Cut(l.target, "#")
		file := doc
		if path != "" {
			file = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(doc), path)))
			if strings.HasPrefix(file, "../") {
				problems = append(problems, fmt.Sprintf("%s:%d: (%s) leaves the repository", doc, l.line, l.target))
				continue
			}
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(file))); err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: (%s): %s does not exist", doc, l.line, l.target, file))
				continue
			}
		}
		if frag == "" {
			continue
		}
		if !strings.HasSuffix(file, ".md") {
			problems = append(problems, fmt.Sprintf("%s:%d: (%s): an anchor into %s, which is not a Markdown document", doc, l.line, l.target, file))
			continue
		}
		as, ok := anchorCache[file]
		if !ok {
			text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
			if err != nil {
				return n, nil, err
			}
			as = anchors(string(text))
			anchorCache[file] = as
		}
		if !as[frag] {
			problems = append(problems, fmt.Sprintf("%s:%d: (%s): %s has no heading with anchor #%s", doc, l.line, l.target, file, frag))
		}
	}
	return n, problems, nil
}
