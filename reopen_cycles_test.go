package partlog

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/recovery"
)

// TestCleanReopenCycles reopens a log cleanly many times (the active
// segment handed over by recovery, its small indexes read and mapped at
// their first change, its .log's length kept until its first growth),
// appending and truncating in between, and checks after each close that
// a full verification of the directory finds nothing to repair and that
// every offset reads back.
func TestCleanReopenCycles(t *testing.T) {
	for _, c := range []struct {
		name     string
		prefault int64
		path     WritePath
		segBytes int64
		perCycle int
	}{
		{"small", -1, WriteAuto, 64 << 10, 1},
		{"mapped-prefault", 1 << 20, WriteMapped, 64 << 10, 1},
		{"pwrite", -1, WritePwrite, 64 << 10, 1},
		{"index-past-a-page-mapped", 1 << 20, WriteMapped, 8 << 20, 120},
		{"index-past-a-page-pwrite", -1, WritePwrite, 8 << 20, 120},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := smallOpts(t)
			opts.PrefaultBytes, opts.WritePath, opts.SegmentBytes = c.prefault, c.path, c.segBytes
			if c.perCycle > 1 {
				opts.MaxIndexBytes = 1 << 20
			}
			cleanReopenCycles(t, opts, c.perCycle)
		})
	}
}

func cleanReopenCycles(t *testing.T, opts *Options, perCycle int) {
	dir := t.TempDir()
	var want int64
	for cycle := 0; cycle < 24; cycle++ {
		o := *opts
		o.CleanShutdown = cycle > 0
		l, err := Open(dir, &o)
		if err != nil {
			t.Fatalf("cycle %d: open: %v", cycle, err)
		}
		if r := l.RecoveryReport(); cycle > 0 && r != nil && (len(r.Problems) > 0 || !onlySnapshotRemovals(r.Changes)) {
			t.Fatalf("cycle %d: clean reopen ran recovery: %s %+v %+v", cycle, l.RecoveryReport().Summary(), l.RecoveryReport().Changes, l.RecoveryReport().Problems)
		}
		if got := l.LogEndOffset(); got != want {
			t.Fatalf("cycle %d: log end %d, want %d", cycle, got, want)
		}
		switch cycle % 4 {
		case 1: // truncate inside the active segment, then append
			if want > 3 {
				want -= 3
				if err := l.TruncateTo(want); err != nil {
					t.Fatalf("cycle %d: truncate: %v", cycle, err)
				}
			}
		case 3: // nothing appended: an idle reopen and close
			if err := l.Close(); err != nil {
				t.Fatalf("cycle %d: close: %v", cycle, err)
			}
			continue
		}
		for i := 0; i < (1+cycle%5)*perCycle; i++ {
			info, err := l.AppendAsFollower(makeFollowerBatch(t, want, 0, 3, 300, 1000+want))
			if err != nil {
				t.Fatalf("cycle %d: append: %v", cycle, err)
			}
			want = info.LastOffset + 1
		}
		if cycle%2 == 0 {
			if err := l.Flush(); err != nil {
				t.Fatalf("cycle %d: flush: %v", cycle, err)
			}
			// A crash now: the files as they are (the page cache is
			// the files), recovered without the clean-shutdown marker.
			crashed := filepath.Join(t.TempDir(), "crashed")
			if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			rep, err := recovery.Run(crashed, recovery.Options{RecoveryPoint: l.recoveryPoint.Load(), Segment: (&Log{opts: o.withDefaults()}).segConfig()})
			if err != nil {
				t.Fatalf("cycle %d: crash recovery: %v", cycle, err)
			}
			if rep.LogEndOffset != want {
				t.Fatalf("cycle %d: crash recovery: leo %d want %d (%s)", cycle, rep.LogEndOffset, want, rep.Summary())
			}
		}
		if err := l.Close(); err != nil {
			t.Fatalf("cycle %d: close: %v", cycle, err)
		}
		rep, err := recovery.Run(dir, recovery.Options{Full: true, DryRun: true, Segment: (&Log{opts: o.withDefaults()}).segConfig()})
		if err != nil {
			t.Fatalf("cycle %d: verify: %v", cycle, err)
		}
		if len(rep.Problems) > 0 || rep.LogEndOffset != want {
			t.Fatalf("cycle %d: full verification: leo %d want %d, problems %+v", cycle, rep.LogEndOffset, want, rep.Problems)
		}
	}
}
