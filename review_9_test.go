package partlog

import (
	"testing"
)

func TestRegression_ReviewAdoptedPSM(t *testing.T) {
	opts := ltOpts(t)
	opts.ProducerIDExpirationMs = 12345
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ltAppend(t, l, 30, func(int) int32 { return 1 })
	if err := l.SetLogStartOffset(l.Segments()[1] + 2); err != nil {
		t.Fatal(err)
	}
	lso, leo := l.LogStartOffset(), l.LogEndOffset()
	_ = l.Close()
	for _, mode := range []struct {
		name          string
		clean, strict bool
	}{{"unclean", false, false}, {"clean", true, false}, {"strict-clean", true, true}} {
		o := *opts
		o.CleanShutdown, o.Strict, o.LogStartOffset = mode.clean, mode.strict, lso
		l2, err := Open(dir, &o)
		if err != nil {
			t.Fatalf("%s: %v", mode.name, err)
		}
		m := l2.psm
		t.Logf("%s: exp %d MEO %d lastSnap %d LEO %d LSO %d LSOoff %d", mode.name, m.ExpirationMs(), m.MapEndOffset(), m.LastSnapshotOffset(), l2.LogEndOffset(), l2.LogStartOffset(), l2.LastStableOffset())
		if m.ExpirationMs() != 12345 || m.MapEndOffset() != leo || l2.LogStartOffset() != lso {
			t.Errorf("%s: adopted state wrong", mode.name)
		}
		_ = l2.Close()
	}
}
