//go:build !race

package testutil

// Race reports a -race build, where sync.Pool drops items at random, so
// allocation counts of code that pools (a codec's reader state) vary
// from run to run.
const Race = false
