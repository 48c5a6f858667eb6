//go:build race

package partlog

// raceEnabled reports a -race build, where sync.Pool drops items and
// allocation counts are meaningless.
const raceEnabled = true
