package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
// with a dot (a Kubernetes volume's ..data), are skipped. It implements
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
	files, sig, err := d.scan()
	if err != nil {
		return nil, false, err
	}
	if d.read && sig == d.sig {
		return nil, false, nil
	}
	pins := &retention.Pins{Providers: map[string][]retention.PinSelection{}, Modules: map[string][]retention.PinSelection{},
		CLIs: map[string][]retention.PinSelection{}}
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
				pins.Modules[k] = append(pins.Modules[k], retention.PinSelection{Set: sel.Set, Latest: sel.Latest, Where: sel.Where})
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

// scan lists the pin files, sorted, and a signature of their names,
// sizes, modification times, modes and owners (a chmod or a chown that
// lets others write a file, or makes it its owner's again, is a change).
func (d *PinsDir) scan() ([]string, string, error) {
	var files []string
	h := sha256.New()
	// A directory named through a symbolic link is walked as the one it
	// names (WalkDir follows no link, not even its root's); one that is
	// not there, or no directory, is an error, never a directory without
	// pins.
	root, err := filepath.EvalSymlinks(filepath.Clean(d.dir))
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(root); err == nil && !fi.IsDir() {
			err = fmt.Errorf("%s is not a directory", d.dir)
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("pins directory: %w", err)
	}
	err = filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if path != root && strings.HasPrefix(name, ".") && name != ".terraform.lock.hcl" {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if e.IsDir() {
			if rel, _ := filepath.Rel(root, path); strings.Count(rel, string(filepath.Separator)) >= maxPinDepth {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".hcl") {
			return nil
		}
		fi, err := os.Stat(path) // follows a symbolic link (a mounted ConfigMap's files are links)
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		if fi.Size() > maxPinFileBytes {
			return fmt.Errorf("pins: %s is %d bytes, more than the %d allowed", path, fi.Size(), maxPinFileBytes)
		}
		if len(files) == maxPinFiles {
			return fmt.Errorf("pins: more than %d files in %s", maxPinFiles, d.dir)
		}
		files = append(files, path)
		uid, _ := inputfile.Owner(fi)
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00%o\x00%d\x00", path, fi.Size(), fi.ModTime().UnixNano(), fi.Mode(), uid)
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("pins directory: %w", err)
	}
	slices.Sort(files)
	return files, hex.EncodeToString(h.Sum(nil)), nil
}
