//go:build race

package modsource

// cpuScale is how much more CPU the race detector makes the code take:
// it follows every byte copied.
const cpuScale = 5

const raceEnabled = true
