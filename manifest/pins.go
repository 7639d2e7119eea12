package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
	"github.com/tfmirror/tfmirror/v2/releases"
	"github.com/tfmirror/tfmirror/v2/retention"
)

// Bounds of a pins directory: it is the operator's, but a mistake (the
// wrong mount) should not make the mirror read a whole volume.
const (
	maxPinFiles     = 10000
	maxPinFileBytes = 4 << 20
	maxPinDepth     = 8
)

// PinsDir reads the versions pinned by the lock files and sync manifests
// in a directory (and its subdirectories): a file whose name ends in
// .lock.hcl (.terraform.lock.hcl, team-a.lock.hcl) is a Terraform
// dependency lock file, pinning its locked versions; any other .hcl file
// is a sync manifest, pinning what its selections select (the newest N
// of the cached versions for latest = N), of providers, modules and CLI
// products (cli "terraform" { versions = [...] }); other files, and names starting
// with a dot (a Kubernetes volume's ..data), are skipped. A subdirectory
// that is a symbolic link is read as the directory it names (one whose
// target is gone is an error); directories deeper than maxPinDepth are
// not read, and the pins say so (Skipped). It implements
// retention.PinSource: the files are read again only when their names,
// sizes, modification times, modes or owners change. Each is read as the
// operator's files of trust are (internal/inputfile.ReadTrusted).
type PinsDir struct {
	dir string

	mu   sync.Mutex
	sig  string // of the files last read
	read bool
}

// NewPinsDir returns the pins of dir.
func NewPinsDir(dir string) *PinsDir { return &PinsDir{dir: dir} }

// Pins reads the pins when the directory changed since the last call.
// A file that does not parse, or that is refused (one its group or all
// users may write, or another user owns, see parsePinFile), is an error naming it, and no pins
// of this reading are taken (the caller keeps those it had).
func (d *PinsDir) Pins() (*retention.Pins, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	files, sig, skipped, err := d.scan()
	if err != nil {
		return nil, false, err
	}
	if d.read && sig == d.sig {
		return nil, false, nil
	}
	pins := &retention.Pins{Providers: map[string][]retention.PinSelection{}, Modules: map[string][]retention.PinSelection{},
		CLIs: map[string][]retention.PinSelection{}, Skipped: skipped}
	for _, path := range files {
		spec := &Spec{}
		f, err := parsePinFile(path)
		if err != nil {
			return nil, false, err
		}
		if strings.HasSuffix(filepath.Base(path), ".lock.hcl") {
			locked, err := lockedProviders(f)
			if err != nil {
				return nil, false, err
			}
			for _, l := range locked {
				spec.add(l.addr, []Selection{l.selection}, nil)
			}
		} else if err := spec.loadManifestFile(path, f); err != nil {
			return nil, false, err
		}
		for _, p := range spec.Providers {
			k := p.Address.String()
			for _, sel := range p.Selections {
				pins.Providers[k] = append(pins.Providers[k], retention.PinSelection{Set: sel.Set, Latest: sel.Latest, Where: sel.Where})
			}
		}
		for _, m := range spec.Modules {
			k := m.Address.String()
			for _, sel := range m.Selections {
				pins.Modules[k] = append(pins.Modules[k], retention.PinSelection{Set: sel.Set, Call: sel.Call, Latest: sel.Latest, Where: sel.Where})
			}
		}
		for _, c := range spec.CLIs {
			k := releases.Address(releases.PublisherOf(c.Product), c.Product)
			for _, sel := range c.Selections {
				pins.CLIs[k] = append(pins.CLIs[k], retention.PinSelection{Set: sel.Set, Latest: sel.Latest, Where: sel.Where})
			}
		}
	}
	d.sig, d.read = sig, true
	return pins, true, nil
}

// scan lists the pin files, sorted, a signature of their names, sizes,
// modification times, modes and owners (a chmod or a chown that lets
// others write a file, or makes it its owner's again, is a change) and
// identities (fileIdentity: a file replaced by one of the same size and
// time is a change), and
// what it did not read (the directories deeper than maxPinDepth).
func (d *PinsDir) scan() ([]string, string, string, error) {
	// A directory named through a symbolic link is walked as the one it
	// names; one that is not there, or no directory, is an error, never a
	// directory without pins.
	root, err := filepath.EvalSymlinks(filepath.Clean(d.dir))
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(root); err == nil && !fi.IsDir() {
			err = fmt.Errorf("%s is not a directory", d.dir)
		}
	}
	if err != nil {
		return nil, "", "", fmt.Errorf("pins directory: %w", err)
	}
	w := &pinWalk{top: d.dir, h: sha256.New(), seen: map[string]bool{}}
	if err := w.walk(root, root, 0); err != nil {
		return nil, "", "", fmt.Errorf("pins directory: %w", err)
	}
	slices.Sort(w.files)
	var skipped string
	if w.deep > 0 {
		skipped = fmt.Sprintf("%d directories deeper than %d levels under %s not read, the first %s", w.deep, maxPinDepth, d.dir, w.first)
	}
	return w.files, hex.EncodeToString(w.h.Sum(nil)), skipped, nil
}

// pinWalk is one listing of a pins directory. A subdirectory that is a
// symbolic link (pins/team-a -> /repos/team-a) is walked as the one it
// names, and each directory once, however many links lead to it (a link
// back to one it is in ends there).
type pinWalk struct {
	top   string // the pins directory as given
	files []string
	h     hash.Hash
	seen  map[string]bool // the directories walked, by the path with no link
	deep  int             // the directories deeper than maxPinDepth, not walked
	first string          // the first of them
}

// walk lists the pin files of dir, at depth under the pins directory;
// real is dir with its links resolved.
func (w *pinWalk) walk(dir, real string, depth int) error {
	if w.seen[real] {
		return nil
	}
	w.seen[real] = true
	fmt.Fprintf(w.h, "%s\x00%s\x00", dir, real) // a link pointed elsewhere is a change
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name, path := e.Name(), filepath.Join(dir, e.Name())
		if strings.HasPrefix(name, ".") && name != ".terraform.lock.hcl" {
			continue
		}
		isLink := e.Type()&fs.ModeSymlink != 0
		if !isLink && !e.IsDir() && !strings.HasSuffix(name, ".hcl") {
			continue
		}
		fi, err := os.Stat(path) // follows a symbolic link (a mounted ConfigMap's files are links)
		if err != nil {
			return err // a link to a directory not mounted pins nothing it pinned
		}
		switch {
		case fi.IsDir() && depth < maxPinDepth:
			sub := filepath.Join(real, name)
			if isLink {
				if sub, err = filepath.EvalSymlinks(path); err != nil {
					return err
				}
			}
			if err := w.walk(path, sub, depth+1); err != nil {
				return err
			}
		case fi.IsDir():
			if w.deep++; w.first == "" {
				w.first = path
			}
		case !fi.Mode().IsRegular(), !strings.HasSuffix(name, ".hcl"):
		case fi.Size() > maxPinFileBytes:
			return fmt.Errorf("pins: %s is %d bytes, more than the %d allowed", path, fi.Size(), maxPinFileBytes)
		case len(w.files) == maxPinFiles:
			return fmt.Errorf("pins: more than %d files in %s", maxPinFiles, w.top)
		default:
			w.files = append(w.files, path)
			uid, _ := inputfile.Owner(fi)
			fmt.Fprintf(w.h, "%s\x00%d\x00%d\x00%o\x00%d\x00%s\x00", path, fi.Size(), fi.ModTime().UnixNano(), fi.Mode(), uid, fileIdentity(fi))
		}
	}
	return nil
}
