package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// chromium finds a headless-capable Chromium. Without one the test skips,
// unless CI is set and TFMIRROR_BROWSER_TESTS=1, when it fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" && os.Getenv("TFMIRROR_BROWSER_TESTS") == "1" {
		t.Fatal("chromium is required when TFMIRROR_BROWSER_TESTS=1 in CI")
	}
	t.Skip("chromium not installed")
	return ""
}

// headless runs chromium on url with extra arguments and returns its stdout.
// Its budget is minutes, not seconds: on a two-core CI machine running the
// other packages' tests beside it, a browser's cold start alone has taken
// twenty seconds. A page that never renders still fails, when it runs out.
// A browser that crashes (killed by a signal: a segmentation fault has
// been seen under load) is started once more, in a fresh profile: what the
// tests check is the page, not the browser.
func headless(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for attempt := 1; ; attempt++ {
		home := t.TempDir()
		cmd := exec.CommandContext(ctx, bin, append([]string{
			"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--disable-dev-shm-usage", "--disable-extensions", "--mute-audio", "--user-data-dir=" + home,
		}, append(args, url)...)...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return string(out)
		case attempt == 1 && ctx.Err() == nil && errors.As(err, &exit) && !exit.Exited():
			t.Logf("chromium crashed (%v); starting it once more:\n%s", err, stderr.String())
		default:
			t.Fatalf("chromium: %v\n%s", err, stderr.String())
		}
	}
}

func TestStatusPageInBrowser(t *testing.T) {
	bin := chromium(t)
	origin := newOrigin(t, fakeorigin.Options{})
	origin.AddProvider("hashicorp", "random", []string{"3.6.0"}, []string{"linux_amd64", "darwin_arm64", "windows_amd64"})
	// Plain HTTP on loopback, so that the browser needs no trust setup.
	tm := startMirror(t, origin, t.TempDir(), nil, "--insecure-http")
	for _, path := range []string{tfRegistry + "/hashicorp/random/3.6.0.json", archiveURL("random", "3.6.0", "linux_amd64")} {
		if resp, _, err := tm.get(path); err != nil || resp.StatusCode != 200 {
			t.Fatalf("caching a provider: %s: %v %v", path, resp, err)
		}
	}
	tm.idle()

	dom := headless(t, bin, tm.url, "--dump-dom")
	for _, want := range []string{
		`<td><code>` + tfRegistry + `/<wbr>hashicorp/<wbr>random</code></td><td>3.6.0</td>`,
		`linux_amd64 <span class="ok"`,
		`<span class="plat">darwin_arm64</span>`,
		`url = "` + tm.url + `"`,
		`1 archive cached, `,
		// The health block, from the same source as /readyz: the
		// on-disk cache writable, with its free space and reserve.
		`<li id="health-cache">Cache: <span class="ok">writable</span>; `,
		` free on its disk, writes stop below `,
		`<li id="health-offline">Online:`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q:\n%s", want, dom)
		}
	}
	if shot := os.Getenv("TFMIRROR_SCREENSHOT"); shot != "" {
		headless(t, bin, tm.url, "--window-size="+envOr("TFMIRROR_SCREENSHOT_SIZE", "390,844"), "--hide-scrollbars", "--screenshot="+shot)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
