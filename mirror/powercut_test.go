package mirror

import (
	"path/filepath"
	"testing"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/internal/crashfs"
)

// TestPowerCutStop: the stop of a mirrored partition (both policies)
// over crashfs, cut at every step (every op up to a few dozen, then the
// steps around each sync first). The image reopens as a broker restarts
// it: the partition is STOPPED (the stop finished, with exactly one
// barrier: checkStopped), or, when the cut came before the stop's intent
// was durable, still MIRRORING, and a new Stop then ends the same way.
// Once Stop returned, the image is stopped as it said.
func TestPowerCutStop(t *testing.T) {
	cuts := 24
	if testing.Short() {
		cuts = 8
	}
	sweep := crashfs.NewSweep(t, cuts)
	for i, policy := range []StopPolicy{TruncateLSO, AbortOpen} {
		t.Run(policy.String(), func(t *testing.T) {
			sweep.Loop(1, func(run int) { powerCutStopRun(t, sweep, 100*i+run, policy) })
		})
	}
	t.Logf("%d images checked", sweep.Done)
}

func powerCutStopRun(t *testing.T, sweep *crashfs.Sweep, run int, policy StopPolicy) {
	m := crashfs.New(t)
	f := newStopFixtureIn(t, Options{}, m.Dir())
	from, err := m.Settle()
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.b.p.Stop(bg, policy)
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.History()
	if err != nil {
		t.Fatal(err)
	}
	sweep.Run(t, run, r, from, func(img string, im *crashfs.Image) {
		// Not openLog: its consistency check runs at the test's end, after
		// the sweep removed the image; this one runs before.
		dir := filepath.Join(img, "B", "t-0")
		l, err := partlog.Open(dir, logOptions())
		if err != nil {
			t.Fatalf("open the image's log: %v", err)
		}
		defer func() {
			if err := l.Close(); err != nil {
				t.Errorf("close the image's log: %v", err)
			}
			if err := partlog.Check(dir, logOptions()); err != nil {
				t.Errorf("consistency check of the image: %v", err)
			}
		}()
		p := openPartition(t, l, Options{LeaderEpoch: 13}) // the broker's persisted epoch
		switch st := p.State(); {
		case st == StateStopped:
			if c := p.Checkpoint(); im.Cut > r.Len() && c.BarrierOffset != res.BarrierOffset {
				t.Fatalf("after Stop returned: barrier at %d, Stop said %d", c.BarrierOffset, res.BarrierOffset)
			}
		case st == StateMirroring && im.Cut <= r.Len():
			// The stop's intent was not durable yet: stop again.
			if _, err := p.Stop(bg, policy); err != nil {
				t.Fatalf("stop again after the cut: %v", err)
			}
		default:
			t.Fatalf("after the cut: state %s step %s (failure %v); Stop returned: %v", st, p.Step(), p.Failure(), im.Cut > r.Len())
		}
		checkStopped(t, p, policy, f.firstOpen, f.mirrorEnd)
	})
}
