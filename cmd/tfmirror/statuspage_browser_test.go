package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// layoutScript measures the page as the browser lays it out, without
// scrolling, and writes what it measured into the page for --dump-dom:
// the viewport, the page's width, and each element's box.
const layoutScript = `<script>
(function () {
  var out = {w: window.innerWidth, h: window.innerHeight, scrollWidth: document.documentElement.scrollWidth, boxes: {}, wide: []};
  var all = document.body.getElementsByTagName("*");
  for (var j = 0; j < all.length && out.wide.length < 8; j++) {
    if (!all[j].closest("pre, details:not([open])") && all[j].getBoundingClientRect().right > window.innerWidth + 1) { out.wide.push(all[j].tagName + "#" + all[j].id + "." + all[j].className + " " + (all[j].textContent || "").slice(0, 60)); }
  }
  var sels = %s;
  for (var i = 0; i < sels.length; i++) {
    var e = document.querySelector(sels[i]);
    if (e) { var r = e.getBoundingClientRect(); out.boxes[sels[i]] = {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; }
  }
  parent.postMessage(JSON.stringify(out), "*");
})();
</script>`

// harness shows a page in a frame of exactly the size asked, whatever
// the smallest window headless Chromium makes, and writes what the
// page's layoutScript measured into itself for --dump-dom.
const harness = `<!DOCTYPE html>
<html><body style="margin:0">
<iframe src="%s" width="%d" height="%d" style="border:0;display:block"></iframe>
<pre id="layout-measured"></pre>
<script>window.addEventListener("message", function (e) { document.getElementById("layout-measured").textContent = e.data; });</script>
</body></html>`

type box struct{ Top, Bottom, Left, Right float64 }

type layout struct {
	W, H        float64
	ScrollWidth float64 `json:"scrollWidth"`
	Boxes       map[string]box
	Wide        []string // elements that reach past the viewport's right edge
}

// artifactsDir is where the browser tests keep their screenshots:
// $TFMIRROR_ARTIFACTS/NAME when set (CI uploads it), else a temporary
// directory, logged.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if base := os.Getenv("TFMIRROR_ARTIFACTS"); base != "" {
		dir = filepath.Join(base, t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// TestStatusPageLayoutInBrowser renders the status page of a running
// tfmirror (with a configuration file, a package policy, a cached
// provider, a version the policy holds back and an origin that fails) in
// headless Chromium at a laptop's 1280×800 and a phone's 390×844: the
// origin rows and the first cached provider are in the first screen,
// above the configuration, and nothing is wider than the screen. The
// screenshots are kept (artifactsDir).
func TestStatusPageLayoutInBrowser(t *testing.T) {
	bin := chromium(t)
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	tfm := buildBinary(t)
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64", "darwin_arm64", "windows_amd64"})
	origin.AddProvider("hashicorp", "null", []string{"3.2.0", "3.2.1"}, []string{"linux_amd64"})
	caFile := originCAFile(t, origin)
	// A second origin where nothing listens: its row fails.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()

	conf := filepath.Join(t.TempDir(), "tfmirror.hcl")
	policyBlock := fmt.Sprintf("policy {\n  deny_version %q {\n    versions = \"3.2.1\"\n    reason   = \"breaks our modules (INC-1234)\"\n  }\n}\n", origin.Addr+"/hashicorp/null")
	if err := os.WriteFile(conf, []byte("log_level = \"info\"\n"+policyBlock), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	m := startProcess(t, tfm, dataDir, origin, caFile, "--config", conf, "--allowed-origins", origin.Addr+","+down,
		"--origin-retries", "0")
	ctx := context.Background()
	archive := providerArchivePath(origin, "hashicorp", "random", "3.6.0", "linux_amd64")
	for _, p := range []string{archive, fmt.Sprintf("/%s/hashicorp/null/index.json", origin.Addr)} {
		if _, _, err := m.get(ctx, p); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	// Once committed, the archive comes from the cache.
	for deadline := time.Now().Add(2 * time.Minute); len(m.status(t).cachedPlatforms()) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the archive was not cached within 2 minutes")
		}
	}
	if _, resp, err := m.get(ctx, archive); err != nil || resp.Header.Get("X-Tfmirror-Cache") != "hit" {
		t.Fatalf("the archive again: %v %v", resp.Header, err)
	}
	m.get(ctx, fmt.Sprintf("/%s/hashicorp/random/index.json", down)) // fails: nothing listens

	body, _, err := m.get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	page := string(body)
	for _, want := range []string{
		`<tr id="origin-` + origin.Addr + `" class="origin">`,
		`<span class="state ok">answering</span>`,
		`<tr id="origin-` + down + `" class="origin">`,
		`<span class="state bad">failing</span>`,
		`connection refused: nothing listens on the origin&#39;s port`,
		`3 requests, 1 of 2 downloads from the cache`,
		`<pre id="policy-rules"><code>deny_version`,
		`<details id="configuration">`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
	// Order: health and origins, cache, policy, the blocks, configuration.
	order := []string{`id="origins"`, `id="providers"`, `id="held-back"`, `id="policy"`, `id="use"`, `id="configuration"`}
	for i := 1; i < len(order); i++ {
		if a, b := strings.Index(page, order[i-1]), strings.Index(page, order[i]); a < 0 || b < 0 || a > b {
			t.Errorf("%s does not come before %s", order[i-1], order[i])
		}
	}
	if strings.Contains(page, `id="held-summary"><span class="bad"`) {
		t.Error("a version the policy holds back is shown in alarm red")
	}

	sels := []string{"#origins tr.origin", "#origins tr.origin + tr", "#providers tbody tr", "#configuration", "h1"}
	selsJSON, _ := json.Marshal(sels)
	measured := strings.Replace(page, "</body>", fmt.Sprintf(layoutScript, selsJSON)+"</body>", 1)
	dir := t.TempDir()
	local := filepath.Join(dir, "status.html")
	if err := os.WriteFile(local, []byte(measured), 0o644); err != nil {
		t.Fatal(err)
	}
	shots := artifactsDir(t)
	if err := os.WriteFile(filepath.Join(shots, "status.html"), body, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, size := range []struct {
		name string
		w, h int
	}{{"laptop", 1280, 800}, {"phone", 390, 844}} {
		t.Run(size.name, func(t *testing.T) {
			// The window is larger than the frame: headless windows are
			// at least 500 pixels wide.
			win := fmt.Sprintf("--window-size=%d,%d", max(size.w, 500), size.h+200)
			frame := func(name, src string, h int) string {
				t.Helper()
				path := filepath.Join(dir, name)
				if err := os.WriteFile(path, []byte(fmt.Sprintf(harness, src, size.w, h)), 0o644); err != nil {
					t.Fatal(err)
				}
				return "file://" + path
			}
			dom := headless(t, bin, frame("measure-"+size.name+".html", "status.html", size.h), win, "--hide-scrollbars",
				"--allow-file-access-from-files", "--virtual-time-budget=3000", "--dump-dom")
			_, rest, ok := strings.Cut(dom, `<pre id="layout-measured">`)
			raw, _, _ := strings.Cut(rest, "</pre>")
			var l layout
			if !ok || json.Unmarshal([]byte(html.UnescapeString(raw)), &l) != nil {
				t.Fatalf("no layout measured:\n%s", dom)
			}
			if l.W != float64(size.w) || l.H != float64(size.h) {
				t.Fatalf("viewport %vx%v, want %dx%d", l.W, l.H, size.w, size.h)
			}
			config := l.Boxes["#configuration"]
			for _, sel := range sels[:3] {
				b, ok := l.Boxes[sel]
				switch {
				case !ok:
					t.Errorf("%s not on the page", sel)
				case b.Bottom > l.H:
					t.Errorf("%s ends at %.0fpx, below the first screen (%.0fpx): %+v", sel, b.Bottom, l.H, l)
				case b.Top >= config.Top:
					t.Errorf("%s is below the configuration", sel)
				case b.Right > l.W+1:
					t.Errorf("%s is wider than the screen: %+v", sel, b)
				}
			}
			if l.ScrollWidth > l.W+1 {
				t.Errorf("the page is %.0fpx wide on a %.0fpx screen: %v", l.ScrollWidth, l.W, l.Wide)
			}
			// The page itself as the browser shows it, for people.
			shot := filepath.Join(shots, fmt.Sprintf("status-%s-%dx%d.png", size.name, size.w, size.h))
			headless(t, bin, frame("shot-"+size.name+".html", m.url, size.h), win, "--hide-scrollbars", "--ignore-certificate-errors",
				"--virtual-time-budget=3000", "--screenshot="+shot)
			// And the whole page (four screens), to look at.
			full := filepath.Join(shots, fmt.Sprintf("status-%s-%dx%d-long.png", size.name, size.w, 4*size.h))
			headless(t, bin, frame("long-"+size.name+".html", m.url, 4*size.h), fmt.Sprintf("--window-size=%d,%d", max(size.w, 500), 4*size.h+200),
				"--hide-scrollbars", "--ignore-certificate-errors", "--virtual-time-budget=3000", "--screenshot="+full)
			if fi, err := os.Stat(shot); err != nil || fi.Size() == 0 {
				t.Errorf("no screenshot %s: %v", shot, err)
			}
		})
	}
}
