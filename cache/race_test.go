package cache

import (
	"errors"
	"testing"
)

// Any number of writers committing the same sha256 at the same time leave
// one record, exact statistics and no orphaned chunks, and all of them
// succeed with the one committed BlobInfo. The first writer is held
// between reading that no record exists and writing its own; the others
// are started then, and each either reaches the same point (the race) or
// reports that it waits for the first: the interleaving is forced, not
// left to chance.
func TestConcurrentCommitsOfOneArchive(t *testing.T) {
	const writers = 4
	s := openTest(t, "")
	data := randomBytes(testChunk*3+17, 21)
	sha := shaOf(data)

	arrived := make(chan string, 4*writers) // "read" or "waits", once per event
	release := make(chan struct{})
	s.hooks.recordRead = func(string) {
		arrived <- "read"
		<-release
	}
	s.hooks.recordWaits = func(string) { arrived <- "waits" }

	ws := make([]BlobWriter, writers)
	for i := range ws {
		w, err := s.NewBlobWriter(sha)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		ws[i] = w
	}
	type result struct {
		info BlobInfo
		err  error
	}
	results := make(chan result, writers)
	commit := func(w BlobWriter) {
		info, err := w.Commit("h1:test")
		results <- result{info, err}
	}
	go commit(ws[0])
	if ev := <-arrived; ev != "read" {
		t.Fatalf("first writer: %s, want read", ev)
	}
	for _, w := range ws[1:] {
		go commit(w)
	}
	raced := 0
	for range writers - 1 {
		if <-arrived == "read" {
			raced++ // read "no record" while the first writer was about to write one
		}
	}
	close(release)

	var infos []BlobInfo
	for range writers {
		r := <-results
		if r.err != nil {
			t.Errorf("Commit: %v", r.err)
			continue
		}
		infos = append(infos, r.info)
	}
	for _, w := range ws {
		if err := w.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	if raced > 0 {
		t.Errorf("%d writers read the record while another was committing it", raced)
	}
	stored, err := s.StatBlob(sha)
	if err != nil {
		t.Fatal(err)
	}
	for i, info := range infos {
		if info != stored {
			t.Errorf("Commit %d returned %+v, the stored record is %+v", i, info, stored)
		}
	}
	if n, total := s.Stats(); n != 1 || total != int64(len(data)) {
		t.Errorf("Stats = %d archives, %d bytes; want 1, %d", n, total, len(data))
	}
	if n, err := s.ChunkCount(); err != nil || n != 4 {
		t.Errorf("ChunkCount = %d, %v; want 4 (one copy, nothing orphaned)", n, err)
	}
	// A restart finds the same.
	if n, err := s.CleanOrphans(); err != nil || n != 0 {
		t.Errorf("CleanOrphans removed %d chunks (%v), want 0", n, err)
	}
}

// Two deletes of one archive at the same time count it out once: the
// first is held between reading the record and deleting it while the
// second starts.
func TestConcurrentDeletesOfOneArchive(t *testing.T) {
	s := openTest(t, "")
	data := randomBytes(testChunk*2+3, 22)
	put(t, s, data)
	other := randomBytes(testChunk, 23)
	put(t, s, other)

	arrived := make(chan string, 4)
	release := make(chan struct{})
	s.hooks.recordRead = func(string) {
		arrived <- "read"
		<-release
	}
	s.hooks.recordWaits = func(string) { arrived <- "waits" }
	errs := make(chan error, 2)
	del := func() { errs <- s.DeleteBlob(shaOf(data)) }
	go del()
	if ev := <-arrived; ev != "read" {
		t.Fatalf("first delete: %s, want read", ev)
	}
	go del()
	second := <-arrived
	close(release)
	var deleted, notFound int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			deleted++
		case errors.Is(err, ErrNotFound):
			notFound++
		default:
			t.Errorf("DeleteBlob: %v", err)
		}
	}
	if second != "waits" {
		t.Errorf("second delete: %s while the first was deleting, want waits", second)
	}
	if deleted != 1 || notFound != 1 {
		t.Errorf("%d deletes succeeded and %d found nothing, want 1 and 1", deleted, notFound)
	}
	if n, total := s.Stats(); n != 1 || total != int64(len(other)) {
		t.Errorf("Stats = %d archives, %d bytes; want 1, %d", n, total, len(other))
	}
}
