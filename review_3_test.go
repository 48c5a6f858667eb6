package partlog

import (
	"os"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/segment"
)

// R3: a last segment holding only a corrupt batch, named below the end of
// the previous segment: recovery cuts it to 0 bytes, keeps it, and reports
// LEO = previous end; adopt then refuses its own recovery's result.
func TestRegression_ReviewCorruptLastSegmentBelowPrevEnd(t *testing.T) {
	opts := ltOpts(t)
	opts.SegmentBytes = 1 << 20
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ltAppend(t, l, 10, func(int) int32 { return 1 })
	_ = l.Close()
	b := makeFollowerBatch(t, 10, 1, 3, 50, 1_700_000_000_000)
	b[len(b)-1] ^= 0xff // CRC mismatch
	if batch.View(b).BaseOffset() != 10 {
		t.Fatal("base")
	}
	if err := os.WriteFile(segment.Path(dir, 10, segment.LogSuffix), b, 0o644); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(dir, opts)
	if err != nil {
		t.Errorf("first open: %v", err)
	} else {
		t.Logf("first open ok: segs %v LEO %d", l2.Segments(), l2.LogEndOffset())
		_ = l2.Close()
	}
	l3, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("second open: %v", err)
	}
	t.Logf("second open: segs %v LEO %d", l3.Segments(), l3.LogEndOffset())
	_ = l3.Close()
}
