package partlog

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/crashfs"
)

// TestPowerCutClean: a power cut at any op of a cleaning (the .cleaned
// files written and synced, renamed .swap, the originals renamed
// .deleted, the .swap files made live, each step's directory sync) leaves
// a directory that opens (recovery completes or rolls back the
// replacement) with the same log end, every record it holds at its
// original offset with its original key and value, and the last record
// of every key: the log before the cleaning, the log after it, or a mix of
// whole groups of the two.
func TestPowerCutClean(t *testing.T) {
	_, cuts := powerCutRuns()
	sweep := crashfs.NewSweep(t, 2*cuts)
	defer func() { t.Logf("%d images checked", sweep.Done) }()
	sweep.Loop(1, func(run int) {
		m := crashfs.New(t)
		dir := filepath.Join(m.Dir(), "t-0")
		clock := int64(1_700_000_000_000)
		opts := compactOpts(t, &clock)
		opts.SegmentBytes = 16 << 10
		opts.MappingCache = nil
		l, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 600; i++ {
			psLeader(t, l, kvBatch(t, clock, fmt.Sprintf("k%02d=v%d", i%40, i), fmt.Sprintf("u%d=x", i/4)))
		}
		l.SetHighWatermark(l.LogEndOffset())
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		before := readRecords(t, l)
		want := latest(before)
		original := map[int64]logRecord{}
		for _, r := range before {
			original[r.offset] = r
		}
		end := l.LogEndOffset()
		from, err := m.Settle()
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Compact(time.UnixMilli(clock))
		if err != nil {
			t.Fatal(err)
		}
		if res.Groups < 2 {
			t.Fatalf("the cleaning installed %d groups; the test needs several", res.Groups)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := m.History()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		leftovers := map[string]int{}
		sweep.Run(t, run, r, from, func(img string, im *crashfs.Image) {
			for _, suffix := range []string{".cleaned", ".swap", ".deleted"} {
				if found, _ := filepath.Glob(filepath.Join(img, "t-0", "*"+suffix)); len(found) > 0 {
					leftovers[suffix]++
				}
			}
			o := compactOpts(t, &clock)
			o.SegmentBytes = 16 << 10
			o.MappingCache = nil
			l, err := Open(filepath.Join(img, "t-0"), o)
			if err != nil {
				t.Fatalf("open after a cut at op %d: %v", im.Cut, err)
			}
			defer l.Close()
			if l.LogEndOffset() != end {
				t.Fatalf("log end %d after a cut at op %d, %d before", l.LogEndOffset(), im.Cut, end)
			}
			got := readRecords(t, l)
			for _, r := range got {
				if original[r.offset] != r {
					t.Fatalf("cut at op %d: record %+v, originally %+v", im.Cut, r, original[r.offset])
				}
			}
			if g := latest(got); len(g) != len(want) {
				t.Fatalf("cut at op %d: %d keys, %d before", im.Cut, len(g), len(want))
			} else {
				for k, w := range want {
					if g[k] != w {
						t.Fatalf("cut at op %d: key %s last %+v, want %+v", im.Cut, k, g[k], w)
					}
				}
			}
		})
		// The cuts fell at every step of the replacement.
		for _, suffix := range []string{".cleaned", ".swap", ".deleted"} {
			if leftovers[suffix] == 0 && !t.Failed() {
				t.Errorf("no image held a %s file: the cuts missed a step (%v)", suffix, leftovers)
			}
		}
		t.Logf("images with leftovers: %v", leftovers)
	})
}
