package safetree

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// CheckLinks checks that every link of a tree, given as name -> target
// (names as CleanName leaves them), resolves inside the tree: from where
// the link really is (through the links above it, if any), following the
// links its target goes through, as the system would. Names that are not
// in links are taken to be directories or files. It refuses, naming the
// first such link in byte order of names, a link whose target is empty or
// absolute, climbs out of the tree, goes through a chain of links that
// ends outside, or through a loop of links. It resolves them again as a
// file system that compares names without case does (macOS's, Windows's,
// where the clients unpack packages): there, a name in a target may be
// another link than it is here, and two links, or a link and a directory
// above another link, one name; a link that leads outside there, or
// links one name but for case with other targets, are refused too
// (foldName: macOS's Unicode normalization and the code points HFS+
// ignores too). The
// work is linear in the bytes of the names and targets.
func CheckLinks(links map[string]string) error {
	if err := checkLinks(links, nil, ""); err != nil {
		return err
	}
	folded := make(map[string]string, len(links))
	names := make(map[string]string, len(links)) // folded name -> a name of links
	for name, target := range links {
		n, err := CleanName(name)
		if err != nil {
			return err
		}
		f, t := foldName(n), foldName(target)
		if prev, ok := folded[f]; ok && prev != t {
			return fmt.Errorf("%w: the links %q and %q differ only in case, which macOS and Windows do not tell apart, and lead to different places", ErrUnsafe, names[f], name)
		}
		folded[f], names[f] = t, name
	}
	return checkLinks(folded, names, " where names are compared without case (macOS, Windows)")
}

// foldName is s as a file system that compares names without case
// compares it, as the strictest of them: macOS's (APFS, HFS+), which
// also compares them in one Unicode normalization and, HFS+, without
// some code points (WithoutIgnoredByHFS), and Windows's (NTFS), whose
// paths drop the dots and spaces that end a name (withoutWindowsTrailers).
func foldName(s string) string {
	return norm.NFC.String(cases.Fold().String(norm.NFC.String(WithoutIgnoredByHFS(withoutWindowsTrailers(s)))))
}

// withoutWindowsTrailers is s with the dots and spaces that end each of
// its names left out, as Windows leaves them out of a path it is given
// (d/x./l is d/x/l there); "." and ".." and a name of nothing else are
// kept.
func withoutWindowsTrailers(s string) string {
	parts := strings.Split(s, "/")
	for i, p := range parts {
		if t := strings.TrimRight(p, ". "); t != "" {
			parts[i] = t
		}
	}
	return strings.Join(parts, "/")
}

// WithoutIgnoredByHFS is s without the code points HFS+ leaves out of a
// name when it compares names (as Git lists them for core.protectHFS):
// U+200C to U+200F, U+202A to U+202E, U+206A to U+206F and U+FEFF.
func WithoutIgnoredByHFS(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 0x200c && r <= 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x206a && r <= 0x206f || r == 0xfeff {
			return -1
		}
		return r
	}, s)
}

// checkLinks is CheckLinks in one view of the names: links, shown in
// messages by names (name -> the name to show, nil: as they are), where
// says which view.
func checkLinks(links, names map[string]string, where string) error {
	show := func(name string) string {
		if n, ok := names[name]; ok {
			return n
		}
		return name
	}
	r := &resolver{root: &node{}}
	nodes := make(map[string]*node, len(links))
	for name, target := range links {
		n, err := CleanName(name)
		if err != nil {
			return err
		}
		if n == "" {
			return fmt.Errorf("%w: a link is the tree itself", ErrUnsafe)
		}
		if err := checkTarget(name, target); err != nil {
			return err
		}
		l := r.add(n)
		l.link, l.target = true, target
		nodes[name] = l
	}
	for _, name := range slices.Sorted(mapKeys(links)) {
		if _, err := r.follow(nodes[name]); err != nil {
			switch {
			case errors.Is(err, errOut):
				return fmt.Errorf("%w: the link %q points outside the tree (%q)%s", ErrUnsafe, show(name), links[name], where)
			case errors.Is(err, errLoop):
				return fmt.Errorf("%w: the link %q leads into a loop of links (%q)%s", ErrUnsafe, show(name), links[name], where)
			}
			return err
		}
	}
	return nil
}

var (
	errOut  = errors.New("outside the tree")
	errLoop = errors.New("a loop of links")
)

// node is a name of the tree that is a link or lies above one.
type node struct {
	name     string
	parent   *node
	children map[string]*node
	link     bool
	target   string

	// memos: 0 not yet, 1 under way, 2 done
	followState, dirState uint8
	followed, dir         pos
	followErr, dirErr     error
}

// pos is a place in the tree, as it really is: node n itself (no link on
// the way to it, as positions are only reached by resolving), or extra
// levels below it, where there is no link.
type pos struct {
	n     *node
	extra int
}

type resolver struct{ root *node }

// add returns the node of the cleaned name n, making those on its way.
func (r *resolver) add(n string) *node {
	cur := r.root
	for comp := range strings.SplitSeq(n, "/") {
		c := cur.children[comp]
		if c == nil {
			c = &node{name: comp, parent: cur}
			if cur.children == nil {
				cur.children = map[string]*node{}
			}
			cur.children[comp] = c
		}
		cur = c
	}
	return cur
}

// step moves p by one component of a path, following a link it meets.
func (r *resolver) step(p pos, comp string) (pos, error) {
	switch comp {
	case "", ".":
		return p, nil
	case "..":
		switch {
		case p.extra > 0:
			p.extra--
			return p, nil
		case p.n.parent == nil:
			return p, errOut
		}
		return pos{n: p.n.parent}, nil
	}
	if p.extra > 0 {
		p.extra++
		return p, nil
	}
	c := p.n.children[comp]
	switch {
	case c == nil:
		return pos{n: p.n, extra: 1}, nil
	case c.link:
		return r.follow(c)
	}
	return pos{n: c}, nil
}

// follow returns where link l leads.
func (r *resolver) follow(l *node) (pos, error) {
	switch l.followState {
	case 1:
		return pos{}, errLoop
	case 2:
		return l.followed, l.followErr
	}
	l.followState = 1
	p, err := r.realDir(l.parent)
	if err == nil {
		// A target's separators are those of its names.
		for comp := range strings.SplitSeq(strings.ReplaceAll(l.target, `\`, "/"), "/") {
			if p, err = r.step(p, comp); err != nil {
				break
			}
		}
	}
	l.followState, l.followed, l.followErr = 2, p, err
	return p, err
}

// realDir returns where the directory of node n really is: its parents
// resolved, and n followed if it is a link.
func (r *resolver) realDir(n *node) (pos, error) {
	if n.parent == nil {
		return pos{n: n}, nil
	}
	switch n.dirState {
	case 1:
		return pos{}, errLoop
	case 2:
		return n.dir, n.dirErr
	}
	n.dirState = 1
	p, err := r.realDir(n.parent)
	if err == nil {
		p, err = r.step(p, n.name)
	}
	n.dirState, n.dir, n.dirErr = 2, p, err
	return p, err
}
