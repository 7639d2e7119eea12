package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/tfmirror/tfmirror/v2/internal/testrig/fakeorigin"
)

// Once a shutdown begins (Server.Drain), the socket answers every new request,
// a ping too, that the serve is shutting down (Dial says
// ErrShuttingDown, not ErrNoServer), and Drain waits for the command
// under way, which is answered.
func TestDrainRefusesNewCommandsAndWaitsForRunning(t *testing.T) {
	h := newHarness(t, harnessOptions{origin: fakeorigin.Options{ArchiveSize: 1 << 16}})
	a := h.newAPI(t, nil, nil, Options{})
	h.origin.AddProvider("acme", "widget", []string{"1.0.0"}, []string{"linux_amd64"})
	dir, srv, post := socketServer(t, a)
	release := h.origin.GateArchives()
	defer release()

	running := make(chan int, 1)
	go func() {
		code, _ := post("/v1/ensure", `{"provider":"`+originHost+`/acme/widget","version":"1.0.0","platform":"linux_amd64"}`)
		running <- code
	}()
	h.origin.WaitArchiveStarted()
	drained := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { drained <- srv.Drain(ctx) }()

	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := Dial(context.Background(), dir)
		if err == nil {
			c.Close()
		}
		if errors.Is(err, ErrShuttingDown) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Dial once the shutdown began: %v, want ErrShuttingDown", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	code, body := post("/v1/versions", `{"provider":"`+originHost+`/acme/widget"}`)
	var eb ErrorBody
	if code != http.StatusServiceUnavailable || json.Unmarshal(body, &eb) != nil || eb.Error != ErrShuttingDown.Error() {
		t.Errorf("a command once the shutdown began: %d %s, want 503 saying it is shutting down", code, body)
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned (%v) while a command was under way", err)
	default:
	}
	release()
	if code := <-running; code != http.StatusOK {
		t.Errorf("the command under way when the shutdown began: %d, want 200", code)
	}
	if err := <-drained; err != nil {
		t.Errorf("Drain: %v", err)
	}
}

// TestDrainOfNothingRunningIsDone: with no command running, a drain is
// done whatever its context, even one already cancelled (a second signal
// came before it): it said that commands still running were cut off,
// half the time, as a select of two ready cases picks either, and the
// serve logged so and closed the socket's server at once.
func TestDrainOfNothingRunningIsDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 200 {
		var d drain
		if err := d.wait(ctx); err != nil {
			t.Fatalf("drain %d of nothing running, its context cancelled: %v, want nil", i, err)
		}
	}
}
