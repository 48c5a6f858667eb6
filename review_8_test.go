package partlog

import (
	"math"
	"testing"
)

// R8: dropUnusableTail's "no room for any batch" bound (base > MaxInt64 -
// MaxInt32) drops an empty segment that can still take batches; as the
// only segment the log restarts at offset 0.
func TestRegression_ReviewHighBaseEmptySegmentDropped(t *testing.T) {
	opts := ltOpts(t)
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	b := int64(math.MaxInt64 - 1<<20) // room for a million offsets
	if err := l.TruncateFullyAndStartAt(b); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(makeBatch(t, 3, 10, 1_700_000_000_000), 1); err != nil {
		t.Fatalf("append at %d: %v", b, err)
	}
	if err := l.TruncateFullyAndStartAt(b); err != nil { // follower: leader's log start
		t.Fatal(err)
	}
	_ = l.Close()
	o := *opts
	o.CleanShutdown = true // Dir passes no log start: it equals the first segment's base
	l2, err := Open(dir, &o)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	t.Logf("reopened: segs %v LSO %d LEO %d", l2.Segments(), l2.LogStartOffset(), l2.LogEndOffset())
	if l2.LogEndOffset() != b {
		t.Errorf("LEO %d after reopen, want %d: the empty segment at %d was dropped", l2.LogEndOffset(), b, b)
	}
}
