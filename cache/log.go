// Badger's log routed to slog, and errors that are logged quietly.

package cache

import (
	"fmt"
	"log/slog"
	"strings"
)

type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Error(strings.TrimSpace(fmt.Sprintf(f, a...)), "component", "badger")
}

func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn(strings.TrimSpace(fmt.Sprintf(f, a...)), "component", "badger")
}

func (b badgerLogger) Infof(string, ...any)  {}
func (b badgerLogger) Debugf(string, ...any) {}

// quiet shortens an error to its first line: some Badger errors carry a
// hex dump of the value, which has no place in a log.
func quiet(err error) error {
	if err == nil {
		return nil
	}
	return quietError{err}
}

type quietError struct{ err error }

func (e quietError) Error() string {
	msg, _, _ := strings.Cut(e.err.Error(), "\n")
	return msg
}

func (e quietError) Unwrap() error { return e.err }
