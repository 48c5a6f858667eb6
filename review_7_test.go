package partlog

import (
	"os"
	"testing"

	"github.com/partlog/partlog/recovery"
	"github.com/partlog/partlog/segment"
)

// R7: RefuseFlushedCut (the CLI's recover without --force) under the
// clean-shutdown marker: damage in a sealed segment followed by flushed
// segments is classed corrupt-unflushed, so the cut (dropping every later
// segment) is applied instead of refused.
func TestRegression_ReviewRefuseFlushedCutClean(t *testing.T) {
	opts := ltOpts(t)
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ltAppend(t, l, 40, func(int) int32 { return 1 })
	segs := l.Segments()
	leo := l.LogEndOffset()
	_ = l.Close()
	p := segment.Path(dir, segs[1], segment.LogSuffix)
	b, _ := os.ReadFile(p)
	b[len(b)-10] ^= 0xff
	_ = os.WriteFile(p, b, 0o644)
	rep, err := recovery.Run(dir, recovery.Options{Clean: true, RecoveryPoint: leo, RefuseFlushedCut: true,
		Segment: segment.Config{SegmentBytes: opts.SegmentBytes, MaxIndexBytes: opts.MaxIndexBytes, IndexIntervalBytes: opts.IndexIntervalBytes}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("refused %q; LEO %d of %d; summary %s", rep.Refused, rep.LogEndOffset, leo, rep.Summary()[:200])
	if rep.Refused == "" && rep.LogEndOffset < leo {
		t.Errorf("cut of flushed data (segments after %d) applied despite RefuseFlushedCut", segs[1])
	}
}
