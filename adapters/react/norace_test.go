//go:build !race

package react

// raceEnabled reports a race-detector build (see race_test.go).
const raceEnabled = false
