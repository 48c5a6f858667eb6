package partlog

import (
	"os"
	"testing"

	"github.com/partlog/partlog/segment"
)

// R6: follower roll to a higher base after a gap, crash before the first
// append reached the file (preallocated zeros).
func TestRegression_ReviewGapRollCrash(t *testing.T) {
	opts := ltOpts(t)
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsFollower(makeFollowerBatch(t, 0, 1, 10, 10, 1_700_000_000_000)); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	if err := os.WriteFile(segment.Path(dir, 1000, segment.LogSuffix), make([]byte, 8<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{segment.IndexSuffix, segment.TimeIndexSuffix} {
		_ = os.WriteFile(segment.Path(dir, 1000, k), make([]byte, 4096), 0o644)
	}
	o := *opts
	o.RecoveryPoint = 10
	l2, err := Open(dir, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("segs %v LEO %d report %s", l2.Segments(), l2.LogEndOffset(), l2.RecoveryReport().Summary())
	if _, err := l2.AppendAsFollower(makeFollowerBatch(t, 1000, 1, 10, 10, 1_700_000_000_000)); err != nil {
		t.Fatal(err)
	}
	t.Logf("after: segs %v LEO %d", l2.Segments(), l2.LogEndOffset())
	checkLog(t, l2)
	_ = l2.Close()
}
