//go:build race

package jsonlog

// raceEnabled: the race detector makes sync.Pool drop items at random.
const raceEnabled = true
