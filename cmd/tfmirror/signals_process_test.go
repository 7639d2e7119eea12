package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// signalsChildEnv has the test binary, run again by a test, do what
// serve's process does with its signals (signalsChild), not its tests.
const signalsChildEnv = "TFMIRROR_TEST_SIGNALS_CHILD"

// signalsChild is the test binary run again as a process of its own, to
// take signals as serve's process does: "stop" holds stopSignals and
// says when each step came, then stays, as a shutdown that does not end;
// "hangup" holds SIGHUP as run and serve do, lets go of it as serve does
// when it returns, and sends itself a SIGHUP.
func signalsChild(mode string) int {
	switch mode {
	case "stop":
		ctx, hurry, stop := stopSignals()
		defer stop()
		fmt.Println("ready")
		<-ctx.Done()
		fmt.Println("shutting down")
		<-hurry
		fmt.Println("hurried")
		time.Sleep(time.Minute) // a shutdown that does not end
		return 0
	case "hangup":
		kept := keepHangups()
		_, stopHangups := catchHangups()
		stopHangups() // serve has returned
		self, err := os.FindProcess(os.Getpid())
		if err == nil {
			err = self.Signal(syscall.SIGHUP)
		}
		if err != nil {
			fmt.Println(err)
			return 3
		}
		select {
		case <-kept:
			return 0
		case <-time.After(30 * time.Second):
			fmt.Println("the SIGHUP was not caught")
			return 3
		}
	}
	return 4
}

// startSignalsChild runs the test binary as signalsChild(mode), its
// output read by lines.
func startSignalsChild(t *testing.T, mode string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), signalsChildEnv+"="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewScanner(out)
}

// waited is cmd's end, or an error when it has not ended within a
// minute (then it is killed).
func waited(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		return errors.New("still running a minute later")
	}
}

// A third SIGINT or SIGTERM ends serve's process at once, should the
// shutdown that the second hurried not end (a cache on a disk that
// hangs): the third was swallowed, and only SIGKILL ended it.
func TestThirdSignalEndsTheProcess(t *testing.T) {
	t.Parallel()
	cmd, lines := startSignalsChild(t, "stop")
	for _, want := range []string{"ready", "shutting down", "hurried"} {
		if !lines.Scan() || lines.Text() != want {
			t.Fatalf("the process said %q (%v), want %q", lines.Text(), lines.Err(), want)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for lines.Scan() {
		t.Logf("the process said %q", lines.Text())
	}
	err := waited(cmd)
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("after a third SIGTERM: %v, want the process ended by it", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("after a third SIGTERM: %v, want the process ended by it", err)
	}
}

// A SIGHUP that comes as serve stops (after it let go of SIGHUP, before
// the process ends) is dropped: it ended the process, as the signal's
// default does, before the shutdown's last log lines were written.
func TestHangupAsServeStopsIsDropped(t *testing.T) {
	t.Parallel()
	cmd, lines := startSignalsChild(t, "hangup")
	for lines.Scan() {
		t.Logf("the process said %q", lines.Text())
	}
	if err := waited(cmd); err != nil {
		t.Errorf("a SIGHUP after serve let go of it: %v, want the process to go on (exit 0)", err)
	}
}
