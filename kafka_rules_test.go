package partlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/snapshot"
)

// Tests that pin Kafka's behaviour where the engine used to differ
// (ProducerStateManager, LogSegment, LogLoader, LocalLog,
// LeaderEpochFileCache).

// TestAbortedTransactionsSearchLaterSegments: producer 7's transaction
// at 0..1, producer 8's open at 2, a roll, then 7's ABORT at 3 (indexed
// in the segment at 3). A read-committed fetch of [0, 3) must learn that
// 7's records are aborted, although the segment holding the marker starts
// at the upper bound.
func TestAbortedTransactionsSearchLaterSegments(t *testing.T) {
	l, _ := psNew(t)
	psLeader(t, l, psData(t, 7, 0, 0, 2, true))
	psLeader(t, l, psData(t, 8, 0, 0, 1, true))
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	psCoord(t, l, psMarker(7, 0, false, 0))
	if segs := l.Segments(); !slices.Equal(segs, []int64{0, 3}) {
		t.Fatalf("segments %v, want [0 3]", segs)
	}
	got, err := l.AbortedTransactions(0, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []index.AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 3, LastStableOffset: 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("AbortedTransactions(0, 3) = %+v, want %+v", got, want)
	}
}

// TestRollSnapshotNamedAfterNewSegment: a follower append with a gap
// rolls to a segment whose base offset is above the old log end; Kafka
// updates the map end offset to the new base before the snapshot, so the
// snapshot is named after the new segment, never a stray that the next
// load deletes.
func TestRollSnapshotNamedAfterNewSegment(t *testing.T) {
	l, dir := psNew(t)
	if _, err := l.AppendAsFollower(psAt(0, 0, psData(t, 5, 0, 0, 2, false))); err != nil {
		t.Fatal(err)
	}
	l.appendMu.Lock()
	err := l.rollLocked(100)
	l.appendMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filenames.Make(100, filenames.Snapshot)); err == nil {
		t.Fatal("snapshot in the working directory")
	}
	snaps, err := snapshot.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, f := range snaps {
		offs = append(offs, f.Offset)
	}
	if !slices.Contains(offs, 100) || slices.Contains(offs, 2) {
		t.Fatalf("snapshots %v, want one at the new segment base 100 and none at the old log end 2", offs)
	}
}

// TestCleanOpenTrimsEpochsBelowLogStart: Kafka's load always applies the
// log start offset to the leader-epoch cache (truncateFromStart), clean
// shutdown or not: entries below it collapse into one at the log start.
func TestCleanOpenTrimsEpochsBelowLogStart(t *testing.T) {
	l, dir := psNew(t)
	for e := int32(0); e < 3; e++ {
		if _, err := l.AppendAsFollower(psAt(int64(e)*5, e, makeBatch(t, 5, 10, psTS))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	o := psOpts(t) // clean
	o.LogStartOffset = 7
	l = psOpen(t, dir, o)
	want := []EpochEntry{{Epoch: 1, StartOffset: 7}, {Epoch: 2, StartOffset: 10}}
	if got := l.LeaderEpochs(); !slices.Equal(got, want) {
		t.Fatalf("epochs after a clean open with log start 7: %v, want %v", got, want)
	}
	onDisk, err := checkpoint.ReadLeaderEpochs(filepath.Join(dir, checkpoint.LeaderEpochFile))
	if err != nil || !slices.Equal(onDisk, want) {
		t.Fatalf("leader-epoch-checkpoint %v (%v), want %v", onDisk, err, want)
	}
}

// TestCleanOpenRebuildsMalformedEpochCheckpoint: with the clean-shutdown
// marker, a malformed leader-epoch-checkpoint (here zeros, what a crashed
// filesystem leaves) is rebuilt from the batch headers instead of failing
// Open.
func TestCleanOpenRebuildsMalformedEpochCheckpoint(t *testing.T) {
	l, dir := psNew(t)
	for e := int32(0); e < 2; e++ {
		if _, err := l.AppendAsFollower(psAt(int64(e)*5, e, makeBatch(t, 5, 10, psTS))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, checkpoint.LeaderEpochFile), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	l = psOpen(t, dir, psOpts(t))
	want := []EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 5}}
	if got := l.LeaderEpochs(); !slices.Equal(got, want) {
		t.Fatalf("epochs %v, want %v rebuilt from the headers", got, want)
	}
	if rep := l.RecoveryReport(); rep == nil || rep.Status == "ok" {
		t.Fatalf("report %+v: the rebuild must be reported", rep)
	}
}

// TestReplayRefusalIsOneRule: a batch the producer-state replay refuses
// (here a non-transactional batch of a producer whose transaction is
// open, written behind the Log's back) is skipped and reported by every replay: recovery at open (a
// producer-replay problem) and the rebuild of a later truncation (counted
// in ReplaySkipped); neither fails the log.
func TestReplayRefusalIsOneRule(t *testing.T) {
	l, dir := psNew(t)
	if _, err := l.AppendAsFollower(psAt(0, 0, psData(t, 5, 0, 0, 1, true))); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Behind the Log's back: producer 5, not transactional, at offset 1.
	f, err := os.OpenFile(filepath.Join(dir, "00000000000000000000.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(psAt(1, 0, psData(t, 5, 0, 1, 1, false))); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	l = psOpen(t, dir, psUncleanOpts(t))
	rep := l.RecoveryReport()
	found := false
	for _, p := range rep.Problems {
		found = found || p.Kind == "producer-replay"
	}
	if !found || l.LogEndOffset() != 2 {
		t.Fatalf("open: LEO %d, problems %+v: want the batch kept and a producer-replay problem", l.LogEndOffset(), rep.Problems)
	}
	for i := 0; i < 3; i++ {
		psLeader(t, l, makeBatch(t, 1, 10, psTS))
	}
	// The truncation rebuild starts below the refused batch (no snapshot
	// between 0 and 3 but the one recovery left at the old log end 2,
	// which is above the log start, so remove it to force a replay from 0).
	if err := os.Remove(filepath.Join(dir, filenames.Make(2, filenames.Snapshot))); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(3); err != nil {
		t.Fatalf("TruncateTo over a refused batch: %v", err)
	}
	if n := l.ReplaySkipped(); n != 1 {
		t.Fatalf("ReplaySkipped %d, want 1", n)
	}
	if e, ok := l.ProducerState(5); !ok || e.CurrentTxnFirstOffset != 0 || e.LastOffset != 0 {
		t.Fatalf("producer 5 %+v %v, want its transaction open at 0 (the refused batch skipped)", e, ok)
	}
	psLeader(t, l, makeBatch(t, 1, 10, psTS)) // still writable
}

// TestRefusedAppendWritesNothing: an append refused for an offset range
// that overflows int64 leaves no rolled segment behind; the log stays
// usable and reopens at the same end.
func TestRefusedAppendWritesNothing(t *testing.T) {
	l, _ := psNew(t)
	psLeader(t, l, makeBatch(t, 2, 10, psTS))
	_, err := l.AppendAsFollower(psAt(math.MaxInt64-1, 0, makeBatch(t, 3, 10, psTS)))
	if !errors.Is(err, ErrUnexpectedOffset) {
		t.Fatalf("follower append at MaxInt64-1 with 3 records: %v, want ErrUnexpectedOffset", err)
	}
	if segs := l.Segments(); !slices.Equal(segs, []int64{0}) {
		t.Fatalf("segments %v after a refused append, want [0]", segs)
	}
	psLeader(t, l, makeBatch(t, 1, 10, psTS))
	l = psReopen(t, l)
	if l.LogEndOffset() != 3 || !slices.Equal(l.Segments(), []int64{0}) {
		t.Fatalf("reopened: LEO %d segments %v, want 3 [0]", l.LogEndOffset(), l.Segments())
	}
	psLeader(t, l, makeBatch(t, 1, 10, psTS))
}

// TestSegmentNamedFarBeyondTheData: an empty or garbage segment whose
// name lies far beyond the data must not move the log end offset there.
func TestSegmentNamedFarBeyondTheData(t *testing.T) {
	for name, content := range map[string][]byte{"empty": nil, "garbage": []byte("not a record batch at all, just bytes")} {
		for _, clean := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/clean=%v", name, clean), func(t *testing.T) {
				l, dir := psNew(t)
				psLeader(t, l, makeBatch(t, 2, 10, psTS))
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "09223372036854775807.log"), content, 0o644); err != nil {
					t.Fatal(err)
				}
				o := psOpts(t)
				o.CleanShutdown = clean
				l = psOpen(t, dir, o)
				if l.LogEndOffset() != 2 {
					t.Fatalf("LEO %d, want 2 (the data's end)", l.LogEndOffset())
				}
				rep := l.RecoveryReport()
				if rep == nil || !strings.Contains(rep.Summary(), "09223372036854775807.log") {
					t.Fatalf("report does not name the segment: %v", rep)
				}
				psLeader(t, l, makeBatch(t, 1, 10, psTS))
			})
		}
	}
}

// TestCoordinatorRefusesWhatALeaderRefuses: AppendAsCoordinator takes
// control batches only, and each must have as many records as offsets.
func TestCoordinatorRefusesWhatALeaderRefuses(t *testing.T) {
	l, _ := psNew(t)
	if _, err := l.AppendAsCoordinator(makeBatch(t, 1, 10, psTS), 0); !errors.Is(err, ErrPolicy) {
		t.Fatalf("data batch from a coordinator: %v, want ErrPolicy", err)
	}
	m := edited(psMarker(7, 0, true, 0), func(v batch.View) {
		binary.BigEndian.PutUint32(v[batch.OffLastOffsetDelta:], 2) // 1 record, 3 offsets
	})
	if _, err := batch.Check(m); err != nil {
		t.Fatalf("the crafted marker must pass the batch checks: %v", err)
	}
	if _, err := l.AppendAsCoordinator(m, 0); !errors.Is(err, ErrPolicy) {
		t.Fatalf("marker with 1 record and last offset delta 2: %v, want ErrPolicy", err)
	}
	if l.LogEndOffset() != 0 || !slices.Equal(l.Segments(), []int64{0}) {
		t.Fatalf("a refused append wrote something: LEO %d", l.LogEndOffset())
	}
}
