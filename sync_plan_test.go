package partlog

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/testhook"
	"github.com/partlog/partlog/segment"
)

// waitParked waits until n callers of l.Sync wait in a group (joined,
// or leading one behind the running flush): callers merely inside Sync
// may not have joined yet, and a flush ending before they do leaves
// them to form a group of their own.
func waitParked(t *testing.T, l *Log, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); l.commit.parked.Load() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d callers wait in a group", l.commit.parked.Load(), n)
		}
	}
}

// blockFirstFlush makes every flush of l return result, the first one
// only once release is closed: entered is closed when it waits (it has
// planned by then), and calls counts the flushes. later, if not nil, runs
// at the start of each later flush, with its number (2, 3, ...).
func blockFirstFlush(l *Log, result error, later func(n int64)) (entered, release chan struct{}, calls *atomic.Int64) {
	entered, release, calls = make(chan struct{}), make(chan struct{}), new(atomic.Int64)
	l.flushFault = func() error {
		if n := calls.Add(1); n == 1 {
			close(entered)
			<-release
		} else if later != nil {
			later(n)
		}
		return result
	}
	return entered, release, calls
}

// syncChecked sends l.Sync(offset)'s result to done, and an error when
// it returned nil before the recovery point reached offset.
func syncChecked(l *Log, offset int64, done chan<- error) {
	err := l.Sync(context.Background(), offset)
	if err == nil && l.RecoveryPoint() < offset {
		err = errors.New("Sync returned before its offset was durable")
	}
	done <- err
}

// appendSyncing appends b as leader and starts a syncChecked of it that
// reports to done.
func appendSyncing(t *testing.T, l *Log, b []byte, done chan<- error) AppendInfo {
	t.Helper()
	info, err := l.AppendAsLeader(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	go syncChecked(l, info.LastOffset+1, done)
	return info
}

// waitDone waits for n results on done and fails the test on the
// first error.
func waitDone(t *testing.T, done <-chan error, n int) {
	t.Helper()
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// gatherLog opens a test log whose gathering wait is bounded by bound
// (0: the last flush's fsync time, as outside tests) and appends one
// batch b to it; first is that append.
func gatherLog(t *testing.T, bound time.Duration) (l *Log, b []byte, first AppendInfo) {
	t.Helper()
	l, _ = openTestLog(t, smallOpts(t))
	l.commit.gather.bound = bound
	b = makeBatch(t, 1, 50, 1)
	first, err := l.AppendAsLeader(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	return l, b, first
}

// gatherOf returns a copy of l's gathering state, read under syncMu.
func gatherOf(l *Log) syncGather {
	l.commit.mu.Lock()
	defer l.commit.mu.Unlock()
	return l.commit.gather
}

// TestSyncNextFlushPlannedAhead: the flush of the group that gathered
// behind a running flush is planned by that flush as it ends, so its
// fdatasync starts while an appender holds appendMu (at 64 writers the
// members the first flush released queue on it). It covers every member
// of the group, and a member's Sync returns only once its offset is
// durable.
func TestSyncNextFlushPlannedAhead(t *testing.T) {
	l, dir := openTestLog(t, smallOpts(t))
	b := makeBatch(t, 1, 50, 1)
	first, err := l.AppendAsLeader(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan struct{})
	entered, release, calls := blockFirstFlush(l, nil, func(n int64) {
		if n == 2 {
			close(second)
		}
	})
	// When the first flush ends (under appendMu), an appender queues on
	// appendMu and holds it once it has it.
	held := make(chan struct{})
	unhold := make(chan struct{})
	var unholdOnce sync.Once
	release2 := func() { unholdOnce.Do(func() { close(unhold) }) }
	t.Cleanup(release2) // before the log's Close, which needs appendMu
	var once sync.Once
	hook := func(d string) {
		if d != dir {
			return
		}
		once.Do(func() {
			go func() {
				l.appendMu.Lock()
				close(held)
				<-unhold
				l.appendMu.Unlock()
			}()
			// Let it queue on appendMu (held here), so that it takes the
			// lock as soon as this flush lets go.
			time.Sleep(20 * time.Millisecond)
		})
	}
	if !testhook.LogFlushed.CompareAndSwap(nil, &hook) {
		t.Fatal("testhook.LogFlushed is already set")
	}
	t.Cleanup(func() { testhook.LogFlushed.Store(nil) })

	done := make(chan error, 3)
	go func() { done <- l.Sync(context.Background(), first.LastOffset+1) }()
	<-entered
	var infos []AppendInfo
	for range 2 {
		infos = append(infos, appendSyncing(t, l, b, done))
	}
	waitParked(t, l, 2)
	close(release)
	<-held
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		release2()
		t.Fatal("the next group's flush waited for the append lock before its fdatasync")
	}
	// (Under load the second flush may take appendMu after its fdatasync
	// before the holder above does, and end: the recovery point is not
	// checked here.)
	release2()
	waitDone(t, done, 3)
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d flushes for two groups", n)
	}
	if rp, want := l.RecoveryPoint(), infos[1].LastOffset+1; rp != want {
		t.Fatalf("recovery point %d, want %d", rp, want)
	}
	l.flushFault = nil
}

// TestSyncGroupBehindFailedFlush: the group gathering behind a flush
// that fails gets that flush's error itself (it does not flush the
// poisoned log, and does not hang), a later Sync fails with ErrFailed,
// and every group is free afterwards.
func TestSyncGroupBehindFailedFlush(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	b := makeBatch(t, 1, 50, 1)
	first, err := l.AppendAsLeader(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("injected fsync failure")
	entered, release, calls := blockFirstFlush(l, boom, nil)
	done := make(chan error, 4)
	go func() { done <- l.Sync(context.Background(), first.LastOffset+1) }()
	<-entered
	last := first
	for range 3 {
		if last, err = l.AppendAsLeader(b, 0); err != nil {
			t.Fatal(err)
		}
		go func(off int64) { done <- l.Sync(context.Background(), off) }(last.LastOffset + 1)
	}
	waitParked(t, l, 3)
	close(release)
	for i := range 4 {
		select {
		case err := <-done:
			if err != boom {
				t.Errorf("caller %d: %v, want the failed flush's error itself", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a caller behind a failed flush hangs")
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d flushes: the group behind the failure flushed the poisoned log", n)
	}
	if err := l.Sync(context.Background(), last.LastOffset+1); !errors.Is(err, ErrFailed) {
		t.Fatalf("Sync after the failure: %v, want ErrFailed", err)
	}
	if rp := l.RecoveryPoint(); rp > first.FirstOffset {
		t.Fatalf("recovery point %d advanced past a failed flush", rp)
	}
	l.flushFault = nil
	checkGroupsFree(t, l) // the failed flush's group and the one behind it are recycled too
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
	for _, want := range []string{segment.IndexSuffix, segment.TimeIndexSuffix} {
		name := filepath.Base(segment.Path(dir, 0, want))
		if !slices.Contains(synced, name) {
			t.Errorf("the roll did not make %s durable (synced: %v)", name, synced)
		}
	}
}

// TestWritePolicyLoneSyncer: after a flush made for one caller alone in
// Sync, WriteAuto stores appends below loneWriteMinBytes into the mapping
// (one appender syncing each append); after a flush that ended with a
// group gathering behind it, or a plain Flush, it writes them with
// pwritev.
func TestWritePolicyLoneSyncer(t *testing.T) {
	var w writePolicy
	w.flushes.Add(1)
	w.lone.Store(true)
	if w.write(WriteAuto, 1<<10) || w.write(WriteAuto, loneWriteMinBytes-1) {
		t.Error("a lone syncer's small append used pwritev")
	}
	if !w.write(WriteAuto, 16<<10) || !w.write(WriteAuto, writeMinBytes) {
		t.Error("a lone syncer's 16 KiB or larger append stored into the mapping")
	}
	if !w.write(WritePwrite, 256) || w.write(WriteMapped, 1<<20) {
		t.Error("the fixed paths follow the lone rule")
	}
	w.lone.Store(false)
	if !w.write(WriteAuto, 16<<10) {
		t.Error("a shared flush's next append stored into the mapping")
	}

	l, _ := openTestLog(t, smallOpts(t))
	b := makeBatch(t, 1, 50, 1)
	info, err := l.AppendAsLeader(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(context.Background(), info.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	if !l.writes.lone.Load() {
		t.Error("a Sync by one caller alone is not marked lone")
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if l.writes.lone.Load() {
		t.Error("a plain Flush is marked lone")
	}
	// Two callers: the second waits behind the first's flush.
	var loneAtSecond atomic.Bool
	entered, release, calls := blockFirstFlush(l, nil, func(n int64) {
		if n == 2 {
			loneAtSecond.Store(l.writes.lone.Load())
		}
	})
	if info, err = l.AppendAsLeader(b, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- l.Sync(context.Background(), info.LastOffset+1) }()
	<-entered
	if info, err = l.AppendAsLeader(b, 0); err != nil {
		t.Fatal(err)
	}
	go func() { done <- l.Sync(context.Background(), info.LastOffset+1) }()
	waitParked(t, l, 1)
	close(release)
	waitDone(t, done, 2)
	l.flushFault = nil
	if calls.Load() != 2 || loneAtSecond.Load() {
		t.Errorf("%d flushes; the flush that ended with a group behind it marked lone: %v", calls.Load(), loneAtSecond.Load())
	}
}

// TestSyncCoveredByRunningFlush: a caller whose offset the running
// flush's plan already covers waits for that flush (no second flush),
// and returns only once it has ended.
func TestSyncCoveredByRunningFlush(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	b := makeBatch(t, 1, 50, 1)
	first, err := l.AppendAsLeader(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	second, err := l.AppendAsLeader(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	entered, release, calls := blockFirstFlush(l, nil, nil)
	done := make(chan error, 2)
	go func() { done <- l.Sync(context.Background(), first.LastOffset+1) }()
	<-entered // planned up to the log end: both appends
	go syncChecked(l, second.LastOffset+1, done)
	waitParked(t, l, 1)
	select {
	case err := <-done:
		t.Fatalf("a Sync returned while the flush covering it was blocked: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	waitDone(t, done, 2)
	l.flushFault = nil
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d flushes: the covered caller flushed again", n)
	}
}

// TestSyncGroupWaitsForReleased: the group gathering behind a flush
// waits, before its own flush, for the member that flush released to
// append again and join, so one flush covers every writer rather than
// the ones that gathered while the first flush ran (on the code before,
// the returning member's append needed a third flush).
func TestSyncGroupWaitsForReleased(t *testing.T) {
	l, b, first := gatherLog(t, 10*time.Second) // only the member coming back ends the wait
	entered, release, calls := blockFirstFlush(l, nil, nil)
	done := make(chan error, 4)
	go func() {
		if err := l.Sync(context.Background(), first.LastOffset+1); err != nil {
			done <- err
			return
		}
		// Released by the first flush: append again and sync.
		info, err := l.AppendAsLeader(b, 0)
		if err != nil {
			done <- err
			return
		}
		syncChecked(l, info.LastOffset+1, done)
	}()
	<-entered
	for range 3 {
		appendSyncing(t, l, b, done)
	}
	waitParked(t, l, 3)
	close(release)
	waitDone(t, done, 4)
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d flushes, want 2: the second group did not wait for the member the first released", n)
	}
	// The leader waits once, or not at all when the released member was
	// back (had joined) before the leader looked: either way the one
	// flush covered all four.
	if w := gatherOf(l); w.released != 4 || w.waits > 1 {
		t.Fatalf("the last flush released %d members after %d waits, want 4 after at most 1", w.released, w.waits)
	}
	if rp, leo := l.RecoveryPoint(), l.LogEndOffset(); rp != leo {
		t.Fatalf("recovery point %d, log end %d", rp, leo)
	}
}

// TestSyncGroupWaitBounded: a member the last flush released that does
// not come back (a writer that is done) delays the next group's flush by
// at most the bound; the flush covers the others, and the group after
// expects the members that did come.
func TestSyncGroupWaitBounded(t *testing.T) {
	l, b, first := gatherLog(t, 0) // the bound: gatherTooks times the last flush's fsync time
	entered, release, calls := blockFirstFlush(l, nil, nil)
	done := make(chan error, 3)
	go func() { done <- l.Sync(context.Background(), first.LastOffset+1) }()
	<-entered
	for range 2 {
		appendSyncing(t, l, b, done)
	}
	waitParked(t, l, 2)
	close(release)
	waitDone(t, done, 3)
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d flushes, want 2", n)
	}
	if w := gatherOf(l); w.released != 2 {
		t.Fatalf("the last flush released %d members, want 2", w.released)
	}
}

// TestSyncLoneWriterNeverWaits: one writer that syncs each append is back
// as soon as it leads the next group, so its leader never waits for
// anyone (with a bound that long, a wait would show).
func TestSyncLoneWriterNeverWaits(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	l.commit.gather.bound = 10 * time.Second
	b := makeBatch(t, 1, 50, 1)
	for range 10 {
		info, err := l.AppendAsLeader(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Sync(context.Background(), info.LastOffset+1); err != nil {
			t.Fatal(err)
		}
	}
	if w := gatherOf(l); w.flushes != 10 || w.waits != 0 || w.released != 1 {
		t.Fatalf("%d flushes, %d waits, last released %d; want 10, 0, 1", w.flushes, w.waits, w.released)
	}
}

// TestSyncTruncatedDuringGather: a truncation while a group's leader
// waits for the member the last flush released removes the offsets its
// members wait for: they get ErrTruncated, the member that then comes
// back (appending past the truncation) joins and its flush makes it
// durable, and nothing hangs.
func TestSyncTruncatedDuringGather(t *testing.T) {
	l, b, first := gatherLog(t, 10*time.Second) // only the member coming back ends the wait
	entered, release, calls := blockFirstFlush(l, nil, nil)
	firstDone, again, done := make(chan error, 1), make(chan struct{}), make(chan error, 1)
	go func() {
		firstDone <- l.Sync(context.Background(), first.LastOffset+1)
		<-again
		info, err := l.AppendAsLeader(b, 0)
		if err != nil {
			done <- err
			return
		}
		syncChecked(l, info.LastOffset+1, done)
	}()
	<-entered
	cut := make(chan error, 2)
	for range 2 {
		info, err := l.AppendAsLeader(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		go func() { cut <- l.Sync(context.Background(), info.LastOffset+1) }()
	}
	waitParked(t, l, 2)
	close(release)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if gatherOf(l).waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second group's leader does not wait for the released member")
		}
	}
	if err := l.TruncateTo(first.LastOffset + 1); err != nil {
		t.Fatal(err)
	}
	close(again)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-cut; !errors.Is(err, ErrTruncated) {
			t.Fatalf("a member whose offset was truncated got %v, want ErrTruncated", err)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d flushes, want 2", n)
	}
	if rp, leo := l.RecoveryPoint(), l.LogEndOffset(); rp != leo {
		t.Fatalf("recovery point %d, log end %d", rp, leo)
	}
}

// TestClaimWriteback: a member joining a group starts the writeout of the
// bytes appended since the last claim once they reach writebackStep; a
// new active segment (a roll) or a size below the last claim (a
// truncation) starts counting again from 0.
func TestClaimWriteback(t *testing.T) {
	a, b := new(segment.Segment), new(segment.Segment)
	const step = writebackStep
	var w syncGather
	for i, tc := range []struct {
		seg      *segment.Segment
		size     int64
		from, to int64 // from ≥ to: nothing claimed
	}{
		{a, step - 1, 0, 0},
		{a, step, 0, step},
		{a, 2*step - 1, 0, 0},
		{a, 2*step + 5, step, 2*step + 5},
		{b, step / 2, 0, 0}, // rolled: b counts from 0
		{b, step + 1, 0, step + 1},
		{b, 10, 0, 0}, // truncated below the claim
		{b, step, 0, step},
		{nil, 4 * step, 0, 0},
	} {
		from, to := w.claimWriteback(tc.seg, tc.size)
		if from < to != (tc.from < tc.to) || from < to && (from != tc.from || to != tc.to) {
			t.Fatalf("claim %d (size %d): [%d, %d), want [%d, %d)", i, tc.size, from, to, tc.from, tc.to)
		}
	}
	if w.wbStarts != 4 {
		t.Fatalf("%d starts counted, want 4", w.wbStarts)
	}
	// A flush made a durable up to 3 steps: the next claim counts from
	// there; a flush of an older size changes nothing.
	w.flushed(a, 3*step)
	w.flushed(a, step)
	if from, to := w.claimWriteback(a, 4*step-1); from < to {
		t.Fatalf("claimed [%d, %d) of bytes a flush made durable", from, to)
	}
	if from, to := w.claimWriteback(a, 4*step); from != 3*step || to != 4*step {
		t.Fatalf("claimed [%d, %d) after the flush, want [%d, %d)", from, to, 3*step, 4*step)
	}
	w = syncGather{wbOff: true}
	if from, to := w.claimWriteback(a, 10*step); from < to {
		t.Fatalf("claimed [%d, %d) with writeback off", from, to)
	}
}

// TestSyncMembersStartWriteback: members joining a gathering group start
// the writeout of what was appended once it reaches writebackStep, so the
// group's flush has less left to write; every Sync still returns only
// once its offset is durable. Off (the knob), nothing is started.
func TestSyncMembersStartWriteback(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("off=%v", off), func(t *testing.T) {
			opts := smallOpts(t)
			opts.SegmentBytes = 1 << 20
			l, _ := openTestLog(t, opts)
			l.commit.gather.wbOff = off
			b := makeBatch(t, 1, writebackStep/3, 1) // the first batch and 4 members' pass the step
			first, err := l.AppendAsLeader(b, 0)
			if err != nil {
				t.Fatal(err)
			}
			entered, release, _ := blockFirstFlush(l, nil, nil)
			done := make(chan error, 5)
			go syncChecked(l, first.LastOffset+1, done)
			<-entered
			for range 4 {
				appendSyncing(t, l, b, done)
			}
			waitParked(t, l, 4)
			w := gatherOf(l)
			seg, size := l.activeEnd()
			switch {
			case off && w.wbStarts != 0:
				t.Fatalf("%d writeback starts with writeback off", w.wbStarts)
			case !off && (w.wbStarts == 0 || w.wbSeg != seg || w.wbAt < writebackStep || w.wbAt > size):
				t.Fatalf("%d writeback starts, up to %d of %d bytes: the members started none of the %d bytes they appended", w.wbStarts, w.wbAt, size, size)
			}
			close(release)
			waitDone(t, done, 5)
			if rp, leo := l.RecoveryPoint(), l.LogEndOffset(); rp != leo {
				t.Fatalf("recovery point %d, log end %d", rp, leo)
			}
		})
	}
}

// TestGatherDeadline: the wait for the members a flush released outlasts
// that flush's fsync time while they keep coming back at their pace and
// appends run (at 64 writers their appends take longer than the fsync,
// and a member cut out costs a flush of its own), ends a few of their gaps
// after the last one came when they stop, and never passes gatherTooks
// fsync times; with no append running, the wait is the shorter one of
// gatherIdleGaps gaps and gatherIdleTooks fsync times.
func TestGatherDeadline(t *testing.T) {
	at := time.Unix(1000, 0)
	const took = time.Millisecond
	w := syncGather{released: 64, at: at, took: took}
	// 40 of 64 back 1.2 ms after the release, one every 30 µs, appends
	// running: still coming, past one fsync time.
	w.back, w.last = 40, at.Add(1200*time.Microsecond)
	if d := w.deadline(true); !d.After(at.Add(1300 * time.Microsecond)) {
		t.Fatalf("deadline %v after the release while members keep coming, want past 1.3 ms", d.Sub(at))
	}
	// One back after 20 µs, appends running: a first gap is no pace yet
	// to stop at 4 of.
	w.back, w.last = 1, at.Add(20*time.Microsecond)
	if d := w.deadline(true); d.Before(at.Add(300 * time.Microsecond)) {
		t.Fatalf("deadline %v after the release with one member back at 20 µs, want 300 µs or more", d.Sub(at))
	}
	// They stopped coming: the wait ends gatherGaps gaps after the last,
	// gatherIdleGaps when no append runs.
	w.back, w.last = 50, at.Add(500*time.Microsecond)
	if d, want := w.deadline(true), w.last.Add(gatherGaps*10*time.Microsecond); !d.Equal(want) {
		t.Fatalf("deadline %v after the release, want %v", d.Sub(at), want.Sub(at))
	}
	if d, want := w.deadline(false), w.last.Add(gatherIdleGaps*10*time.Microsecond); !d.Equal(want) {
		t.Fatalf("deadline %v after the release with no append running, want %v", d.Sub(at), want.Sub(at))
	}
	// Never past gatherTooks fsync times, gatherIdleTooks when no append
	// runs.
	w.back, w.last = 63, at.Add(3900*time.Microsecond)
	if d, want := w.deadline(true), at.Add(gatherTooks*took); !d.Equal(want) {
		t.Fatalf("deadline %v after the release, want %v", d.Sub(at), want.Sub(at))
	}
	w.last = at.Add(990 * time.Microsecond)
	if d, want := w.deadline(false), at.Add(gatherIdleTooks*took); !d.Equal(want) {
		t.Fatalf("deadline %v after the release with no append running, want %v", d.Sub(at), want.Sub(at))
	}
	// A set bound replaces both.
	w.bound = 10 * time.Second
	if d := w.deadline(true); !d.Equal(at.Add(w.bound)) {
		t.Fatalf("deadline %v with a bound of %v", d.Sub(at), w.bound)
	}
}

// TestGatherWaitsWhileAppending: past the idle deadline (gatherIdleGaps
// gaps after the last member came), a leader does not wait when nobody is
// on the way, and waits on, until the members are back, when an append
// runs (its caller is likely a member still to come) or a member the last
// flush woke has not run yet (still parked).
func TestGatherWaitsWhileAppending(t *testing.T) {
	for _, on := range []string{"", "appending", "parked"} {
		appending := on != ""
		l, _ := openTestLog(t, smallOpts(t))
		g := &syncGroup{members: 1}
		now := time.Now()
		const gap = 5 * time.Millisecond
		l.commit.mu.Lock()
		l.commit.gathering = g
		// One of two back, 5 ms after the release and 25 ms ago: the idle
		// deadline (4 gaps) has passed, the busy one (16) is 55 ms away.
		l.commit.gather.released, l.commit.gather.back, l.commit.gather.took = 2, 1, time.Second
		l.commit.gather.at, l.commit.gather.last = now.Add(-6*gap), now.Add(-5*gap)
		l.commit.mu.Unlock()
		if appending {
			n := &l.commit.appending
			if on == "parked" {
				n = &l.commit.parked
			}
			n.Add(1)
			go func() {
				time.Sleep(gap / 2)
				l.commit.mu.Lock()
				l.commit.arrived() // the second member is back
				l.commit.mu.Unlock()
				n.Add(-1)
			}()
		}
		if n := l.commit.gatherWait(g, true); n != 1 {
			t.Fatalf("gatherWait returned %d members, want 1", n)
		}
		l.commit.mu.Lock()
		waits, back := l.commit.gather.waits, l.commit.gather.back
		l.commit.mu.Unlock()
		if appending && (waits != 1 || back != 2) {
			t.Fatalf("with %s: %d waits, %d back; want a wait until both were back", on, waits, back)
		}
		if !appending && waits != 0 {
			t.Fatalf("with no append running: %d waits past the idle deadline, want 0", waits)
		}
	}
}

// TestAppendCountedWhileSyncing: an append is counted in l.commit.appending (for
// comingBack) from its start, waiting for appendMu included, when a
// caller is in Sync, and not at all otherwise; the count is back to 0
// when it returns either way.
func TestAppendCountedWhileSyncing(t *testing.T) {
	for _, syncing := range []bool{false, true} {
		l, _ := openTestLog(t, smallOpts(t))
		if syncing {
			l.writes.syncers.Add(1) // as a caller inside Sync
		}
		l.appendMu.Lock() // the append waits for it, as behind another one
		done := make(chan error, 1)
		go func() {
			_, err := l.AppendAsLeader(makeBatch(t, 1, 10, 1), 0)
			done <- err
		}()
		want := int64(0)
		if syncing {
			want = 1
			for deadline := time.Now().Add(10 * time.Second); l.commit.appending.Load() != 1; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					l.appendMu.Unlock()
					t.Fatal("an append waiting for appendMu while a caller is in Sync is not counted")
				}
			}
		} else {
			time.Sleep(10 * time.Millisecond) // time for a count to show, if one were made
		}
		if n := l.commit.appending.Load(); n != want {
			l.appendMu.Unlock()
			t.Fatalf("syncing %v: %d appends counted while one waits, want %d", syncing, n, want)
		}
		l.appendMu.Unlock()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := l.commit.appending.Load(); n != 0 {
			t.Fatalf("syncing %v: %d appends counted after it returned", syncing, n)
		}
		if syncing {
			l.writes.syncers.Add(-1)
		}
	}
}
