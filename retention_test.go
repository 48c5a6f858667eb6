package partlog

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/filenames"
)

// retLog builds a log of five segments of four one-record batches (each
// batch ~260 bytes); segment i holds timestamps around base+i*hour.
// Offsets: segment i covers [4i, 4i+4); the active one is the last.
func retLog(t *testing.T, o *Options) (*Log, string, int64) {
	t.Helper()
	l, dir := openTestLog(t, o)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for s := 0; s < 5; s++ {
		if s > 0 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
		for b := 0; b < 4; b++ {
			if _, err := l.AppendAsLeader(makeBatch(t, 1, 200, base+int64(s)*3_600_000+int64(b)), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	return l, dir, base
}

func deletedFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), filenames.Deleted) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestDeleteOldSegments is the rule table of Kafka's deleteOldSegments:
// retention by time and by size, never past the high watermark, only a
// prefix, the active segment only after a roll.
func TestDeleteOldSegments(t *testing.T) {
	const hour = 3_600_000
	for _, c := range []struct {
		name           string
		retentionMs    int64
		retentionBytes int64
		hw             int64
		nowHours       int64 // after the first segment's timestamps
		wantDeleted    int
		wantStart      int64
		wantSegs       int
	}{
		{"nothing old", 10 * hour, 0, 20, 4, 0, 0, 5},
		{"two segments older than retention.ms", 2*hour + hour/2, 0, 20, 4, 2, 8, 3},
		{"high watermark stops it", 2*hour + hour/2, 0, 7, 4, 1, 4, 4},
		{"high watermark inside the first segment", 2*hour + hour/2, 0, 3, 4, 0, 0, 5},
		{"everything old: roll, keep an empty active", hour / 2, 0, 20, 10, 5, 20, 1},
		{"everything old but the active not replicated", hour / 2, 0, 19, 10, 4, 16, 1},
		{"infinite retention.ms", -1, 0, 20, 1000, 0, 0, 5},
		{"retention.bytes: drop while still over", -1, 3 * 1100, 20, 0, 2, 8, 3},
		{"retention.bytes below one segment: the last stays", -1, 1, 20, 0, 4, 16, 1},
		{"retention.bytes not reached", -1, 1 << 30, 20, 0, 0, 0, 5},
		{"both: size first, then time", 3*hour + hour/2, 4 * 1100, 20, 4, 1, 4, 4},
		{"retention.ms Zero: every segment older than now", Zero, 0, 20, 10, 5, 20, 1},
		{"retention.bytes Zero: every segment, the active rolled", -1, Zero, 20, 0, 5, 20, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := smallOpts(t)
			o.RetentionMs, o.RetentionBytes, o.FileDeleteDelayMs = c.retentionMs, c.retentionBytes, -1
			l, dir, base := retLog(t, o)
			if len(l.Segments()) != 5 || l.LogEndOffset() != 20 {
				t.Fatalf("segments %v LEO %d", l.Segments(), l.LogEndOffset())
			}
			segSize := l.Size() / 5
			if c.retentionBytes == 3*1100 || c.retentionBytes == 4*1100 {
				// Express the limits in whole segments of this build.
				o.RetentionBytes = c.retentionBytes / 1100 * segSize
				l.opts.RetentionBytes = o.RetentionBytes
			}
			l.SetHighWatermark(c.hw)
			n, err := l.DeleteOldSegments(time.UnixMilli(base + c.nowHours*hour))
			if err != nil {
				t.Fatal(err)
			}
			if n != c.wantDeleted || l.LogStartOffset() != c.wantStart || len(l.Segments()) != c.wantSegs {
				t.Fatalf("deleted %d, start %d, segments %v; want %d, %d, %d segments", n, l.LogStartOffset(), l.Segments(), c.wantDeleted, c.wantStart, c.wantSegs)
			}
			if l.Segments()[0] > l.LogStartOffset() || l.LogEndOffset() != 20 {
				t.Fatalf("segments %v start %d end %d", l.Segments(), l.LogStartOffset(), l.LogEndOffset())
			}
			if d := deletedFiles(t, dir); len(d) != 0 {
				t.Fatalf("FileDeleteDelayMs < 0 left %v", d)
			}
			for _, seg := range []string{"log", "index", "timeindex"} {
				for i := 0; i < n && i < 5; i++ {
					p := filepath.Join(dir, filenames.Make(int64(4*i), "."+seg))
					if _, err := os.Stat(p); err == nil && int64(4*i) < l.Segments()[0] {
						t.Fatalf("%s still there", p)
					}
				}
			}
			// Appends go on.
			if _, err := l.AppendAsLeader(makeBatch(t, 1, 10, base), 0); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDeleteOldSegmentsAsync: the deleted files stay renamed .deleted
// for FileDeleteDelayMs and are then removed by the shared timer; Close
// removes what is still pending; producer snapshots below the new log
// start go; SegmentInfos and Size describe what is left.
func TestDeleteOldSegmentsAsync(t *testing.T) {
	o := smallOpts(t)
	o.RetentionMs, o.FileDeleteDelayMs = 1, 200
	l, dir, base := retLog(t, o)
	infos, err := l.SegmentInfos()
	if err != nil || len(infos) != 5 {
		t.Fatal(infos, err)
	}
	var total int64
	for i, si := range infos {
		total += si.Size
		if si.BaseOffset != int64(4*i) || si.LastOffset != int64(4*i+3) || si.MaxTimestamp != base+int64(i)*3_600_000+3 || si.Active != (i == 4) || si.LastModified.IsZero() || si.Created.IsZero() {
			t.Fatalf("segment %d: %+v", i, si)
		}
	}
	if total != l.Size() {
		t.Fatalf("Size %d, segments sum %d", l.Size(), total)
	}
	l.SetHighWatermark(10)
	n, err := l.DeleteOldSegments(time.UnixMilli(base + 100*3_600_000))
	if err != nil || n != 2 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	if d := deletedFiles(t, dir); len(d) < 2 {
		t.Fatalf("want the .deleted files during the delay, have %v", d)
	}
	snaps, _ := filepath.Glob(filepath.Join(dir, "*.snapshot"))
	for _, s := range snaps {
		if filepath.Base(s) < filenames.Make(8, ".snapshot") {
			t.Fatalf("snapshot %s below the new log start 8", s)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(deletedFiles(t, dir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if d := deletedFiles(t, dir); len(d) != 0 {
		t.Fatalf("still there after the delay: %v", d)
	}
	// A pending deletion is finished by Close.
	o.FileDeleteDelayMs = 1 << 40
	l.opts.FileDeleteDelayMs = o.FileDeleteDelayMs
	l.SetHighWatermark(20)
	if n, err := l.DeleteOldSegments(time.UnixMilli(base + 100*3_600_000)); err != nil || n != 3 {
		t.Fatalf("deleted %d, %v", n, err)
	}
	if len(deletedFiles(t, dir)) == 0 || l.deletions.pending() != 1 {
		t.Fatalf("want a pending deletion")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if d := deletedFiles(t, dir); len(d) != 0 {
		t.Fatalf("Close left %v", d)
	}
	o.CleanShutdown = true
	o.LogStartOffset = 20
	l2, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.LogStartOffset() != 20 || l2.LogEndOffset() != 20 || !slices.Equal(l2.Segments(), []int64{20}) {
		t.Fatalf("reopened: start %d end %d segments %v", l2.LogStartOffset(), l2.LogEndOffset(), l2.Segments())
	}
}
