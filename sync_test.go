package partlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/testhook"
	"github.com/partlog/partlog/segment"
	"golang.org/x/sys/unix"
)

// TestSyncGroupCommit runs concurrent appenders that each wait for their
// append to be durable, and checks that they share flushes: far fewer
// flushes than appends, every Sync returning only once the recovery point
// covers the caller's offset.
func TestSyncGroupCommit(t *testing.T) {
	opts := smallOpts(t)
	opts.SegmentBytes = 8 << 20
	opts.MaxIndexBytes = 1 << 20
	l, _ := openTestLog(t, opts)
	var flushes atomic.Int64
	l.flushFault = func() error { flushes.Add(1); time.Sleep(2 * time.Millisecond); return nil }
	const writers, each = 16, 20
	// Batches are built here: t.Fatal must not run on other goroutines.
	b := makeBatch(t, 1, 200, 1)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				info, err := l.AppendAsLeader(b, 0)
				if err != nil {
					errs <- err
					return
				}
				if err := l.Sync(context.Background(), info.LastOffset+1); err != nil {
					errs <- err
					return
				}
				if rp := l.RecoveryPoint(); rp <= info.LastOffset {
					errs <- errors.New("Sync returned before the recovery point covered the append")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n := flushes.Load()
	t.Logf("%d appends made durable by %d flushes", writers*each, n)
	if n >= writers*each/2 {
		t.Fatalf("%d flushes for %d appends: flushes are not shared", n, writers*each)
	}
}

// TestSyncFailurePoisons checks that a failed flush reaches every waiter
// and leaves the log refusing writes (never "retry and continue").
func TestSyncFailurePoisons(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	info, err := l.AppendAsLeader(makeBatch(t, 1, 10, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("injected fsync failure")
	release := make(chan struct{})
	l.flushFault = func() error { <-release; return boom }
	const waiters = 8
	results := make(chan error, waiters)
	for i := 0; i < waiters; i++ {
		go func() { results <- l.Sync(context.Background(), info.LastOffset+1) }()
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	for i := 0; i < waiters; i++ {
		if err := <-results; !errors.Is(err, boom) && !errors.Is(err, ErrFailed) {
			t.Fatalf("waiter %d: %v, want the flush failure", i, err)
		}
	}
	l.flushFault = nil
	if _, err := l.AppendAsLeader(makeBatch(t, 1, 10, 1), 0); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after a failed flush: %v, want ErrFailed", err)
	}
	if err := l.Flush(); !errors.Is(err, ErrFailed) {
		t.Fatalf("flush after a failed flush: %v, want ErrFailed", err)
	}
	if l.RecoveryPoint() > info.FirstOffset {
		t.Fatalf("recovery point %d advanced past a failed flush", l.RecoveryPoint())
	}
}

func TestSyncBounds(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	if err := l.Sync(context.Background(), 5); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Sync past the log end: %v", err)
	}
	if err := l.Sync(context.Background(), 0); err != nil {
		t.Fatalf("Sync(0): %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.AppendAsLeader(makeBatch(t, 1, 10, 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sync with a cancelled context: %v", err)
	}
}

// flushRecord is what the flushed hook saw during one Flush.
type flushRecord struct {
	bases  []int64 // segments fsynced, in order
	target int64   // the recovery point the flush would set
}

// recordFlushes installs the flushed hook and returns a function that
// reports (and resets) what the flushes since the last call fsynced.
func recordFlushes(l *Log) func() flushRecord {
	var mu sync.Mutex
	rec := flushRecord{target: -1}
	l.flushed = func(base, target int64) {
		mu.Lock()
		defer mu.Unlock()
		rec.bases = append(rec.bases, base)
		rec.target = target
	}
	return func() flushRecord {
		mu.Lock()
		defer mu.Unlock()
		r := rec
		rec = flushRecord{target: -1}
		return r
	}
}

// TestFlushCoversActiveSegment checks which segments every flush fsyncs:
// the one holding the recovery point up to the active one, never one
// wholly below it. After each roll the new active segment must be among
// them (a flush that fsyncs only the first segment ever loses every
// acknowledged append after the first roll on a power failure).
func TestFlushCoversActiveSegment(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
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
		if p := segment.Path(dir, base, segment.LogSuffix); synced[p] == 0 {
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

// TestSyncCountsWaiters checks the count of callers inside Sync that the
// group-commit tests wait on: while two callers are inside Sync the flush
// sees two syncers, and none are counted once they returned.
func TestSyncCountsWaiters(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	info, err := l.AppendAsLeader(makeBatch(t, 1, 10, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	seen := make(chan int32, 4)
	l.flushFault = func() error {
		seen <- l.writes.syncers.Load()
		<-release
		return nil
	}
	done := make(chan error, 2)
	go func() { done <- l.Sync(context.Background(), info.LastOffset+1) }()
	first := <-seen // the leader is inside its flush
	go func() { done <- l.Sync(context.Background(), info.LastOffset+1) }()
	for deadline := time.Now().Add(10 * time.Second); l.writes.syncers.Load() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("a second caller waiting in Sync is not counted: %d syncers", l.writes.syncers.Load())
		}
	}
	close(release)
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	l.flushFault = nil
	if first != 1 {
		t.Fatalf("the first flush saw %d syncers, want 1", first)
	}
	if n := l.writes.syncers.Load(); n != 0 {
		t.Fatalf("%d syncers counted after every Sync returned", n)
	}
}

// TestSyncWaitersShareFailure: callers that wait for a flush which fails
// get that flush's error, exactly, rather than starting flushes of their
// own on the now failed log.
func TestSyncWaitersShareFailure(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	info, err := l.AppendAsLeader(makeBatch(t, 1, 10, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("injected fsync failure")
	release := make(chan struct{})
	l.flushFault = func() error { <-release; return boom }
	const waiters = 4
	results := make(chan error, waiters)
	for i := 0; i < waiters; i++ {
		go func() { results <- l.Sync(context.Background(), info.LastOffset+1) }()
	}
	// Every caller but the one flushing waits in a group while the first
	// flush is still blocked, so all of them share its result.
	for deadline := time.Now().Add(10 * time.Second); l.commit.parked.Load() < waiters-1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("only %d of %d callers wait in a group", l.commit.parked.Load(), waiters-1)
		}
	}
	close(release)
	for i := 0; i < waiters; i++ {
		if err := <-results; err != boom {
			t.Errorf("waiter %d: %v, want the shared flush's error itself", i, err)
		}
	}
	l.flushFault = nil
}

// TestWritePolicy checks the rules of Options.WritePath: the fixed paths,
// and WriteAuto's pwritev for large appends and for the 1024 appends that
// follow a flush.
func TestWritePolicy(t *testing.T) {
	var w writePolicy
	for _, tc := range []struct {
		path WritePath
		n    int
		want bool
	}{
		{WriteMapped, 1 << 20, false},
		{WritePwrite, 10, true},
		{WriteAuto, 256, false},
		{WriteAuto, writeMinBytes - 1, false},
		{WriteAuto, writeMinBytes, true},
	} {
		if got := w.write(tc.path, tc.n); got != tc.want {
			t.Errorf("%v, %d bytes: pwritev %v, want %v", tc.path, tc.n, got, tc.want)
		}
	}
	w.flushes.Add(1)
	for i := range durableWindow {
		if !w.write(WriteAuto, 256) {
			t.Fatalf("append %d after a flush stores into the mapping", i)
		}
	}
	if w.write(WriteAuto, 256) {
		t.Fatal("still writing with pwritev long after the last flush")
	}
	if w.write(WriteMapped, 256) {
		t.Fatal("WriteMapped used pwritev")
	}
}

// BenchmarkSyncGather compares, in one process, durable 16 KiB appends
// (AppendAsLeader, then Sync of the batch's offset, by W closed-loop
// writers) to logs whose group leaders wait for the released members
// (gather, the default), do so without starting the writeout of the
// members' bytes as they join (nowb: claimWriteback off) or flush at once
// (off), with write+fdatasync per batch
// under one mutex and the disk's limit (one pwrite+fdatasync of W
// batches), interleaved in blocks of block batches per writer and
// rotating the order. It reports each variant's batches/s over the
// mutex's, and for each log its batches, wait and fsync time per flush.
func BenchmarkSyncGather(b *testing.B) {
	src := makeBatch(b, 120, 120, 1)
	for _, writers := range []int{1, 8, 64} {
		for _, block := range []int{2, 16} {
			b.Run(fmt.Sprintf("writers=%d/block=%d", writers, block), func(b *testing.B) {
				benchSyncGather(b, src, writers, block)
			})
		}
	}
}

func benchSyncGather(b *testing.B, src []byte, writers, block int) {
	names := []string{"off", "gather", "nowb", "mutex", "limit"}
	const mutexVariant = 3
	logs := make([]*Log, 3)
	for i := range logs {
		c, err := NewMappingCache(1 << 30)
		if err != nil {
			b.Fatal(err)
		}
		logs[i], _ = openTestLog(b, &Options{MappingCache: c})
	}
	logs[0].commit.gather.off = true
	logs[2].commit.gather.wbOff = true
	dir := b.TempDir()
	open := func(name string) (*os.File, *int64) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = f.Close() })
		return f, new(int64)
	}
	mf, moff := open("mutex")
	lf, loff := open("limit")
	group := bytes.Repeat(src, writers)
	var mu sync.Mutex
	split := func(n int, one func(count int)) {
		var wg sync.WaitGroup
		for w := range writers {
			count := n / writers
			if w < n%writers {
				count++
			}
			wg.Go(func() { one(count) })
		}
		wg.Wait()
	}
	appendSync := func(l *Log, n int) {
		split(n, func(count int) {
			for range count {
				info, err := l.AppendAsLeader(src, 1)
				if err == nil {
					err = l.Sync(context.Background(), info.LastOffset+1)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	variants := []func(n int){
		func(n int) { appendSync(logs[0], n) },
		func(n int) { appendSync(logs[1], n) },
		func(n int) { appendSync(logs[2], n) },
		func(n int) {
			split(n, func(count int) {
				for range count {
					mu.Lock()
					_, err := mf.WriteAt(src, *moff)
					if err == nil {
						err = unix.Fdatasync(int(mf.Fd()))
					}
					*moff += int64(len(src))
					mu.Unlock()
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		},
		func(n int) {
			for n > 0 {
				k := min(n, writers)
				if _, err := lf.WriteAt(group[:k*len(src)], *loff); err != nil {
					b.Fatal(err)
				}
				if err := unix.Fdatasync(int(lf.Fd())); err != nil {
					b.Fatal(err)
				}
				*loff += int64(k * len(src))
				n -= k
			}
		},
	}
	b.SetBytes(int64(len(src)))
	spent := make([]time.Duration, len(variants))
	done := 0
	b.ResetTimer()
	for round := 0; done < b.N; round++ {
		n := min(block*writers, b.N-done)
		for k := range variants {
			m := (round + k) % len(variants)
			start := time.Now()
			variants[m](n)
			spent[m] += time.Since(start)
		}
		done += n
	}
	b.StopTimer()
	mutex := float64(done) / spent[mutexVariant].Seconds()
	for i, l := range logs {
		if w := gatherOf(l); w.flushes > 0 {
			b.ReportMetric(float64(done)/float64(w.flushes), names[i]+"-batches/flush")
			b.ReportMetric(float64(w.waited.Microseconds())/float64(w.flushes), names[i]+"-wait-µs/flush")
			b.ReportMetric(float64(w.fsyncs.Microseconds())/float64(w.flushes), names[i]+"-fsync-µs/flush")
			b.ReportMetric(float64(w.waits)/float64(w.flushes), names[i]+"-waits/flush")
		}
	}
	for m, name := range names {
		rate := float64(done) / spent[m].Seconds()
		if m == mutexVariant {
			b.ReportMetric(rate, "mutex-batches/s")
			continue
		}
		b.ReportMetric(rate/mutex, name+"/mutex")
	}
}
