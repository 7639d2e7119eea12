//go:build !race

package modsource

const cpuScale = 1
