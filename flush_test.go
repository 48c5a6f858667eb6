package partlog

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/testhook"
)

// TestFlushCoversActiveSegment checks which segments every flush fsyncs:
// the one holding the recovery point up to the active one, never one
// wholly below it. After each roll the new active segment must be among
// them (a flush that fsyncs only the first segment ever loses every
// acknowledged append after the first roll on a power failure).
func TestFlushCoversActiveSegment(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	holdRollFlush(l) // the explicit flush is under test
	took := recordFlushes(l)
	b := makeBatch(t, 2, 100, 1)
	for round := 0; round < 4; round++ {
		for i := 0; i < 3; i++ {
			if _, err := l.AppendAsLeader(b, 0); err != nil {
				t.Fatal(err)
			}
		}
		segs := l.Segments()
		rp, leo := l.RecoveryPoint(), l.LogEndOffset()
		// Expected: from the last segment whose base is ≤ rp on.
		first := 0
		for i, base := range segs {
			if base <= rp {
				first = i
			}
		}
		want := segs[first:]
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		got := took()
		if !slices.Equal(got.bases, want) {
			t.Fatalf("round %d: flush fsynced segments %v, want %v (segments %v, recovery point %d)", round, got.bases, want, segs, rp)
		}
		if got.target != leo || l.RecoveryPoint() != leo {
			t.Fatalf("round %d: flush target %d, recovery point %d, want the log end %d", round, got.target, l.RecoveryPoint(), leo)
		}
		// A flush with nothing new still covers the active segment.
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := took(); !slices.Equal(got.bases, segs[len(segs)-1:]) {
			t.Fatalf("round %d: idle flush fsynced %v, want only the active segment %d", round, got.bases, segs[len(segs)-1])
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	// Rolls with no flush between them: one flush then covers every
	// segment from the one holding the recovery point.
	rp := l.RecoveryPoint()
	for i := 0; i < 3; i++ {
		if _, err := l.AppendAsLeader(b, 0); err != nil {
			t.Fatal(err)
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.AppendAsLeader(b, 0); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	want := slices.DeleteFunc(slices.Clone(segs), func(base int64) bool { return base < rp })
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := took(); !slices.Equal(got.bases, want) || len(want) != 4 {
		t.Fatalf("flush after three rolls fsynced %v, want %v (segments %v, recovery point %d)", got.bases, want, segs, rp)
	}
	if n := len(l.Segments()); n < 7 {
		t.Fatalf("only %d segments: the rolls did not happen", n)
	}
}

// TestFlushRecoveryPointFromStart appends while a flush waits for the
// disk: the recovery point the flush sets is the log end it saw when it
// started, so the appends made meanwhile are not acknowledged durable
// before a later flush covers them.
func TestFlushRecoveryPointFromStart(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	took := recordFlushes(l)
	b := makeBatch(t, 2, 100, 1)
	if _, err := l.AppendAsLeader(b, 0); err != nil {
		t.Fatal(err)
	}
	startLEO := l.LogEndOffset()
	var during AppendInfo
	var appendErr error
	l.flushFault = func() error {
		// The flush has picked its segments and released appendMu: this
		// append lands in the page cache only.
		during, appendErr = l.AppendAsLeader(b, 0)
		return nil
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.flushFault = nil
	if appendErr != nil {
		t.Fatal(appendErr)
	}
	if got := took(); got.target != startLEO {
		t.Fatalf("flush target %d, want the log end at its start %d", got.target, startLEO)
	}
	if rp := l.RecoveryPoint(); rp != startLEO {
		t.Fatalf("recovery point %d after the flush, want %d: the append at %d made during the fsync is claimed durable", rp, startLEO, during.FirstOffset)
	}
	// Sync of the later append must flush again.
	if err := l.Sync(context.Background(), during.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	if got := took(); got.target != during.LastOffset+1 || len(got.bases) == 0 {
		t.Fatalf("Sync after the flush: %+v, want a flush to %d", got, during.LastOffset+1)
	}
}

// TestFlushErrorDuringTruncation: an fsync error while a truncation runs
// beside the flush still poisons the log (a failed fsync is never
// retried: the kernel may have dropped the pages), while a segment that
// the truncation closed under the flush (ErrClosed) is not an error.
func TestFlushErrorDuringTruncation(t *testing.T) {
	t.Run("fsync error", func(t *testing.T) {
		l, _ := openTestLog(t, smallOpts(t))
		holdRollFlush(l) // the explicit flush is under test
		b := makeBatch(t, 2, 100, 1)
		var cut int64
		for i := 0; i < 4; i++ {
			info, err := l.AppendAsLeader(b, 0)
			if err != nil {
				t.Fatal(err)
			}
			if i == 2 {
				cut = info.FirstOffset
			}
		}
		boom := errors.New("injected fsync failure")
		var truncErr error
		l.flushFault = func() error {
			truncErr = l.TruncateTo(cut)
			return boom
		}
		err := l.Flush()
		l.flushFault = nil
		if truncErr != nil {
			t.Fatalf("truncation beside the flush: %v", truncErr)
		}
		if !errors.Is(err, boom) {
			t.Fatalf("flush with an fsync error beside a truncation: %v, want the fsync error", err)
		}
		if _, err := l.AppendAsLeader(b, 0); !errors.Is(err, ErrFailed) {
			t.Fatalf("append after the failed flush: %v, want ErrFailed", err)
		}
		if err := l.Sync(context.Background(), l.LogEndOffset()); !errors.Is(err, ErrFailed) && l.RecoveryPoint() >= l.LogEndOffset() {
			t.Fatalf("Sync after the failed flush: %v (recovery point %d): the failed fsync was retried", err, l.RecoveryPoint())
		}
		if rp := l.RecoveryPoint(); rp > cut {
			t.Fatalf("recovery point %d past the truncation at %d", rp, cut)
		}
	})
	t.Run("segment closed by the truncation", func(t *testing.T) {
		l, _ := openTestLog(t, smallOpts(t))
		holdRollFlush(l) // the explicit flush is under test
		b := makeBatch(t, 2, 100, 1)
		if _, err := l.AppendAsLeader(b, 0); err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		cut := l.LogEndOffset()
		for i := 0; i < 2; i++ {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
			if _, err := l.AppendAsLeader(b, 0); err != nil {
				t.Fatal(err)
			}
		}
		last := l.Segments()[len(l.Segments())-1]
		took := recordFlushes(l)
		var truncErr error
		l.flushFault = func() error {
			// Deletes (and closes) the active segment the flush picked.
			truncErr = l.TruncateTo(cut)
			if segs := l.Segments(); slices.Contains(segs, last) {
				t.Errorf("segments %v after truncating to %d: the segment at %d was not removed", segs, cut, last)
			}
			return nil
		}
		err := l.Flush()
		l.flushFault = nil
		if truncErr != nil {
			t.Fatal(truncErr)
		}
		if got := took(); !slices.Contains(got.bases, last) {
			t.Fatalf("flush fsynced %v, want the removed segment at %d among them", got.bases, last)
		}
		if err != nil {
			t.Fatalf("flush of a segment the truncation closed: %v, want nil", err)
		}
		if rp := l.RecoveryPoint(); rp > cut {
			t.Fatalf("recovery point %d past the truncation at %d", rp, cut)
		}
		if _, err := l.AppendAsLeader(b, 0); err != nil {
			t.Fatalf("append after the flush: %v", err)
		}
		if err := l.Sync(context.Background(), l.LogEndOffset()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFlushFsyncsListedSegments checks that a flush really fsyncs the
// .log of every segment it lists (sealed ones through their file, the
// active one through its mapping), seen through testhook.Synced: the
// flushed hook alone would not notice a flush that lists a segment and
// then skips its fsync.
func TestFlushFsyncsListedSegments(t *testing.T) {
	l, dir := openTestLog(t, smallOpts(t))
	var mu sync.Mutex
	synced := map[string]int{}
	hook := func(path string) {
		mu.Lock()
		defer mu.Unlock()
		synced[path]++
	}
	if !testhook.Synced.CompareAndSwap(nil, &hook) {
		t.Fatal("testhook.Synced is already set")
	}
	t.Cleanup(func() { testhook.Synced.Store(nil) })
	holdRollFlush(l) // the explicit flush is under test
	took := recordFlushes(l)
	b := makeBatch(t, 2, 100, 1)
	for i := 0; i < 3; i++ {
		if _, err := l.AppendAsLeader(b, 0); err != nil {
			t.Fatal(err)
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.AppendAsLeader(b, 0); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	clear(synced)
	mu.Unlock()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	got := took()
	if len(got.bases) != 4 {
		t.Fatalf("flush listed segments %v, want the 4 above the recovery point", got.bases)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, base := range got.bases {
		if p := filenames.Path(dir, base, filenames.Log); synced[p] == 0 {
			t.Errorf("segment %d listed by the flush but its .log was not fsynced (synced: %v)", base, synced)
		}
	}
	if synced[filepath.Clean(dir)] == 0 {
		t.Errorf("the flush after rolls did not fsync the directory (synced: %v)", synced)
	}
	// No segment created since: the next flush costs no directory fsync.
	clear(synced)
	mu.Unlock()
	if _, err := l.AppendAsLeader(b, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if synced[filepath.Clean(dir)] != 0 {
		t.Errorf("a flush with no new segment fsynced the directory again")
	}
}

// TestSyncLeavesActiveIndexes: a Sync fdatasyncs the active segment's
// .log, never its offset or time index (recovery rebuilds them from the
// recovery point); a roll makes the sealed segment's indexes durable.
func TestSyncLeavesActiveIndexes(t *testing.T) {
	l, dir := openTestLog(t, smallOpts(t))
	var mu sync.Mutex
	var synced []string
	hook := func(path string) {
		mu.Lock()
		defer mu.Unlock()
		synced = append(synced, filepath.Base(path))
	}
	if !testhook.Synced.CompareAndSwap(nil, &hook) {
		t.Fatal("testhook.Synced is already set")
	}
	t.Cleanup(func() { testhook.Synced.Store(nil) })
	b := makeBatch(t, 4, 200, 1) // > IndexIntervalBytes: every append adds entries
	for range 6 {
		info, err := l.AppendAsLeader(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Sync(context.Background(), info.LastOffset+1); err != nil {
			t.Fatal(err)
		}
	}
	if e, err := l.active().LastEntryOffset(); err != nil || e.Offset == 0 {
		t.Fatalf("the appends made no index entries (%v, %v): the test proves nothing", e, err)
	}
	mu.Lock()
	logSyncs := 0
	for _, p := range synced {
		switch {
		case strings.HasSuffix(p, ".index"), strings.HasSuffix(p, ".timeindex"):
			t.Errorf("Sync fdatasynced the active segment's %s", p)
		case strings.HasSuffix(p, ".log"):
			logSyncs++
		}
	}
	synced = synced[:0]
	mu.Unlock()
	if logSyncs < 6 {
		t.Fatalf("%d .log fdatasyncs for 6 Syncs", logSyncs)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{filenames.Index, filenames.TimeIndex} {
		name := filepath.Base(filenames.Path(dir, 0, want))
		if !slices.Contains(synced, name) {
			t.Errorf("the roll did not make %s durable (synced: %v)", name, synced)
		}
	}
}

// syncedPaths records the paths testhook.Synced reports until the test
// ends; the function returned takes (and resets) the record.
func syncedPaths(t *testing.T) func() map[string]int {
	var mu sync.Mutex
	synced := map[string]int{}
	hook := func(path string) {
		mu.Lock()
		defer mu.Unlock()
		synced[path]++
	}
	if !testhook.Synced.CompareAndSwap(nil, &hook) {
		t.Fatal("testhook.Synced is already set")
	}
	t.Cleanup(func() { testhook.Synced.Store(nil) })
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := synced
		synced = map[string]int{}
		return out
	}
}

// TestRollSyncsTrimBelowRecoveryPoint: a roll when every byte is durable
// (the recovery point at the log end) fsyncs the sealed .log at once, so
// its trim is durable before the new segment can be: no flush would sync
// it again (it lies below the recovery point), and recovery trusts it as
// it is on disk, zero tail included. With bytes not yet durable the
// roll syncs nothing (the next flush covers the sealed segment, which
// holds or follows the recovery point) and the next flush does.
func TestRollSyncsTrimBelowRecoveryPoint(t *testing.T) {
	l, dir := openTestLog(t, smallOpts(t))
	took := syncedPaths(t)
	b := makeBatch(t, 2, 100, 1)
	if _, err := l.AppendAsLeader(b, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	first := l.Segments()[0]
	took()
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if got := took(); got[filenames.Path(dir, first, filenames.Log)] == 0 {
		t.Errorf("a roll with everything durable did not fsync the sealed segment's trim (synced %v)", got)
	}
	if _, err := l.AppendAsLeader(b, 0); err != nil {
		t.Fatal(err)
	}
	second := l.Segments()[1]
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if got := took(); got[filenames.Path(dir, second, filenames.Log)] != 0 {
		t.Errorf("a roll over bytes not yet durable fsynced the sealed segment on the append path (synced %v)", got)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := took(); got[filenames.Path(dir, second, filenames.Log)] == 0 {
		t.Errorf("the flush after the roll did not fsync the sealed segment (synced %v)", got)
	}
}

// TestFlushSyncsSealedTransactionIndex: an ABORT's .txnindex entry
// written in the active segment and sealed by a roll before any flush is
// synced by the next flush, which syncs that sealed segment: once the
// recovery point passes it, recovery no longer rebuilds the index, and
// read_committed consumers would see the aborted records.
func TestFlushSyncsSealedTransactionIndex(t *testing.T) {
	l, dir := psNew(t)
	took := syncedPaths(t)
	psLeader(t, l, psData(t, 7, 0, 0, 2, true))
	psCoord(t, l, psMarker(7, 0, false, 0))
	first := l.Segments()[0]
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	took()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	txn := filenames.Path(dir, first, filenames.TxnIndex)
	if got := took(); got[txn] == 0 {
		t.Errorf("the flush after the roll did not fsync the sealed segment's transaction index (synced %v)", got)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := took(); got[txn] != 0 {
		t.Errorf("a flush fsynced the unchanged transaction index again (synced %v)", got)
	}
}

// TestRollAfterFlushedDirectoryIsSyncedNext: a segment made after a
// flush synced the directory, before that flush ends, is the next
// flush's to sync: the flush must not mark the directory clean when the
// active segment changed since its plan. Here the roll writes no
// producer snapshot (one at the same offset was written by the
// truncation just before), which would have synced the directory too.
func TestRollAfterFlushedDirectoryIsSyncedNext(t *testing.T) {
	l, dir := openTestLog(t, smallOpts(t))
	took := syncedPaths(t)
	b := makeBatch(t, 2, 100, 1)
	for range 3 {
		if _, err := l.AppendAsLeader(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(4); err != nil { // the directory is dirty again
		t.Fatal(err)
	}
	rolled := false
	l.flushed = func(base, _ int64) {
		if base >= 0 || rolled {
			return
		}
		rolled = true
		if err := l.Roll(); err != nil {
			t.Errorf("roll after the flush's directory fsync: %v", err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.flushed = nil
	if !rolled || len(l.Segments()) != 2 {
		t.Fatalf("no roll during the flush (segments %v)", l.Segments())
	}
	took()
	info, err := l.AppendAsLeader(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(context.Background(), info.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	if got := took(); got[filepath.Clean(dir)] == 0 {
		t.Errorf("the Sync of a batch in the segment made after the last directory fsync did not fsync the directory (synced %v)", got)
	}
}

// TestRollDuringFlushSyncsTrim: a roll after a flush synced the active
// segment, with no append since the flush's plan: the recovery point the
// flush sets is the new segment's base, wholly past the sealed segment,
// so no later flush syncs that segment, yet its trim (the file length)
// came after the flush's fdatasync. The flush syncs it again before it
// moves the recovery point; otherwise a cut leaves the preallocated zero
// tail below the recovery point, where recovery trusts what it finds.
func TestRollDuringFlushSyncsTrim(t *testing.T) {
	l, dir := openTestLog(t, smallOpts(t))
	took := syncedPaths(t)
	b := makeBatch(t, 2, 100, 1)
	for range 3 {
		if _, err := l.AppendAsLeader(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateTo(4); err != nil { // the directory is dirty again
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(b, 0); err != nil { // above the recovery point
		t.Fatal(err)
	}
	first := l.Segments()[0]
	rolled := false
	l.flushed = func(base, _ int64) {
		if base >= 0 || rolled {
			return // roll after the directory's fsync, the flush's last
		}
		rolled = true
		if err := l.Roll(); err != nil {
			t.Errorf("roll after the flush's fsyncs: %v", err)
		}
		took()
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.flushed = nil
	if !rolled || len(l.Segments()) != 2 {
		t.Fatalf("no roll during the flush (segments %v)", l.Segments())
	}
	if rp, next := l.RecoveryPoint(), l.Segments()[1]; rp != next {
		t.Fatalf("recovery point %d, want the new segment's base %d", rp, next)
	}
	if got := took(); got[filenames.Path(dir, first, filenames.Log)] == 0 {
		t.Errorf("the flush set the recovery point past a segment sealed after its sync without syncing its trim (synced %v)", got)
	}
}

// holdRollFlush keeps rolls from starting their background flush (as
// Close does), for tests of what an explicit flush syncs. Call it before
// the first roll.
func holdRollFlush(l *Log) {
	l.appendMu.Lock()
	l.rollFlush.stopped = true
	l.appendMu.Unlock()
}

// waitRollFlush waits for the roll flush that is running, if any. The
// caller is the only appender, so no roll starts one meanwhile.
func waitRollFlush(l *Log) { l.rollFlush.done.Wait() }
