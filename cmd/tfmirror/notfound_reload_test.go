package main

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	svchost "github.com/hashicorp/terraform-svchost"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
	"github.com/tfmirror/tfmirror/v2/proxy"
)

// not_found_ttl and not_found_max_entries are put in force by a reload:
// a period of zero forgets every 404 remembered at once, so that a
// provider the origin published meanwhile is found on the next request;
// a lower bound drops the least recently used answers beyond it; the
// reload's answer and its log line name the settings changed.
func TestNotFoundSettingsReload(t *testing.T) {
	t.Parallel()
	logs := newLogLines()
	e := &e2e{t: t, logTo: logs, config: filepath.Join(t.TempDir(), "tfmirror.hcl")}
	origin, err := fakeorigin.Start(fakeorigin.Options{Hostnames: e2eOrigins})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(origin.Close)
	e.origin = origin
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(e.config, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reload := func(want ...string) {
		t.Helper()
		n, _ := logs.count("configuration file reloaded")
		res, err := e.mirror.reload()
		if err != nil {
			t.Fatalf("reload: %v", err)
		}
		var changed []string
		for _, s := range res.Settings {
			if s.Restart {
				t.Errorf("reload: %s needs a restart, want it put in force", s.Name)
			}
			changed = append(changed, s.Attribute)
		}
		if !slices.Equal(changed, want) {
			t.Errorf("reload changed %v, want %v", changed, want)
		}
		logged := logs.find("configuration file reloaded")
		if len(logged) != n+1 {
			t.Fatalf("%d reload log lines, want %d", len(logged), n+1)
		}
		var names []string
		for _, v := range logged[n]["changed"].([]any) {
			names = append(names, v.(string))
		}
		if !slices.Equal(names, want) {
			t.Errorf("the reload's log line names %v changed, want %v", names, want)
		}
	}
	write("not_found_ttl = \"1h\"\n")
	e.startMirror(filepath.Join(t.TempDir(), "data"))
	client := trustingClient(t, e.caFile)
	status := func(name string) int {
		t.Helper()
		resp, err := client.Get(e.url + tfRegistry + "/hashicorp/" + name + "/index.json")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	memory := e.mirror.engine.NotFound()
	host := svchost.Hostname(tfRegistry)
	entries := func(want int) {
		t.Helper()
		gauge := metric(t, e.mirror.registry, "tfmirror_origin_not_found_entries", "origin", tfRegistry)
		if n := memory.Entries(host); n != want || gauge != float64(want) {
			t.Fatalf("%d answers remembered (gauge %v), want %d", n, gauge, want)
		}
	}

	for range 2 {
		if code := status("randon"); code != http.StatusNotFound {
			t.Fatalf("a provider the origin lacks: %d, want 404", code)
		}
	}
	origin.AddProvider("hashicorp", "randon", []string{"1.0.0"}, []string{"linux_amd64"})
	if code := status("randon"); code != http.StatusNotFound {
		t.Fatalf("within not_found_ttl: %d, want the 404 remembered", code)
	}
	if n := origin.Hits(fakeorigin.Versions); n != 1 {
		t.Fatalf("the origin was asked %d times, want 1", n)
	}
	entries(1)

	write("not_found_ttl = \"0s\"\n")
	reload("not_found_ttl")
	entries(0)
	if code := status("randon"); code != http.StatusOK {
		t.Fatalf("after not_found_ttl 0: %d, want the provider published", code)
	}
	for range 2 {
		status("other")
	}
	if n := origin.Hits(fakeorigin.Versions); n != 4 {
		t.Fatalf("with not_found_ttl 0 the origin was asked %d times in all, want 4", n)
	}
	entries(0)

	write("not_found_ttl = \"1h\"\n")
	reload("not_found_ttl")
	for _, name := range []string{"made-up-1", "made-up-2", "made-up-3", "made-up-4"} {
		status(name)
	}
	entries(4)
	write("not_found_ttl = \"1h\"\nnot_found_max_entries = 2\n")
	reload("not_found_max_entries")
	entries(2)
	before := origin.Hits(fakeorigin.Versions)
	status("made-up-4") // the most recently used, kept
	status("made-up-1") // the least, dropped
	if n := origin.Hits(fakeorigin.Versions) - before; n != 1 {
		t.Fatalf("asked the origin %d times, want 1 (the name dropped only)", n)
	}
	// The status page's configuration shows the values in force.
	conf := e.mirror.configuration()
	for name, want := range map[string]string{"not-found-ttl": "1h0m0s", "not-found-max-entries": "2"} {
		if i := slices.IndexFunc(conf.Settings, func(s proxy.Setting) bool { return s.Name == name }); i < 0 || conf.Settings[i].Value != want {
			t.Errorf("the status page's %s is not %s: %+v", name, want, conf.Settings)
		}
	}
}
