package partlog

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/recovery"
	"github.com/partlog/partlog/segment"
)

// TestReopenKeepsDamagedFlushedSegment: a reopen (clean or not) of a
// log whose sealed segment below the recovery point has a damaged last
// batch neither cuts it nor drops the later segments (Kafka never scans
// it); the damage is reported (corrupt-flushed).
func TestReopenKeepsDamagedFlushedSegment(t *testing.T) {
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
	p := filenames.Path(dir, segs[1], filenames.Log)
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

// TestDirCreateAfterFailedLoadOwnsItsCheckpoints: a partition that
// failed to load and is opened again with Dir.Create leaves
// Dir.unloaded: its checkpoint entries are the live log's, and Close
// writes the clean-shutdown marker.
func TestDirCreateAfterFailedLoadOwnsItsCheckpoints(t *testing.T) {
	root := t.TempDir()
	d, err := OpenDir(root, dirOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(filepath.Join(root, "bad-0"), smallOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if _, err := l.AppendAsLeader(makeBatch(t, 5, 10, 1000), 0); err != nil {
			t.Fatal(err)
		}
	}
	_ = l.Close()
	_ = d.Close()
	d, err = OpenDir(root, dirOpts(t)) // loads it; checkpoint RP 20
	if err != nil {
		t.Fatal(err)
	}
	_ = d.Close()
	logPath := filepath.Join(root, "bad-0", "00000000000000000000.log")
	st, _ := os.Stat(logPath)
	if err := os.Truncate(logPath, st.Size()-3); err != nil {
		t.Fatal(err)
	}
	o := dirOpts(t)
	o.Log.Strict = true
	d, err = OpenDir(root, o)
	if err != nil {
		t.Fatal(err)
	}
	bad := TopicPartition{Topic: "bad", Partition: 0}
	if _, ok := d.Log(bad); ok {
		t.Fatal("loaded under Strict")
	}
	// The operator recovers it through Create (non-strict options).
	var id TopicID
	id[0] = 1
	l, err = d.Create("bad", 0, id, smallOpts(t))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Logf("after Create: LEO %d RP %d", l.LogEndOffset(), l.RecoveryPoint())
	if err := l.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := l.AppendAsLeader(makeBatch(t, 5, 10, 1000), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	rps, _ := checkpoint.ReadOffsets(filepath.Join(root, checkpoint.RecoveryPointFile))
	t.Logf("live RP %d, LEO %d; checkpoint RP %d", l.RecoveryPoint(), l.LogEndOffset(), rps[bad])
	if rps[bad] != l.RecoveryPoint() {
		t.Errorf("checkpoint RP %d for a live partition whose recovery point is %d (stale entry of the failed load)", rps[bad], l.RecoveryPoint())
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := checkpoint.CleanShutdownExists(filepath.Join(root, checkpoint.CleanShutdownFile)); !ok {
		t.Errorf("no clean-shutdown marker although every partition is loaded and closed cleanly")
	}
}

// TestCorruptLastSegmentBelowPreviousEndOpens: a last segment holding
// only a corrupt batch, named below the previous segment's end, is cut
// to nothing and the log opens at the previous end (adopt accepts its
// recovery's result).
func TestCorruptLastSegmentBelowPreviousEndOpens(t *testing.T) {
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
	if err := os.WriteFile(filenames.Path(dir, 10, filenames.Log), b, 0o644); err != nil {
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

// TestStrictOpensCleanLogWithOffsetGap: a follower log with a legal
// offset gap at a segment boundary (as compaction on the leader leaves)
// opens under Strict after a clean close.
func TestStrictOpensCleanLogWithOffsetGap(t *testing.T) {
	opts := ltOpts(t)
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsFollower(makeFollowerBatch(t, 0, 1, 10, 10, 1_700_000_000_000)); err != nil {
		t.Fatal(err)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsFollower(makeFollowerBatch(t, 100, 1, 10, 10, 1_700_000_000_000)); err != nil {
		t.Fatal(err)
	}
	t.Logf("segs %v LEO %d", l.Segments(), l.LogEndOffset())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	o := *opts
	o.CleanShutdown = true
	o.Strict = true
	l2, err := Open(dir, &o)
	if err != nil {
		t.Fatalf("strict clean reopen of a cleanly closed follower log with a legal gap: %v", err)
	}
	_ = l2.Close()
}

// TestStrictReopensCleanLogs: logs partlog wrote and closed cleanly
// reopen under Strict with the clean-shutdown marker.
func TestStrictReopensCleanLogs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, l *Log)
	}{
		{"plain", func(*testing.T, *Log) {}},
		{"truncation then rolls", func(t *testing.T, l *Log) {
			if err := l.TruncateTo(l.Segments()[1] + 3); err != nil {
				t.Fatal(err)
			}
			ltAppend(t, l, 30, func(int) int32 { return 2 })
		}},
		{"empty active", func(t *testing.T, l *Log) {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}},
		{"log start raised inside a segment", func(t *testing.T, l *Log) {
			if err := l.SetLogStartOffset(l.Segments()[1] + 3); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := ltOpts(t)
			dir := t.TempDir()
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			ltAppend(t, l, 30, func(int) int32 { return 1 })
			tc.setup(t, l)
			lso := l.LogStartOffset()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			o := *opts
			o.CleanShutdown = true
			o.Strict = true
			o.LogStartOffset = lso
			l2, err := Open(dir, &o)
			if err != nil {
				t.Fatalf("strict clean reopen: %v", err)
			}
			_ = l2.Close()
		})
	}
}

// TestGapRollCrashRecovers: a follower roll to a higher base after a
// gap, crashed before the first append reached the file (preallocated
// zeros), recovers to the roll's base.
func TestGapRollCrashRecovers(t *testing.T) {
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
	if err := os.WriteFile(filenames.Path(dir, 1000, filenames.Log), make([]byte, 8<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{filenames.Index, filenames.TimeIndex} {
		_ = os.WriteFile(filenames.Path(dir, 1000, k), make([]byte, 4096), 0o644)
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

// TestRefuseFlushedCutHoldsUnderCleanMarker: RefuseFlushedCut (recover
// without --force) refuses, under the clean-shutdown marker too, a cut
// that would drop flushed segments after damage in a sealed one
// (corrupt-flushed).
func TestRefuseFlushedCutHoldsUnderCleanMarker(t *testing.T) {
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
	p := filenames.Path(dir, segs[1], filenames.Log)
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

// TestHighBaseEmptySegmentKept: an empty segment whose base leaves room
// for batches is kept, even above MaxInt64 - MaxInt32: the log does not
// restart at offset 0.
func TestHighBaseEmptySegmentKept(t *testing.T) {
	opts := ltOpts(t)
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	b := int64(math.MaxInt64 - 1<<20) // room for a million offsets
	if err := l.TruncateFullyAndStartAt(b); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(makeBatch(t, 3, 10, 1_700_000_000_000), 1); err != nil {
		t.Fatalf("append at %d: %v", b, err)
	}
	if err := l.TruncateFullyAndStartAt(b); err != nil { // follower: leader's log start
		t.Fatal(err)
	}
	_ = l.Close()
	o := *opts
	o.CleanShutdown = true // Dir passes no log start: it equals the first segment's base
	l2, err := Open(dir, &o)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	t.Logf("reopened: segs %v LSO %d LEO %d", l2.Segments(), l2.LogStartOffset(), l2.LogEndOffset())
	if l2.LogEndOffset() != b {
		t.Errorf("LEO %d after reopen, want %d: the empty segment at %d was dropped", l2.LogEndOffset(), b, b)
	}
}

// TestAdoptedProducerStateKeepsOptions: the producer state a reopen
// adopts from recovery keeps the log's expiration, map end offset and
// log start, clean or not, strict or not.
func TestAdoptedProducerStateKeepsOptions(t *testing.T) {
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

// TestEpochSpikeDoesNotBlockLeader: a flipped partition leader epoch in
// one batch (outside the CRC: 1, 1, 999, 1) does not keep the leader
// from appending at its real epoch after recovery.
func TestEpochSpikeDoesNotBlockLeader(t *testing.T) {
	opts := ltOpts(t)
	opts.SegmentBytes = 1 << 20
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	var pos []int64
	for i := 0; i < 4; i++ {
		info, err := l.AppendAsLeader(makeBatch(t, 3, 50, 1_700_000_000_000), 1)
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, info.Position)
	}
	_ = l.Close()
	p := filenames.Path(dir, 0, filenames.Log)
	b, _ := os.ReadFile(p)
	batch.View(b[pos[2]:]).SetPartitionLeaderEpoch(999) // not covered by the CRC
	_ = os.WriteFile(p, b, 0o644)

	l2, err := Open(dir, opts) // unclean: recovery from the start
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	t.Logf("LEO %d epochs %v", l2.LogEndOffset(), l2.LeaderEpochs())
	if rep := l2.RecoveryReport(); rep != nil {
		for _, n := range rep.Notes {
			t.Logf("note: %s", n.Detail)
		}
	}
	if _, err := l2.AppendAsLeader(makeBatch(t, 3, 50, 1_700_000_000_000), 2); err != nil {
		t.Errorf("leader append at epoch 2 after recovery: %v", err)
	}
}

// TestSymlinkLogNeverReplaced: a symbolic link named like the first
// segment's .log is ignored (never read, written, renamed or removed),
// and recovery's planned empty segment is not renamed over it.
func TestSymlinkLogNeverReplaced(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "target.log")
	if err := os.WriteFile(outside, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filenames.Path(dir, 0, filenames.Log)
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, ltOpts(t))
	if err == nil {
		_ = l.Close()
		t.Fatal("open succeeded: it had to replace the link to make segment 0")
	}
	if !strings.Contains(err.Error(), "left alone") {
		t.Errorf("open: %v, want it to say the link is left alone", err)
	}
	fi, err := os.Lstat(link)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink reported as ignored was replaced (lstat %v, %v)", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "precious" {
		t.Errorf("outside file changed: %q", b)
	}
}
