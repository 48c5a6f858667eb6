//go:build race

package producerstate

// raceEnabled reports a -race build, where allocation counts are not meaningful.
const raceEnabled = true
