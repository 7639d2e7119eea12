package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// modulePath prefixes the symbols of the project's own packages.
const modulePath = "github.com/tfmirror/tfmirror/v2/"

// testRigPackages are the project's packages that only tests may link,
// besides every package whose name ends in "test" (cachetest, enginetest,
// s3test, verifytest...).
var testRigPackages = []string{"internal/testhooks", "internal/testrig/fakeorigin"}

// testHookNames are the operations that only test rigs call: the cache's
// Rig (deleting or damaging an archive, counting chunks, an eviction pass
// on demand) and the engine's wait for its fetches, under their current
// and former names.
var testHookNames = []string{
	"cache.Rig", // Rig, RigOf and Rig's methods
	"FlipBlobByte", "flipBlobByte",
	"ChunkCount", "chunkCount",
	"DeleteBlob", // the rig's; eviction's own is deleteBlob
	"EngineWait",
	"mirror.WaitIdle",
	"mirror.(*Engine).wait",
}

// testHookSymbols returns the symbols of nm's output (go tool nm: address,
// kind, name) that are test hooks or belong to a test rig.
func testHookSymbols(nm string) []string {
	var found []string
	for line := range strings.Lines(nm) {
		fields := strings.Fields(line)
		if len(fields) < 3 {
			continue
		}
		name := strings.Join(fields[2:], " ")
		rest, ok := strings.CutPrefix(name, modulePath)
		if !ok {
			continue
		}
		pkg := rest
		if slash := strings.LastIndex(pkg, "/"); slash >= 0 {
			if dot := strings.Index(pkg[slash:], "."); dot >= 0 {
				pkg = pkg[:slash+dot]
			}
		} else if dot := strings.Index(pkg, "."); dot >= 0 {
			pkg = pkg[:dot]
		}
		last := pkg[strings.LastIndex(pkg, "/")+1:]
		hook := strings.HasSuffix(last, "test") || slices.Contains(testRigPackages, pkg)
		for _, h := range testHookNames {
			hook = hook || strings.Contains(rest, h)
		}
		if hook && !slices.Contains(found, name) {
			found = append(found, name)
		}
	}
	return found
}

// The shipped binary links no test hook and no test rig: no routine that
// damages a stored archive, deletes one from under its readers or waits
// for the engine's fetches, and none of the packages that carry them.
func TestBinaryLinksNoTestHook(t *testing.T) {
	bin := buildBinary(t)
	out, err := exec.Command("go", "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	nm := string(out)
	// The symbols are there to be checked (not a stripped binary).
	for _, want := range []string{modulePath + "cache.Open", modulePath + "mirror.New"} {
		if !strings.Contains(nm, " "+want+"\n") {
			t.Fatalf("the binary's symbol table has no %s: the check below would see nothing", want)
		}
	}
	if found := testHookSymbols(nm); len(found) > 0 {
		t.Errorf("the binary links %d test hook or test rig symbols:\n%s", len(found), strings.Join(found, "\n"))
	}
}

// testHookSymbols tells the symbols of test hooks and rigs from the
// production symbols beside them.
func TestTestHookSymbols(t *testing.T) {
	tests := []struct {
		name string
		sym  string
		hook bool
	}{
		{name: "former hook package", sym: modulePath + "internal/testhooks.init", hook: true},
		{name: "cache rig package", sym: modulePath + "internal/testrig/cachetest.DeleteBlob", hook: true},
		{name: "engine rig package", sym: modulePath + "internal/testrig/enginetest.WaitIdle", hook: true},
		{name: "fake origin", sym: modulePath + "internal/testrig/fakeorigin.(*Origin).Archive", hook: true},
		{name: "nested rig package", sym: modulePath + "verify/verifytest.ZipBomb", hook: true},
		{name: "rig constructor", sym: modulePath + "cache.RigOf", hook: true},
		{name: "corruption routine", sym: modulePath + "cache.Rig.FlipBlobByte", hook: true},
		{name: "former corruption routine", sym: modulePath + "cache.(*Store).flipBlobByte", hook: true},
		{name: "chunk count", sym: modulePath + "cache.Rig.ChunkCount", hook: true},
		{name: "engine wait", sym: modulePath + "mirror.WaitIdle", hook: true},
		{name: "engine wait method", sym: modulePath + "mirror.(*Engine).wait", hook: true},
		{name: "closure of a hook", sym: modulePath + "cache.Rig.FlipBlobByte.func1", hook: true},
		{name: "eviction's delete", sym: modulePath + "cache.(*Blobs).deleteBlob"},
		{name: "eviction", sym: modulePath + "cache.(*Blobs).EvictBlob"},
		{name: "engine's wait group", sym: modulePath + "mirror.(*tasks).wait"},
		{name: "store", sym: modulePath + "cache.Open"},
		{name: "standard library test helper", sym: "crypto/internal/fips140/ecdsa.testHash"},
		{name: "another module", sym: "github.com/other/cachetest.Open"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := testHookSymbols("  4d3140 T " + tc.sym + "\n")
			if hook := len(got) > 0; hook != tc.hook {
				t.Errorf("%s: found %v, want hook %v", tc.sym, got, tc.hook)
			}
		})
	}
}
