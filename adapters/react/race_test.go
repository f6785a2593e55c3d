//go:build race

package react

// raceEnabled: under the race detector a child maps shadow memory for its heap as it grows, several times
// the heap's size, so its address space says nothing about a normal build's.
const raceEnabled = true
