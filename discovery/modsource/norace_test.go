//go:build !race

package modsource

const cpuScale = 1

const raceEnabled = false
