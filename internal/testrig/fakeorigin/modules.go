package fakeorigin

// The module side of the fake origin: the module registry protocol
// (modules.v1), Git repositories over smart HTTP and a tarball host, all
// on Addr.
//
//	GET /v1/modules/NS/NAME/SYSTEM/versions            {"modules":[{"source":...,"versions":[{"version":...}]}]}
//	GET /v1/modules/NS/NAME/SYSTEM/VERSION/download    204, X-Terraform-Get: the location given to AddModule;
//	                                                   200, {"location":...,"use_registry_credentials":...} for AddDirectModule
//	GET /git/REPO.git/...                              git http-backend (smart HTTP, fetch only)
//	GET /tarballs/FILE                                 bytes given to AddTarball (401 without the token of RequireTarballToken)
//
// Git repositories are made by AddGitRepo with the git command, which
// must be installed, and served by running `git http-backend` as a CGI
// program.

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Module endpoint kinds, for Hits. They are not in Kinds, which lists the
// provider endpoints.
const (
	ModuleVersions Kind = "module_versions" // module versions list
	ModuleDownload Kind = "module_download" // module download location
	Git            Kind = "git"             // any request of the Git smart HTTP protocol
	Tarball        Kind = "tarball"         // a file of the tarball host
)

type mkey struct{ ns, name, system string }

// moduleKey is how a module is looked up: in lowercase with
// Options.ModulesAnyCase, else as spelled.
func (o *Origin) moduleKey(ns, name, system string) mkey {
	if o.opts.ModulesAnyCase {
		return mkey{strings.ToLower(ns), strings.ToLower(name), strings.ToLower(system)}
	}
	return mkey{ns, name, system}
}

// moduleState is the module side's registry, repositories and tarballs.
type moduleState struct {
	mu       sync.Mutex
	modules  map[mkey][]moduleVersion
	tarballs map[string][]byte
	gitOnce  sync.Once
	gitRoot  string // bare repositories, served
	gitWork  string // their work trees
	gitErr   error
	// gitAuth are the repositories that need basic authentication (repo
	// -> "user:password"); gitAuthSeen every Authorization header a Git
	// request carried (gitauth.go).
	gitAuth     map[string]string
	gitAuthSeen []string
	// tarballAuth are the tarballs that need a bearer token (file ->
	// token); tarballAuthSeen every Authorization header a tarball
	// request carried.
	tarballAuth     map[string]string
	tarballAuthSeen []string
}

// moduleVersion is a registered version; direct, when not nil, makes its
// download answer OpenTofu's direct form with use_registry_credentials
// *direct.
type moduleVersion struct {
	version, location string
	direct            *bool
}

func (o *Origin) modState() *moduleState {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mods == nil {
		o.mods = &moduleState{modules: map[mkey][]moduleVersion{}, tarballs: map[string][]byte{}}
	}
	return o.mods
}

// AddModule registers version of the registry module NS/NAME/SYSTEM, whose
// download answer names location (go-getter syntax, as X-Terraform-Get).
// Registering a known version again replaces its location.
func (o *Origin) AddModule(ns, name, system, version, location string) {
	o.addModule(ns, name, system, moduleVersion{version: version, location: location})
}

// AddDirectModule is AddModule with the download answer in OpenTofu's
// direct form: 200 with the JSON body {"location": location,
// "use_registry_credentials": useRegistryCredentials}, location being
// the package's URL.
func (o *Origin) AddDirectModule(ns, name, system, version, location string, useRegistryCredentials bool) {
	o.addModule(ns, name, system, moduleVersion{version: version, location: location, direct: &useRegistryCredentials})
}

func (o *Origin) addModule(ns, name, system string, mv moduleVersion) {
	m := o.modState()
	m.mu.Lock()
	defer m.mu.Unlock()
	k := o.moduleKey(ns, name, system)
	for i, v := range m.modules[k] {
		if v.version == mv.version {
			m.modules[k][i] = mv
			return
		}
	}
	m.modules[k] = append(m.modules[k], mv)
}

// RemoveModule takes version of the registry module NS/NAME/SYSTEM out
// of its version list, as an origin answering a short list would;
// AddModule adds it again.
func (o *Origin) RemoveModule(ns, name, system, version string) {
	m := o.modState()
	m.mu.Lock()
	defer m.mu.Unlock()
	k := o.moduleKey(ns, name, system)
	m.modules[k] = slices.DeleteFunc(m.modules[k], func(v moduleVersion) bool { return v.version == version })
}

// AddTarball serves data at TarballURL(file).
func (o *Origin) AddTarball(file string, data []byte) {
	m := o.modState()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tarballs[file] = bytes.Clone(data)
}

// RemoveTarball stops serving TarballURL(file): it answers 404, as a
// location that no longer serves does (a pre-signed URL expired).
func (o *Origin) RemoveTarball(file string) {
	m := o.modState()
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.tarballs, file)
}

// RequireTarballToken makes TarballURL(file) private: its requests are
// answered 401 unless they carry "Authorization: Bearer token".
func (o *Origin) RequireTarballToken(file, token string) {
	m := o.modState()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tarballAuth == nil {
		m.tarballAuth = map[string]string{}
	}
	m.tarballAuth[file] = token
}

// TarballAuthSeen returns every Authorization header value that tarball
// requests carried, to any file, in order.
func (o *Origin) TarballAuthSeen() []string {
	m := o.modState()
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.tarballAuthSeen)
}

// TarballURL is the https URL of a file of the tarball host.
func (o *Origin) TarballURL(file string) string { return o.URL + "/tarballs/" + file }

// GitURL is the https URL of the Git repository repo made by AddGitRepo.
func (o *Origin) GitURL(repo string) string { return o.URL + "/git/" + repo + ".git" }

// AddGitRepo commits files (path -> content; a path ending in "/" is a
// directory, content ignored) as the whole tree of Git repository repo,
// creating it on first use, and tags the commit with tags (moving a tag
// that exists). Commits have fixed authors and dates. It returns the
// commit id. It needs the git command.
func (o *Origin) AddGitRepo(repo string, files map[string][]byte, tags ...string) (string, error) {
	m, err := o.gitState()
	if err != nil {
		return "", err
	}
	m.mu.Lock() // one repository change at a time
	defer m.mu.Unlock()
	work, bare := filepath.Join(m.gitWork, repo), filepath.Join(m.gitRoot, repo+".git")
	if _, err := os.Stat(bare); err == nil {
		if _, err := os.Stat(work); errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("fakeorigin: repository %s was made by AddGitTree", repo)
		}
	}
	if _, err := os.Stat(bare); errors.Is(err, os.ErrNotExist) {
		if err := runGit("", "init", "-q", "--bare", bare); err != nil {
			return "", err
		}
		// Clients may fetch a commit that no branch or tag names, and
		// partial fetches (the mirror's of a history of commits alone),
		// as the hosted forges allow.
		for _, kv := range [][2]string{{"uploadpack.allowAnySHA1InWant", "true"}, {"uploadpack.allowFilter", "true"}} {
			if err := runGit(bare, "config", kv[0], kv[1]); err != nil {
				return "", err
			}
		}
		if err := runGit("", "init", "-q", "-b", "main", work); err != nil {
			return "", err
		}
	}
	entries, err := os.ReadDir(work)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Name() != ".git" {
			if err := os.RemoveAll(filepath.Join(work, e.Name())); err != nil {
				return "", err
			}
		}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range files {
			if !yield(k) {
				return
			}
		}
	}) {
		p := filepath.Join(work, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return "", err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return "", err
		}
	}
	if err := runGit(work, "add", "-A"); err != nil {
		return "", err
	}
	if err := runGit(work, "commit", "-q", "--allow-empty", "-m", "fakeorigin commit"); err != nil {
		return "", err
	}
	for _, tag := range tags {
		if err := runGit(work, "tag", "-f", tag); err != nil {
			return "", err
		}
	}
	if err := runGit(work, "push", "-q", "-f", "--tags", bare, "main"); err != nil {
		return "", err
	}
	out, err := exec.Command("git", "-C", work, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", fmt.Errorf("fakeorigin: git rev-parse: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// gitState returns the module state with its Git directories made.
func (o *Origin) gitState() (*moduleState, error) {
	m := o.modState()
	m.gitOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fakeorigin-git-*")
		if err != nil {
			m.gitErr = err
			return
		}
		m.gitRoot, m.gitWork = filepath.Join(dir, "repos"), filepath.Join(dir, "work")
		m.gitErr = errors.Join(os.Mkdir(m.gitRoot, 0o755), os.Mkdir(m.gitWork, 0o755))
		go func() { <-o.closed; os.RemoveAll(dir) }()
	})
	if m.gitErr != nil {
		return nil, m.gitErr
	}
	return m, nil
}

// gitEnv makes commits reproducible and independent of the user's
// configuration.
var gitEnv = []string{
	"GIT_AUTHOR_NAME=fakeorigin", "GIT_AUTHOR_EMAIL=git@fakeorigin.invalid", "GIT_AUTHOR_DATE=2024-01-01T00:00:00Z",
	"GIT_COMMITTER_NAME=fakeorigin", "GIT_COMMITTER_EMAIL=git@fakeorigin.invalid", "GIT_COMMITTER_DATE=2024-01-01T00:00:00Z",
	"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
}

func runGit(dir string, args ...string) error {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), gitEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("fakeorigin: git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// TarGz returns a gzipped tar of files (path -> content; a path ending in
// "/" is a directory), in sorted order with fixed times.
func TarGz(files map[string][]byte) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range slices.Sorted(mapKeys(files)) {
		h := &tar.Header{Name: name, Mode: 0o644, ModTime: fixedTime(), Typeflag: tar.TypeReg, Size: int64(len(files[name]))}
		if strings.HasSuffix(name, "/") {
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			panic(err) // writing to memory cannot fail
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(files[name]) //nolint:errcheck // memory
		}
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// Zip returns a zip of files (path -> content), in sorted order with fixed
// times.
func Zip(files map[string][]byte) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range slices.Sorted(mapKeys(files)) {
		f, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: fixedTime()})
		if err != nil {
			panic(err)
		}
		f.Write(files[name]) //nolint:errcheck // memory
	}
	zw.Close()
	return buf.Bytes()
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// moduleRoutes adds the module side's routes to m.
func (o *Origin) moduleRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /v1/modules/{ns}/{name}/{system}/versions", o.serveModuleVersions)
	m.HandleFunc("GET /v1/modules/{ns}/{name}/{system}/{version}/download", o.serveModuleDownload)
	m.HandleFunc("/git/", o.serveGit)
	m.HandleFunc("GET /tarballs/{file}", o.serveTarball)
}

func (o *Origin) serveModuleVersions(w http.ResponseWriter, r *http.Request) {
	if !o.begin(w, r, ModuleVersions, nil) {
		return
	}
	m := o.modState()
	k := o.moduleKey(r.PathValue("ns"), r.PathValue("name"), r.PathValue("system"))
	m.mu.Lock()
	vs := slices.Clone(m.modules[k])
	m.mu.Unlock()
	if vs == nil {
		writeError(w, http.StatusNotFound)
		return
	}
	type version struct {
		Version string `json:"version"`
	}
	list := make([]version, 0, len(vs))
	for _, v := range vs {
		list = append(list, version{v.version})
	}
	writeJSON(w, http.StatusOK, map[string]any{"modules": []any{map[string]any{
		"source": k.ns + "/" + k.name + "/" + k.system, "versions": list,
	}}})
}

func (o *Origin) serveModuleDownload(w http.ResponseWriter, r *http.Request) {
	if !o.begin(w, r, ModuleDownload, nil) {
		return
	}
	m := o.modState()
	k := o.moduleKey(r.PathValue("ns"), r.PathValue("name"), r.PathValue("system"))
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range m.modules[k] {
		if v.version == r.PathValue("version") {
			if v.direct != nil {
				writeJSON(w, http.StatusOK, map[string]any{"location": v.location, "use_registry_credentials": *v.direct})
				return
			}
			w.Header().Set("X-Terraform-Get", v.location)
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	writeError(w, http.StatusNotFound)
}

func (o *Origin) serveGit(w http.ResponseWriter, r *http.Request) {
	if !o.begin(w, r, Git, nil) {
		return
	}
	m := o.modState()
	m.mu.Lock()
	root := m.gitRoot
	m.mu.Unlock()
	if !m.gitAuthorized(w, r) {
		return
	}
	if root == "" || r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
		writeError(w, http.StatusNotFound)
		return
	}
	git, err := exec.LookPath("git")
	if err != nil {
		writeError(w, http.StatusInternalServerError)
		return
	}
	h := &cgi.Handler{
		Path: git,
		Args: []string{"http-backend"},
		Root: "/git",
		Env:  append([]string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}, gitEnv...),
	}
	h.ServeHTTP(w, r)
}

func (o *Origin) serveTarball(w http.ResponseWriter, r *http.Request) {
	if !o.begin(w, r, Tarball, nil) {
		return
	}
	m := o.modState()
	m.mu.Lock()
	m.tarballAuthSeen = append(m.tarballAuthSeen, r.Header.Values("Authorization")...)
	data, ok := m.tarballs[r.PathValue("file")]
	token, private := m.tarballAuth[r.PathValue("file")]
	m.mu.Unlock()
	if private && r.Header.Get("Authorization") != "Bearer "+token {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tarballs"`)
		writeError(w, http.StatusUnauthorized)
		return
	}
	if !ok {
		writeError(w, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data) //nolint:errcheck // client may be gone
}
