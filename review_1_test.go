package partlog

import (
	"os"
	"testing"

	"github.com/partlog/partlog/segment"
)

// R1: a clean-shutdown reopen of a log whose sealed segment (well below the
// recovery point, flushed, acknowledged) has a damaged last batch. Old
// Log.load trusted sealed segments under the marker (as Kafka does); the
// new path runs recovery, which cuts there and drops every later segment.
func TestRegression_ReviewCleanOpenDropsFlushedSegments(t *testing.T) {
	opts := ltOpts(t)
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ltAppend(t, l, 40, func(int) int32 { return 1 })
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(segs) < 4 {
		t.Fatalf("segments %v", segs)
	}
	// Flip one byte inside the last batch's records of segment 1.
	p := segment.Path(dir, segs[1], segment.LogSuffix)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-10] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	o := *opts
	o.CleanShutdown = true
	o.RecoveryPoint = leo
	l2, err := Open(dir, &o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer closeDamaged(l2)
	t.Logf("before: segs %v LEO %d; after: segs %v LEO %d", segs, leo, l2.Segments(), l2.LogEndOffset())
	if rep := l2.RecoveryReport(); rep != nil {
		t.Logf("report: %s", rep.Summary())
	}
	if l2.LogEndOffset() != leo {
		t.Errorf("clean reopen lost offsets %d..%d (segments %v -> %v): flushed, acknowledged data in later segments dropped",
			l2.LogEndOffset(), leo-1, segs, l2.Segments())
	}
}
