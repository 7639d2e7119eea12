package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// The release build sets these with -ldflags "-X main.version=2.0.0
// -X main.commit=<full revision>" (.goreleaser.yaml). A build without
// them tells what the Go toolchain recorded instead (see buildOf).
var (
	version string
	commit  string
)

// build says which build of tfmirror is running.
type build struct {
	Version  string // "2.0.0" (a release), "v2.0.0" (go install), a pseudo-version, or "devel"
	Commit   string // the full VCS revision, when known
	Modified bool   // built from a working tree with changes not committed
}

// thisBuild is the running binary's build: what the release build set with
// -ldflags, else what runtime/debug.ReadBuildInfo recorded.
func thisBuild() build {
	info, ok := debug.ReadBuildInfo()
	return buildOf(version, commit, info, ok)
}

// buildOf is the one rule for the version tfmirror reports (`tfmirror
// version`, the status page, tfmirror_build_info, the User-Agent):
//
//   - the version and commit the release build set with -ldflags win;
//   - else the main module's version the go command recorded: the tag for
//     `go install github.com/tfmirror/tfmirror/v2/cmd/tfmirror@v2.0.0`, or
//     a pseudo-version it derived from the checkout (with +dirty when the
//     tree had changes);
//   - else "devel";
//
// and the commit, when no -ldflags named it, and the modified flag come
// from the VCS stamp (vcs.revision, vcs.modified) a go build in a
// checkout records.
func buildOf(ldVersion, ldCommit string, info *debug.BuildInfo, ok bool) build {
	b := build{Version: ldVersion, Commit: ldCommit}
	if ok && info != nil {
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		vcsRevision := ""
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				vcsRevision = s.Value
			case "vcs.modified":
				// A release build names its commit; the stamp is of the
				// same tree, so its modified flag holds for it too.
				b.Modified = s.Value == "true"
			}
		}
		if b.Commit == "" {
			b.Commit = vcsRevision
		} else if vcsRevision != "" && vcsRevision != b.Commit {
			b.Modified = false // the stamp is of another tree than the one named
		}
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	return b
}

// String is the version with the commit's first 12 digits, as the status
// page and the logs show it: "2.0.0 (0123456789ab)", "devel (0123456789ab,
// modified)", "v2.0.0".
func (b build) String() string {
	if b.Commit == "" {
		return b.Version
	}
	c := b.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	if b.Modified {
		c += ", modified"
	}
	return b.Version + " (" + c + ")"
}

// Line is what `tfmirror version` prints.
func (b build) Line() string {
	s := "tfmirror " + b.Version
	if b.Commit != "" {
		s += " commit " + b.Commit
		if b.Modified {
			s += " (modified)"
		}
	}
	return fmt.Sprintf("%s %s %s/%s", s, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
