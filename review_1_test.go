package partlog

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/partlog/partlog/segment"
)

// R1: a reopen, after a clean shutdown or a crash, of a log whose sealed
// segment (wholly below the recovery point: flushed, acknowledged) has a
// damaged last batch. Kafka never scans such a segment; the load must not
// cut it, nor drop the later segments. The damage is reported
// (corrupt-flushed).
func TestRegression_ReviewReopenKeepsFlushedSegments(t *testing.T) {
	for _, clean := range []bool{true, false} {
		t.Run(fmt.Sprintf("clean=%v", clean), func(t *testing.T) { reopenKeepsFlushedSegments(t, clean) })
	}
}

func reopenKeepsFlushedSegments(t *testing.T, clean bool) {
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
	o.CleanShutdown = clean
	o.RecoveryPoint = leo
	l2, err := Open(dir, &o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer closeDamaged(l2)
	rep := l2.RecoveryReport()
	if rep == nil || !strings.Contains(rep.Summary(), "corrupt-flushed") {
		t.Errorf("the damage is not reported: %v", rep)
	}
	if l2.LogEndOffset() != leo || !slices.Equal(l2.Segments(), segs) {
		t.Errorf("reopen lost offsets %d..%d (segments %v -> %v): flushed, acknowledged data in later segments dropped",
			l2.LogEndOffset(), leo-1, segs, l2.Segments())
	}
}
