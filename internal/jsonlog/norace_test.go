//go:build !race

package jsonlog

const raceEnabled = false
