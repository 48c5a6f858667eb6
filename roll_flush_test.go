package partlog

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/crashfs"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/testhook"
)

// waitRecoveryPoint waits until the log's recovery point reaches want;
// a roll's flush runs in the background. The deadline only bounds a
// failing test.
func waitRecoveryPoint(t *testing.T, l *Log, want int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for l.RecoveryPoint() < want {
		if time.Now().After(deadline) {
			t.Fatalf("recovery point %d, want %d: the rolls' flush did not move it", l.RecoveryPoint(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// openRolling opens a log of 4 KiB segments, which rolls every few
// appends.
func openRolling(t *testing.T) (*Log, string) {
	o := smallOpts(t)
	o.SegmentBytes = 4 << 10
	return openTestLog(t, o)
}

// appendUntilSegments appends 2-record batches until l has n segments.
func appendUntilSegments(t *testing.T, l *Log, n int) error {
	b := makeBatch(t, 2, 200, 1000)
	for len(l.Segments()) < n {
		if _, err := l.AppendAsLeader(b, 0); err != nil {
			return err
		}
	}
	return nil
}

// TestRollFlushesSealedSegments: a roll makes what it sealed durable
// and moves the recovery point to the new segment's base without an
// explicit Flush, as Kafka's roll does (flushUptoOffsetExclusive of the
// new base): the sealed segments' .log files and the directory (which
// gained the new segment) are fsynced; the active segment is not.
func TestRollFlushesSealedSegments(t *testing.T) {
	l, dir := openRolling(t)
	synced := syncedPaths(t)
	if err := appendUntilSegments(t, l, 4); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	active := segs[len(segs)-1]
	waitRecoveryPoint(t, l, active)
	waitRollFlush(l)
	if rp := l.RecoveryPoint(); rp != active {
		t.Fatalf("recovery point %d after the rolls, want the active segment's base %d", rp, active)
	}
	got := synced()
	for _, base := range segs[:len(segs)-1] {
		if got[filenames.Path(dir, base, filenames.Log)] == 0 {
			t.Errorf("sealed segment %d was not fsynced by the roll (synced: %v)", base, got)
		}
	}
	if got[filenames.Path(dir, active, filenames.Log)] != 0 {
		t.Errorf("the active segment %d was fsynced by a roll", active)
	}
	if got[filepath.Clean(dir)] == 0 {
		t.Errorf("the directory holding the rolls' new segments was not fsynced (synced: %v)", got)
	}
	// The next explicit flush starts at the active segment.
	took := recordFlushes(l)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := took(); len(got.bases) != 1 || got.bases[0] != active {
		t.Fatalf("flush after the roll flushes listed %v, want only the active segment %d", got.bases, active)
	}
}

// TestCloseWaitsForRollFlush: Close lets no roll flush start and waits
// for the one running before it syncs and closes the segments.
func TestCloseWaitsForRollFlush(t *testing.T) {
	l, _ := openRolling(t)
	l.flushMu.Lock() // the roll flush waits here
	if err := appendUntilSegments(t, l, 2); err != nil {
		l.flushMu.Unlock()
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		l.flushMu.Unlock()
		t.Fatalf("Close returned (%v) while a roll flush was still to run", err)
	case <-time.After(200 * time.Millisecond):
	}
	l.flushMu.Unlock()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if l.rollFlush.running {
		t.Fatalf("a roll flush still runs after Close")
	}
}

// TestRollFlushLeavesWritePath: a roll's flush is not an appender's
// sync, so the write path does not turn to pwritev for the appends after
// it (writePolicy counts only the flushes callers start).
func TestRollFlushLeavesWritePath(t *testing.T) {
	l, _ := openRolling(t)
	if err := appendUntilSegments(t, l, 3); err != nil {
		t.Fatal(err)
	}
	waitRecoveryPoint(t, l, l.Segments()[2])
	waitRollFlush(l)
	if n := l.writes.flushes.Load(); n != 0 {
		t.Fatalf("the roll flushes counted %d flushes for the write path", n)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := l.writes.flushes.Load(); n != 1 {
		t.Fatalf("an explicit flush counted %d, want 1", n)
	}
}

// TestRollFlushFailurePoisons: an fsync failure in a roll's flush
// leaves the log refusing writes, as any flush's does (the kernel may
// already have dropped the pages it could not write), and the recovery
// point stays where it was.
func TestRollFlushFailurePoisons(t *testing.T) {
	l, dir := openRolling(t)
	boom := errors.New("injected fsync failure")
	fault := func(d string) error {
		if d == dir {
			return boom
		}
		return nil
	}
	if !testhook.LogFlushFault.CompareAndSwap(nil, &fault) {
		t.Fatal("testhook.LogFlushFault is already set")
	}
	t.Cleanup(func() { testhook.LogFlushFault.Store(nil) })
	if err := appendUntilSegments(t, l, 2); err != nil {
		t.Fatal(err)
	}
	waitRollFlush(l)
	if _, err := l.AppendAsLeader(makeBatch(t, 2, 200, 1000), 0); !errors.Is(err, ErrFailed) || !errors.Is(err, boom) {
		t.Fatalf("append after a failed roll flush: %v, want ErrFailed wrapping the fsync error", err)
	}
	if rp := l.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d after a failed roll flush, want 0", rp)
	}
}

// TestRollFlushAfterTruncation: a truncation below the rolls' target
// while their flush waits leaves the flush aiming at the new log end, not
// at offsets the log no longer has (it would flush forever).
func TestRollFlushAfterTruncation(t *testing.T) {
	l, _ := openRolling(t)
	l.flushMu.Lock() // the roll flush waits here
	if err := appendUntilSegments(t, l, 3); err != nil {
		l.flushMu.Unlock()
		t.Fatal(err)
	}
	cut := l.Segments()[1] - 1
	err := l.TruncateTo(cut)
	leoAfterCut := l.LogEndOffset()
	for i := 0; i < 3 && err == nil; i++ {
		_, err = l.AppendAsLeader(makeBatch(t, 2, 200, 1000), 0)
	}
	l.flushMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	waitRollFlush(l)
	// The rolls asked for what lay below their new segments; the
	// truncation cut that back. The appends since are no roll's to sync
	// (a target left above them made the flush sync the active segment
	// round after round).
	segs := l.Segments()
	if rp, active := l.RecoveryPoint(), segs[len(segs)-1]; rp > max(leoAfterCut, active) {
		t.Fatalf("recovery point %d after the roll flush, above both the log end %d the truncation left and the active segment's base %d (log end now %d)",
			rp, leoAfterCut, active, l.LogEndOffset())
	}
	if _, err := l.AppendAsLeader(makeBatch(t, 2, 200, 1000), 0); err != nil {
		t.Fatal(err)
	}
}

// TestPowerCutRollFlush: with no Flush or Sync at all, what a roll's
// flush made durable (the recovery point it reported) survives a power
// cut at any later op. Without the roll flush nothing is durable before
// Close, and the test says so.
func TestPowerCutRollFlush(t *testing.T) {
	runs, cuts := powerCutRuns()
	sweep := crashfs.NewSweep(t, cuts)
	sweep.Loop(runs, func(run int) { powerCutRollFlushRun(t, sweep, run) })
	t.Logf("%d images checked", sweep.Done)
}

func powerCutRollFlushRun(t *testing.T, sweep *crashfs.Sweep, run int) {
	m, dir, from := cutPartition(t)
	rng := sweep.Rand(uint64(run))
	opts := crashOptions(nil)
	opts.SegmentBytes = 24 << 10
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	w := newCrashWorkload(l, rng)
	var acks []cutAck
	at, digest := l.LogStartOffset(), uint32(0)
	ackTo := func(off int64) {
		if off <= at {
			return
		}
		var err error
		if digest, err = crashDigest(l, at, off, digest); err != nil {
			t.Fatal(err)
		}
		at = off
		ops, err := m.Ops()
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, cutAck{ackRecord{offset: off, digest: digest, rp: off}, ops})
	}
	for w.bytes < 120<<10 {
		if err := w.step(true); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(8) == 0 {
			if err := m.Writeback(); err != nil {
				t.Fatal(err)
			}
		}
		// Read after the fsyncs it stands for: a cut after these ops
		// keeps everything below it.
		ackTo(l.RecoveryPoint())
	}
	segs := l.Segments()
	waitRecoveryPoint(t, l, segs[len(segs)-1])
	ackTo(l.RecoveryPoint())
	if len(acks) == 0 {
		t.Fatalf("no roll flush moved the recovery point (segments %v)", segs)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkAckedImages(t, sweep, run, m, from, acks, opts.SegmentBytes)
}

// BenchmarkRollFlush: the append path's cost of the roll flush, 1 KiB
// batches into 1 MiB segments (a roll every ~1 000 appends, each starting
// a background fsync of the sealed segment and the directory), against
// the same appends into a log whose roll flush is held as Close holds
// it. The two logs take turns, 1 000 appends each, in one process (the
// machine's drift hits both); roll/held is the time ratio.
func BenchmarkRollFlush(b *testing.B) {
	rec := makeBatch(b, 1, 1024-61-10, 1)
	var logs [2]*Log
	for i := range logs {
		l, err := Open(b.TempDir(), &Options{SegmentBytes: 1 << 20})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		logs[i] = l
	}
	holdRollFlush(logs[1])
	var took [2]time.Duration
	b.SetBytes(int64(len(rec)) * 2 * 1000)
	b.ReportAllocs()
	turn := 0
	for b.Loop() {
		for k := range 2 {
			i := (turn + k) % 2
			start := time.Now()
			for range 1000 {
				if _, err := logs[i].AppendAsLeader(rec, 0); err != nil {
					b.Fatal(err)
				}
			}
			took[i] += time.Since(start)
		}
		turn++
	}
	b.ReportMetric(float64(took[0])/float64(took[1]), "roll/held")
	b.ReportMetric(float64(took[0])/float64(b.N)/1000, "ns/append-roll")
	b.ReportMetric(float64(took[1])/float64(b.N)/1000, "ns/append-held")
}
