package flights

import (
	"testing"
	"time"
)

// Close waits for the work under way and refuses work after it.
func TestCloseWaitsAndRefuses(t *testing.T) {
	var f Flights
	if !f.Start() {
		t.Fatal("Start refused before Close")
	}
	closed := make(chan struct{})
	go func() { f.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned with work under way")
	case <-time.After(50 * time.Millisecond):
	}
	f.Done()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return once the work ended")
	}
	if f.Start() {
		t.Error("Start counted work after Close")
	}
}
