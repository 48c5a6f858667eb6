package partlog

import (
	"testing"
)

// R4: a follower log with a legal offset gap at a segment boundary (as
// compaction on the leader leaves) no longer opens under Strict, even
// after a clean close with the marker: recovery now runs on every open
// and reports the gap as a problem left undone.
func TestRegression_ReviewStrictCleanGap(t *testing.T) {
	opts := ltOpts(t)
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsFollower(makeFollowerBatch(t, 0, 1, 10, 10, 1_700_000_000_000)); err != nil {
		t.Fatal(err)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsFollower(makeFollowerBatch(t, 100, 1, 10, 10, 1_700_000_000_000)); err != nil {
		t.Fatal(err)
	}
	t.Logf("segs %v LEO %d", l.Segments(), l.LogEndOffset())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	o := *opts
	o.CleanShutdown = true
	o.Strict = true
	l2, err := Open(dir, &o)
	if err != nil {
		t.Fatalf("strict clean reopen of a cleanly closed follower log with a legal gap: %v", err)
	}
	_ = l2.Close()
}
