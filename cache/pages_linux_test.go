//go:build linux

package cache

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tableRSS is how much of the table files in dir this process has
// resident, from /proc/self/smaps.
func tableRSS(t *testing.T, dir string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps:", err)
	}
	defer f.Close()
	var total int64
	inTable := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			inTable = len(fields) >= 6 && strings.HasSuffix(fields[len(fields)-1], ".sst") && filepath.Dir(fields[len(fields)-1]) == dir
		case inTable && fields[0] == "Rss:" && len(fields) == 3:
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			total += kb << 10
		}
	}
	return total
}

// After a pass over every record, ReleaseReadPages leaves (nearly) none
// of the tables' pages resident, and the records still read the same.
func TestReleaseReadPages(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	doc := hex.EncodeToString(randomBytes(1000, 1)) // that compresses little
	s, err := Open(Options{Dir: dir, DiskReserve: -1})
	if err != nil {
		t.Fatal(err)
	}
	const docs = 1500
	for i := range docs {
		if err := s.PutMeta(fmt.Sprintf("package/p%05d", i), fmt.Sprintf("%s%d", doc, i)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close() // the documents go to tables
	s, err = Open(Options{Dir: dir, DiskReserve: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.waitCount() // which released what the count read
	scan := func() int {
		n := 0
		if err := s.ScanMeta("package/", func(key string, _ time.Time, raw json.RawMessage) error {
			var v string
			if json.Unmarshal(raw, &v) != nil || v != fmt.Sprintf("%s%d", doc, n) {
				t.Fatalf("%s: %.20q...", key, v)
			}
			n++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := scan(); n != docs {
		t.Fatalf("read %d documents, want %d", n, docs)
	}
	before := tableRSS(t, dir)
	if before < 1<<20 {
		t.Fatalf("only %d bytes of the tables resident after reading %d documents of 2 KB", before, docs)
	}
	s.ReleaseReadPages()
	after := tableRSS(t, dir)
	t.Logf("tables resident: %d bytes after the scan, %d after ReleaseReadPages", before, after)
	if after > before/10 {
		t.Errorf("%d of %d bytes of the tables still resident (a kernel older than 5.4 has no MADV_PAGEOUT)", after, before)
	}
	if n := scan(); n != docs {
		t.Errorf("read %d documents after the release, want %d", n, docs)
	}
}
