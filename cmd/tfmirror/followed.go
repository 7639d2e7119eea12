package main

import (
	"bytes"
	"log/slog"
	"slices"
)

// followed is what the mirror keeps of files it reads again while it
// serves (the operator's certificate files, origin_ca_file's): the bytes
// whose reading is in force, and the last bytes refused with why, so that
// a reading of unchanged files does nothing, a refusal is logged and
// counted when it is met first (not at each reading of the same bytes
// refused for the same reason), and files put back to the bytes in force
// after a refusal clear it. Its owner serializes the readings.
type followed struct {
	log *slog.Logger
	// count counts a reading put in force or refused, one of
	// metrics.ReloadOutcomes; nil: not counted.
	count func(outcome string)
	// refusedMsg and restoredMsg are the log's words for a reading
	// refused and for the files put back; attrs name the files.
	refusedMsg, restoredMsg string
	attrs                   []any

	inForce, refused [][]byte
	refusedErr       error
}

// read takes the files' contents as read (err: why they could not be):
// unchanged, it does nothing but clear a refusal; changed, use puts them
// in force (changed true) or says why they are refused (the error), and
// what is in force stays. use is not called for a failed reading.
func (f *followed) read(contents [][]byte, err error, use func() error) (changed bool, _ error) {
	if err == nil && equalContents(contents, f.inForce) {
		if f.refusedErr != nil {
			// Put back after a refusal: what the files hold is in force
			// again, counted so (a gauge no longer says refused), and the
			// bytes refused, written again, are logged and counted again.
			f.refused, f.refusedErr = nil, nil
			f.log.Info(f.restoredMsg, f.attrs...)
			f.counted("applied")
		}
		return false, nil
	}
	if err == nil {
		err = use()
	}
	if err != nil {
		if f.refusedErr != nil && err.Error() == f.refusedErr.Error() && equalContents(contents, f.refused) {
			return false, err // logged and counted when met first
		}
		f.refused, f.refusedErr = contents, err
		f.log.Error(f.refusedMsg, append(slices.Clone(f.attrs), "error", err)...)
		f.counted("refused")
		return false, err
	}
	f.inForce, f.refused, f.refusedErr = contents, nil, nil
	f.counted("applied")
	return true, nil
}

func (f *followed) counted(outcome string) {
	if f.count != nil {
		f.count(outcome)
	}
}

// equalContents says a and b hold the same files' bytes.
func equalContents(a, b [][]byte) bool {
	return slices.EqualFunc(a, b, bytes.Equal)
}
