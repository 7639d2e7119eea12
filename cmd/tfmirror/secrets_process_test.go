package main

// Every secret the operator hands the mirror, and every one a client or
// an origin sends it, stays out of what anyone else can read: the log,
// the answers, the status page, /metrics, /readyz, the commands' output.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"github.com/tfmirror/tfmirror/v2/cmd/tfmirror/internal/settings"
	"github.com/tfmirror/tfmirror/v2/discovery/registryjson"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/internal/testrig/s3test"
)

// TestSecretsNeverShownProcess runs tfmirror serve with every kind of
// secret set to a value of its own: client tokens, the URL-signing key,
// origin tokens (a credentials file, a TF_TOKEN_ variable), module source
// credentials (a token file and an inline password), the upstream proxy's
// password, the shared store's S3 secret key and its two authentication
// keys (when versitygw is at hand), and the export key it makes. It
// drives the mirror through its doors: requests that work (an archive
// through its signed URL, a module package from a pre-signed location,
// the OCI door's token), requests with a wrong token (Bearer, Basic, a
// forged signature), an origin down, an origin whose errors echo the
// request (its Authorization header, its URL), a download redirected to
// a pre-signed URL that answers 403 echoing it, Git source hosts whose
// refusals (401, 403, 404) echo the request and its credential, a
// registry's package URL of OpenTofu's direct download answer that
// refuses the registry's token and echoes it, an export through the
// admin socket, reloads of files that do not parse
// (each with a secret where it fails) and of one that does (a new proxy
// password), and config check of each file. It then looks for every
// secret in the whole log at debug level, every answer (bodies and
// headers), the status page with and without a token, /metrics, /readyz,
// /healthz, the export and the commands' output.
func TestSecretsNeverShownProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	// secrets are shown nowhere; issued (URL signatures, the OCI
	// door's tokens) only in the answers that hand them to a client
	// holding a token.
	var secrets, issued []string
	secret := func(name string) string {
		b := make([]byte, 12)
		rand.Read(b)
		s := "M" + name + hex.EncodeToString(b)
		secrets = append(secrets, s)
		return s
	}
	dir := t.TempDir()
	file := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	clientToken := secret("clienttoken")
	originToken := secret("origintoken")
	echoToken := secret("echotoken")
	modToken := secret("modsourcetoken")
	modPass := secret("modsourcepass")
	proxyPass := secret("proxypass")
	proxyPass2 := secret("proxypassnext")
	presignA := secret("presignmodule")
	presignB := secret("presigndownload")
	presignC := secret("presignredirect")

	// A Basic credential is shown as its header carries it too.
	secrets = append(secrets, base64.StdEncoding.EncodeToString([]byte("bot:"+modPass)),
		base64.StdEncoding.EncodeToString([]byte("mirror:"+proxyPass)), base64.StdEncoding.EncodeToString([]byte("mirror:"+proxyPass2)))

	origin := newOrigin(t, fakeorigin.Options{RequireToken: originToken})
	origin.AddProvider("hashicorp", "random", []string{"1.0.0"}, []string{"linux_amd64"})
	origin.AddTarball("mod-1.0.0.tar.gz", fakeorigin.TarGz(map[string][]byte{
		"main.tf": []byte("output \"x\" {\n  value = 1\n}\n"),
	}))
	origin.AddModule("acme", "mod", "aws", "1.0.0", origin.TarballURL("mod-1.0.0.tar.gz")+
		"?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature="+presignA)
	echo := startEchoOrigin(t, origin, presignB, presignC)
	echoHost := echo.Listener.Addr().String()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downHost := closed.Addr().String()
	closed.Close()
	authProxy := startAuthProxy(t, "mirror", proxyPass, proxyPass2)

	tokens := file("tokens", "# clients\n"+clientToken+"\n")
	signingKey := file("url-signing.key", secret("urlsigningkey")+"\n")
	creds := file("credentials.tfrc", fmt.Sprintf("credentials %q {\n  token = %q\n}\ncredentials %q {\n  token = %q\n}\ncredentials %q {\n  token = %q\n}\n",
		origin.Addr, originToken, echoHost, echoToken, downHost, secret("downtoken")))
	modCreds := file("module-sources.hcl", fmt.Sprintf("source_host %q {\n  origins = [%q]\n  token_file = %q\n}\nsource_host %q {\n  origins = [%q]\n  username = \"bot\"\n  password = %q\n}\n",
		origin.Addr, origin.Addr, file("module-token", modToken+"\n"), echoHost, echoHost, modPass))
	echoCA := file("echo-ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: echo.Certificate().Raw})))
	dataDir := filepath.Join(dir, "data")
	env := append(os.Environ(), "SSL_CERT_FILE="+originCAFile(t, origin), "TFMIRROR_DATA_DIR="+dataDir,
		"TF_TOKEN_registry_example_test="+secret("tftokenenv"))

	var shared, sharedKey string
	t.Run("versitygw", func(t *testing.T) {
		s3test.Binary(t) // skips this part where versitygw is not at hand
		shared = "found"
	})
	if shared != "" {
		srv := s3test.Start(t)
		srv.CreateBucket(sharedBucket)
		env = append(env, srv.Env()...)
		secrets = append(secrets, s3test.SecretKey)
		sharedKey = file("shared.key", secret("sharedkey"))
		shared = fmt.Sprintf("shared_store = %q\nshared_store_key_file = %q\nshared_store_previous_key_file = %q\n",
			srv.URL(sharedBucket, "mirror"), sharedKey, file("shared-prev.key", secret("sharedprevkey")))
	}
	config := func(proxyPassword string) string {
		return fmt.Sprintf(`log_level = "debug"
allowed_origins = [%q, %q, %q]
allow_private_origins = true
origin_retries = 0
auth_tokens_file = %q
url_signing_key_file = %q
credentials_file = %q
module_source_credentials = %q
origin_ca_file = [%q]
upstream_proxy = %q
%s`, origin.Addr, echoHost, downHost, tokens, signingKey, creds, modCreds, echoCA,
			"http://mirror:"+proxyPassword+"@"+authProxy.addr, shared)
	}
	cfgPath := file("tfmirror.hcl", config(proxyPass))

	// outputs are the commands' outputs, answers every answer (status,
	// headers, body), both for the search at the end.
	var outputs, answers, issuing strings.Builder
	sink := &answers
	run := func(args ...string) int {
		t.Helper()
		stdout, stderr, code := runProcessEnv(t, bin, dir, env, args...)
		// The command line (a secret the test gave) is not the output.
		fmt.Fprintf(&outputs, "tfmirror %s: exit %d\n%s\n%s\n", args[0], code, stdout, stderr)
		return code
	}
	if code := run("config", "check", cfgPath); code != 0 {
		t.Fatalf("config check of the file served: exit %d", code)
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--log-format", "json", "--config", cfgPath)
	cmd.Env = env
	m := startCmd(t, cmd, dataDir)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	get := func(path string, set func(*http.Request)) (int, []byte) {
		t.Helper()
		u := path
		if !strings.HasPrefix(u, "https://") {
			u = m.url + strings.TrimPrefix(path, "/")
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if set != nil {
			set(req)
		}
		resp, err := m.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		// The request's query (a signature the test sent) is not the answer's.
		fmt.Fprintf(sink, "GET %s: %d %v\n%s\n", req.URL.Path, resp.StatusCode, resp.Header, body)
		return resp.StatusCode, body
	}
	bearer := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}
	basic := func(pass string) func(*http.Request) {
		return func(r *http.Request) { r.SetBasicAuth("terraform", pass) }
	}
	want := func(path string, set func(*http.Request), code int) []byte {
		t.Helper()
		got, body := get(path, set)
		sink = &answers
		if got != code {
			t.Errorf("GET %s: %d, want %d: %s", path, got, code, body)
		}
		return body
	}

	// Credentials refused: none, a wrong Bearer token, a wrong Basic
	// password, on the protocols and the OCI door's token endpoint.
	provider := origin.Addr + "/hashicorp/random/"
	want(provider+"index.json", nil, http.StatusUnauthorized)
	want(provider+"index.json", bearer(secret("wrongbearer")), http.StatusUnauthorized)
	want(provider+"index.json", basic(secret("wrongbasic")), http.StatusUnauthorized)
	want("v2/token?service=tfmirror", basic(secret("wrongocibasic")), http.StatusUnauthorized)
	want("releases/terraform/index.json", basic(secret("wrongreleasesbasic")), http.StatusUnauthorized)
	// What works: the token as Bearer and as Basic password, an archive
	// through its signed URL, the OCI door's token for the client token.
	want("v2/", basic(clientToken), http.StatusOK)
	var doc struct {
		Archives map[string]struct{ URL string } `json:"archives"`
	}
	sink = &issuing
	if err := json.Unmarshal(want(provider+"1.0.0.json", bearer(clientToken), http.StatusOK), &doc); err != nil {
		t.Fatal(err)
	}
	signed, err := url.Parse(doc.Archives["linux_amd64"].URL)
	if err != nil || signed.Query().Get("sig") == "" {
		t.Fatalf("the archive URL %q is not signed (%v)", doc.Archives["linux_amd64"].URL, err)
	}
	issued = append(issued, signed.Query().Get("sig"))
	archiveURL := m.url + strings.TrimPrefix((&url.URL{Path: "/" + provider}).ResolveReference(signed).String(), "/")
	if body := want(archiveURL, nil, http.StatusOK); !slices.Equal(body, origin.Archive("hashicorp", "random", "1.0.0", "linux_amd64")) {
		t.Error("the archive through its signed URL is not the origin's")
	}
	forged := signed.Query()
	forged.Set("sig", secret("forgedsig"))
	want(strings.Split(archiveURL, "?")[0]+"?"+forged.Encode(), nil, http.StatusForbidden)
	sink = &issuing
	var tok struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(want("v2/token?service=tfmirror", basic(clientToken), http.StatusOK), &tok); err != nil || tok.Token == "" {
		t.Fatalf("the OCI door's token endpoint issued no token (%v)", err)
	}
	issued = append(issued, tok.Token)
	want("v2/", bearer(tok.Token), http.StatusOK)
	// A module package from a pre-signed location, fetched with the
	// source host's token.
	modBase := "registry/" + origin.Addr + "/v1/modules/acme/mod/aws/"
	var loc struct{ Location string }
	sink = &issuing
	if err := json.Unmarshal(want(modBase+"1.0.0/download", bearer(clientToken), http.StatusOK), &loc); err != nil {
		t.Fatal(err)
	}
	pkg, err := url.Parse(loc.Location)
	if err != nil || pkg.Query().Get("sig") == "" {
		t.Fatalf("the module package's URL %q is not signed (%v)", loc.Location, err)
	}
	issued = append(issued, pkg.Query().Get("sig"))
	want(m.url+strings.TrimPrefix((&url.URL{Path: "/" + modBase + "1.0.0/download"}).ResolveReference(pkg).String(), "/"), nil, http.StatusOK)
	// Failures: an origin whose errors echo the request, a download
	// redirected to a pre-signed URL that refuses it and echoes it, a
	// module location likewise, an origin down.
	get(echoHost+"/acme/echo/index.json", bearer(clientToken))
	get("registry/"+echoHost+"/v1/providers/acme/echo/versions", bearer(clientToken))
	get("registry/"+echoHost+"/v1/modules/acme/echo/aws/versions", bearer(clientToken))
	get(echoHost+"/acme/presigned/1.0.0.json", bearer(clientToken))
	get("registry/"+echoHost+"/v1/providers/acme/presigned/1.0.0/download/linux/amd64", bearer(clientToken))
	sink = &issuing
	if err := json.Unmarshal(want("registry/"+echoHost+"/v1/modules/acme/presigned/aws/1.0.0/download", bearer(clientToken), http.StatusOK), &loc); err != nil {
		t.Fatal(err)
	}
	if pkg, err = url.Parse(loc.Location); err != nil {
		t.Fatal(err)
	}
	issued = append(issued, pkg.Query().Get("sig"))
	get(strings.TrimPrefix((&url.URL{Path: "/registry/" + echoHost + "/v1/modules/acme/presigned/aws/1.0.0/download"}).ResolveReference(pkg).String(), "/"), nil)
	get(downHost+"/acme/down/index.json", bearer(clientToken))
	for _, name := range []string{"gitauth", "gitdenied", "gitmissing", "gitbroken", "direct"} {
		sink = &issuing
		base := "/registry/" + echoHost + "/v1/modules/acme/" + name + "/aws/1.0.0/download"
		if err := json.Unmarshal(want(base, bearer(clientToken), http.StatusOK), &loc); err != nil {
			t.Fatal(err)
		}
		if pkg, err = url.Parse(loc.Location); err != nil {
			t.Fatal(err)
		}
		issued = append(issued, pkg.Query().Get("sig"))
		get(strings.TrimPrefix((&url.URL{Path: base}).ResolveReference(pkg).String(), "/"), nil)
	}
	// The credentials were in play: sent, and echoed.
	if echo.hits() == 0 || !echo.sent("Bearer "+echoToken) || !echo.sent("Basic "+base64.StdEncoding.EncodeToString([]byte("bot:"+modPass))) {
		t.Error("the echoing origin was not sent its token, or the source host's password")
	}
	echo.mu.Lock()
	if !slices.Contains(echo.packageAuth, "Bearer "+echoToken) {
		t.Errorf("the package URL of the direct download answer was sent %q, not the registry's token", echo.packageAuth)
	}
	echo.mu.Unlock()
	if got := origin.LastAuthHeaders(fakeorigin.Versions); !slices.Contains(got, "Bearer "+originToken) {
		t.Errorf("the origin was sent %q, not its token", got)
	}

	// An export through the admin socket, signed with the export key.
	out := filepath.Join(dir, "export")
	if code := run("export", out); code != 0 {
		t.Errorf("tfmirror export: exit %d", code)
	}

	// Reloads (and config check) of files that do not parse, each with a
	// secret where the error is; then one that works and changes the
	// proxy's password.
	bads := []struct{ path, content string }{
		{cfgPath, config(secret("badproxyport")) + "upstream_proxy = \"http://mirror:" + secret("dupproxy") + "@127.0.0.1:x\"\n"},
		{cfgPath, strings.Replace(config(proxyPass), "@"+authProxy.addr, "@"+authProxy.addr+":"+secret("proxyhostport"), 1)},
		{tokens, clientToken + "\n" + secret("short")[:12] + "\n"},
		{creds, fmt.Sprintf("credentials %q {\n  token = %q\n", origin.Addr, secret("unclosedcred"))},
		{modCreds, fmt.Sprintf("source_host %q {\n  origins = [%q]\n  tokn = %q\n}\n", origin.Addr, origin.Addr, secret("modunknown"))},
		{modCreds, fmt.Sprintf("source_host %q {\n  origins = [%q]\n  token = %q\n  token_env = \"X\"\n}\n", origin.Addr, origin.Addr, secret("modtwo"))},
		{modCreds, fmt.Sprintf("source_host %q {\n  origins = [%q]\n  username = \"bot\"\n  password = %s\n}\n", origin.Addr, origin.Addr, secret("modunquoted"))},
		{modCreds, fmt.Sprintf("source_host %q {\n  origins = [%q]\n  token = [%q]\n}\n", origin.Addr, origin.Addr, secret("modlist"))},
		{creds, fmt.Sprintf("credentials %q {\n  token = %s\n}\n", origin.Addr, secret("credunquoted"))},
		{creds, fmt.Sprintf("credentials %q {\n  token = [%q]\n}\n", origin.Addr, secret("credlist"))},
		{cfgPath, strings.Replace(config(proxyPass), creds, file("credentials.tfrc.json",
			fmt.Sprintf(`{"credentials": {%q: {"token": %s}}}`, origin.Addr, secret("credjsonbare"))), 1)},
		{cfgPath, strings.Replace(config(proxyPass), creds, file("credentials-list.tfrc.json",
			fmt.Sprintf(`{"credentials": {%q: {"token": [%q]}}}`, origin.Addr, secret("credjsonlist"))), 1)},
		{cfgPath, strings.Replace(config(proxyPass), `upstream_proxy = "`, `upstream_proxy = "%zz`, 1)},
		{cfgPath, strings.Replace(config(proxyPass), "@"+authProxy.addr, "@"+authProxy.addr+"/%zz", 1)},
		{cfgPath, strings.Replace(config(proxyPass), `upstream_proxy = "http://`, `upstream_proxy = "socks4://`, 1)},
		{cfgPath, strings.Replace(config(proxyPass), `upstream_proxy = "http://`, `upstream_proxy = "http:// `, 1)},
		{cfgPath, strings.Replace(config(proxyPass), `upstream_proxy = "http://mirror:`+proxyPass+`@`+authProxy.addr+`"`, `upstream_proxy = http://mirror:`+proxyPass+`@`+authProxy.addr, 1)},
		{cfgPath, strings.Replace(config(proxyPass), `upstream_proxy = "http://mirror:`+proxyPass+`@`+authProxy.addr+`"`, `upstream_proxy = ["http://mirror:`+proxyPass+`@`+authProxy.addr+`"]`, 1)},
		{cfgPath, config(proxyPass) + `releases_hashicorp_url = "https://user:` + secret("releasespass") + `@releases.example.test/%zz"` + "\n"},
		{signingKey, secret("shortkey")[:20] + "\n"},
		{cfgPath, config(proxyPass) + fmt.Sprintf("export_key = %q\n", file("export-key.asc", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n"+secret("exportkeybody")+"\n-----END PGP PRIVATE KEY BLOCK-----\n"))},
	}
	if sharedKey != "" {
		bads = append(bads, struct{ path, content string }{sharedKey, secret("shortshared")[:20]})
	}
	for _, bad := range bads {
		before, _ := os.ReadFile(bad.path)
		if err := os.WriteFile(bad.path, []byte(bad.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if code := run("config", "check", cfgPath); code == 0 {
			t.Errorf("config check took %s:\n%s", bad.path, bad.content)
		}
		if code := run("reload"); code == 0 {
			t.Errorf("a reload took %s:\n%s", bad.path, bad.content)
		}
		if err := os.WriteFile(bad.path, before, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// serve refusing what it is given at start.
	if code := run("serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "other"), "--allowed-origins", origin.Addr,
		"--upstream-proxy", "http://mirror:"+secret("startproxy")+"@127.0.0.1:1/%zz"); code == 0 {
		t.Error("serve started with an upstream proxy URL that does not parse")
	}
	if err := os.WriteFile(cfgPath, []byte(config(proxyPass2)), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := run("reload"); code != 0 {
		t.Errorf("the reload of a new proxy password: exit %d", code)
	}
	if code := run("config", "check", cfgPath); code != 0 {
		t.Errorf("config check after the reload: exit %d", code)
	}
	get(provider+"index.json", bearer(clientToken))

	// What anyone, and a client with a token, may read.
	for _, path := range []string{"", "?format=json", "metrics", "readyz", "healthz"} {
		get(path, nil)
		get(path, bearer(clientToken))
	}

	// The export key serve made: the lines of its armor that its public
	// key's armor lacks are secret.
	if key, err := os.ReadFile(filepath.Join(dataDir, settings.ExportKeyName)); err == nil {
		secrets = append(secrets, secretArmorLines(t, key)...)
	} else {
		t.Errorf("no export key: %v", err)
	}

	m.mu.Lock()
	var logText strings.Builder
	for _, l := range m.lines {
		b, _ := json.Marshal(l)
		logText.Write(b)
		logText.WriteByte('\n')
	}
	m.mu.Unlock()
	seen := map[string]string{
		"log (debug)":      logText.String(),
		"answers":          answers.String(),
		"commands' output": outputs.String(),
		"export":           readTree(t, out),
	}
	for name, text := range seen {
		for _, s := range append(slices.Clone(secrets), issued...) {
			if i := strings.Index(text, s); i >= 0 {
				t.Errorf("%s shows %q: ...%s...", name, s, text[max(0, i-300):min(len(text), i+len(s)+100)])
			}
		}
	}
	for _, s := range secrets {
		if i := strings.Index(issuing.String(), s); i >= 0 {
			t.Errorf("an answer to a client with a token shows %q: ...%s...", s, issuing.String()[max(0, i-300):min(issuing.Len(), i+len(s)+100)])
		}
	}
	// The places looked at hold what the test meant them to.
	for name, want := range map[string]string{
		"log (debug)":      `"msg":"module package cached"`,
		"answers":          "tfmirror_",
		"commands' output": "upstream_proxy",
	} {
		if shared != "" && name == "log (debug)" && !strings.Contains(seen[name], `"msg":"shared store objects authenticated"`) {
			t.Error("the shared store is not in use")
		}
		if !strings.Contains(seen[name], want) {
			t.Errorf("%s lacks %q", name, want)
		}
	}
	if authProxy.connects() == 0 {
		t.Error("no request went through the upstream proxy")
	}
}

// echoOrigin is an origin registry whose errors echo the request (its
// URL, its headers), as some do, and whose downloads go through a
// redirect to a pre-signed URL that refuses them, echoing it, as an
// object store does.
type echoOrigin struct {
	*httptest.Server
	mu   sync.Mutex
	n    int
	auth map[string]bool // the Authorization headers it was sent
	// packageAuth are the Authorization headers its package URL of
	// OpenTofu's direct download answer was sent.
	packageAuth []string
}

func (e *echoOrigin) hits() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

func (e *echoOrigin) sent(authorization string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.auth[authorization]
}

// startEchoOrigin starts an echoOrigin; its package answers name
// signing keys of origin, its pre-signed URLs carry sig (the first) and
// then redirectSig (the one redirected to).
func startEchoOrigin(t *testing.T, origin *fakeorigin.Origin, sig, redirectSig string) *echoOrigin {
	t.Helper()
	e := &echoOrigin{auth: map[string]bool{}}
	echoed := func(w http.ResponseWriter, r *http.Request, code int) {
		var b strings.Builder
		fmt.Fprintf(&b, "<Error><Code>Refused</Code><Request>%s %s %s</Request>", r.Method, r.Host, r.URL)
		for k, v := range r.Header {
			fmt.Fprintf(&b, "<Header>%s: %s</Header>", k, strings.Join(v, ", "))
		}
		b.WriteString("</Error>")
		w.Header().Set("Content-Type", "application/xml")
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		w.WriteHeader(code)
		io.WriteString(w, b.String())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/terraform.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"providers.v1":"/v1/providers/","modules.v1":"/v1/modules/"}`)
	})
	mux.HandleFunc("GET /v1/providers/acme/echo/versions", func(w http.ResponseWriter, r *http.Request) {
		echoed(w, r, http.StatusInternalServerError)
	})
	mux.HandleFunc("GET /v1/modules/acme/echo/aws/versions", func(w http.ResponseWriter, r *http.Request) {
		echoed(w, r, http.StatusUnauthorized)
	})
	mux.HandleFunc("GET /v1/providers/acme/presigned/versions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"versions":[{"version":"1.0.0","protocols":["5.0"],"platforms":[{"os":"linux","arch":"amd64"}]}]}`)
	})
	presigned := func(r *http.Request, file, s string) string {
		return "https://" + r.Host + "/objects/" + file + "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20240101&X-Amz-Signature=" + s
	}
	mux.HandleFunc("GET /v1/providers/acme/presigned/1.0.0/download/linux/amd64", func(w http.ResponseWriter, r *http.Request) {
		const zip = "terraform-provider-presigned_1.0.0_linux_amd64.zip"
		const sums = "terraform-provider-presigned_1.0.0_SHA256SUMS"
		d := registryjson.Package{Protocols: []string{"5.0"}, OS: "linux", Arch: "amd64", Filename: zip,
			DownloadURL: presigned(r, zip, sig), SHASumsURL: presigned(r, sums, sig), SHASumsSignatureURL: presigned(r, sums+".sig", sig),
			SHASum: strings.Repeat("ab", 32)}
		d.SigningKeys.GPGPublicKeys = []registryjson.GPGPublicKey{origin.SigningKey()}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(d)
	})
	mux.HandleFunc("GET /v1/modules/acme/presigned/aws/versions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"modules":[{"versions":[{"version":"1.0.0"}]}]}`)
	})
	mux.HandleFunc("GET /v1/modules/acme/presigned/aws/1.0.0/download", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Terraform-Get", presigned(r, "mod.tar.gz", sig))
		w.WriteHeader(http.StatusNoContent)
	})
	for code, name := range map[int]string{http.StatusUnauthorized: "gitauth", http.StatusForbidden: "gitdenied", http.StatusNotFound: "gitmissing", http.StatusBadGateway: "gitbroken"} {
		mux.HandleFunc("GET /v1/modules/acme/"+name+"/aws/versions", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"modules":[{"versions":[{"version":"1.0.0"}]}]}`)
		})
		mux.HandleFunc("GET /v1/modules/acme/"+name+"/aws/1.0.0/download", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Terraform-Get", "git::https://"+r.Host+"/git/"+name+".git?ref=v1.0.0")
			w.WriteHeader(http.StatusNoContent)
		})
		mux.HandleFunc("/git/"+name+".git/", func(w http.ResponseWriter, r *http.Request) { echoed(w, r, code) })
	}
	// A registry that serves its packages itself, in OpenTofu's direct
	// form: its package URL, fetched with the registry's token, refuses
	// it and echoes it.
	mux.HandleFunc("GET /v1/modules/acme/direct/aws/versions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"modules":[{"versions":[{"version":"1.0.0"}]}]}`)
	})
	mux.HandleFunc("GET /v1/modules/acme/direct/aws/1.0.0/download", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"location":"/packages/direct/1.0.0","use_registry_credentials":true}`)
	})
	mux.HandleFunc("GET /packages/direct/1.0.0", func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.packageAuth = append(e.packageAuth, r.Header.Get("Authorization"))
		e.mu.Unlock()
		echoed(w, r, http.StatusUnauthorized)
	})
	mux.HandleFunc("GET /objects/{file}", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("X-Amz-Signature") == sig {
			http.Redirect(w, r, presigned(r, "moved/"+r.PathValue("file"), redirectSig), http.StatusFound)
			return
		}
		echoed(w, r, http.StatusForbidden)
	})
	mux.HandleFunc("GET /objects/moved/{file}", func(w http.ResponseWriter, r *http.Request) {
		echoed(w, r, http.StatusForbidden)
	})
	e.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.n++
		e.auth[r.Header.Get("Authorization")] = true
		e.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	e.StartTLS()
	t.Cleanup(e.Close)
	return e
}

// authProxy is an HTTP CONNECT proxy that takes one user with either of
// two passwords and refuses anyone else (407).
type authProxy struct {
	addr string
	mu   sync.Mutex
	n    int
}

func (p *authProxy) connects() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func startAuthProxy(t *testing.T, user string, passwords ...string) *authProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &authProxy{addr: ln.Addr().String()}
	var conns sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	track := func(c net.Conn, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			open[c] = true
		} else {
			delete(open, c)
		}
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := false
		for _, pass := range passwords {
			ok = ok || r.Header.Get("Proxy-Authorization") == "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
		}
		if !ok {
			w.Header().Set("Proxy-Authenticate", `Basic realm="proxy"`)
			http.Error(w, "proxy authentication required", http.StatusProxyAuthRequired)
			return
		}
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		up, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(r.Context(), "tcp", r.Host)
		if err != nil {
			http.Error(w, "cannot reach the target", http.StatusBadGateway)
			return
		}
		p.mu.Lock()
		p.n++
		p.mu.Unlock()
		c, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			up.Close()
			return
		}
		track(c, true)
		track(up, true)
		io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		conns.Add(2)
		go func() {
			defer conns.Done()
			io.Copy(up, buf)
			up.(*net.TCPConn).CloseWrite()
		}()
		go func() {
			defer conns.Done()
			io.Copy(c, up)
			c.Close()
			up.Close()
			track(c, false)
			track(up, false)
		}()
	})}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	return p
}

// secretArmorLines are the lines of an armored OpenPGP private key that
// the armor of its public key lacks.
func secretArmorLines(t *testing.T, armored []byte) []string {
	t.Helper()
	ents, err := openpgp.ReadArmoredKeyRing(strings.NewReader(string(armored)))
	if err != nil || len(ents) != 1 || ents[0].PrivateKey == nil {
		t.Fatalf("the export key: %v", err)
	}
	var pub strings.Builder
	w, err := armor.Encode(&pub, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ents[0].Serialize(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var out []string
	for _, l := range strings.Split(string(armored), "\n") {
		l = strings.TrimSpace(l)
		if len(l) >= 40 && !strings.Contains(l, " ") && !strings.Contains(pub.String(), l) {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		t.Fatal("no line of the export key is secret")
	}
	return out
}
