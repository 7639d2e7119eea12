package cache

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// A scan of the records that the database's closing cuts short (a
// read-write reopen that failed, the database gone until the next) says
// so: its callers (retention among them) decide by what no record names,
// and a scan that ended early without a word would have them take every
// record after the cut for absent. A store that never had a database
// holds nothing, and says so with nil.
func TestScanCutShortByTheDatabaseGoingIsAnError(t *testing.T) {
	s := openTest(t, "")
	for i := range 3 * scanFirstBatch {
		if err := s.PutMeta(fmt.Sprintf("x/%03d", i), i); err != nil {
			t.Fatal(err)
		}
	}
	db := s.db
	bdb := db.bdb
	var read int
	err := s.ScanMeta("x/", func(string, time.Time, json.RawMessage) error {
		read++
		if read == scanFirstBatch { // the database goes between two batches
			db.dbmu.Lock()
			db.bdb = nil
			db.dbmu.Unlock()
		}
		return nil
	})
	db.dbmu.Lock()
	db.bdb = bdb
	db.dbmu.Unlock()
	if err == nil {
		t.Errorf("a scan cut short after %d of %d records said nothing", read, 3*scanFirstBatch)
	}
}
