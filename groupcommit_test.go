package partlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/testhook"
	"github.com/partlog/partlog/segment"
	"golang.org/x/sys/unix"
)

// fakeCommitEnv is a commitEnv without a log: an end offset the test
// raises, a durable offset its flushes move, and fsyncs that take a
// fixed time and can be made to fail.
type fakeCommitEnv struct {
	flushMu   sync.Mutex
	mu        sync.Mutex // guards end, durable, inFlush, the counts
	end       int64
	durable   atomic.Int64
	fsyncs    int
	inFlush   int
	maxFlush  int
	fail      error
	fsyncTime time.Duration
	lone      atomic.Bool
}

func (e *fakeCommitEnv) durableOffset() int64                 { return e.durable.Load() }
func (e *fakeCommitEnv) truncationGen() uint64                { return 0 }
func (e *fakeCommitEnv) truncatedBelow(uint64, int64) bool    { return false }
func (e *fakeCommitEnv) activeEnd() (*segment.Segment, int64) { return nil, 0 }
func (e *fakeCommitEnv) lockFlush()                           { e.flushMu.Lock() }
func (e *fakeCommitEnv) unlockFlush()                         { e.flushMu.Unlock() }

func (e *fakeCommitEnv) planFlush(p *flushPlan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	p.leo = e.end
	return nil
}

func (e *fakeCommitEnv) fsyncPlan(p *flushPlan) error {
	e.mu.Lock()
	e.fsyncs++
	e.inFlush++
	e.maxFlush = max(e.maxFlush, e.inFlush)
	fail := e.fail
	e.mu.Unlock()
	time.Sleep(e.fsyncTime)
	e.mu.Lock()
	e.inFlush--
	e.mu.Unlock()
	return fail
}

func (e *fakeCommitEnv) finishFlush(p *flushPlan, err error, next *flushPlan, lone bool) (bool, error) {
	e.lone.Store(lone)
	if err != nil {
		return false, err
	}
	if p.leo > e.durable.Load() {
		e.durable.Store(p.leo)
	}
	if next == nil {
		return false, nil
	}
	return e.planFlush(next) == nil, nil
}

func (e *fakeCommitEnv) append() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.end++
	return e.end
}

// TestGroupCommitWithoutLog drives the group commit through its
// environment alone: writers that each append and wait share flushes
// (fewer fsyncs than waits), never run two flushes at once, and each
// returns once the durable offset covers its append; a failed fsync
// reaches the callers it was to cover.
func TestGroupCommitWithoutLog(t *testing.T) {
	var syncers atomic.Int32
	env := &fakeCommitEnv{fsyncTime: time.Millisecond}
	c := &groupCommit{env: env, syncers: &syncers}
	const writers, rounds = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				off := env.append()
				if err := c.wait(context.Background(), off, 0); err != nil {
					errs <- err
					return
				}
				if d := env.durableOffset(); d < off {
					errs <- errors.New("returned before its offset was durable")
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
	if env.fsyncs >= writers*rounds {
		t.Errorf("%d fsyncs for %d waits: no flush was shared", env.fsyncs, writers*rounds)
	}
	if env.maxFlush != 1 {
		t.Errorf("%d flushes ran at once", env.maxFlush)
	}
	if syncers.Load() != 0 || c.running != nil || c.gathering != nil {
		t.Errorf("left behind: %d syncers, running %p, gathering %p", syncers.Load(), c.running, c.gathering)
	}

	boom := errors.New("fsync failed")
	env.mu.Lock()
	env.fail = boom
	env.mu.Unlock()
	if err := c.wait(context.Background(), env.append(), 0); !errors.Is(err, boom) {
		t.Fatalf("wait across a failed fsync: %v, want %v", err, boom)
	}
}

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
		if base < 0 {
			return // the directory's fsync
		}
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

// TestSyncGroupsRecycledUnderLoad: writers that append and sync, some
// with contexts that end at random moments (a waiter leaving just as its
// flush ends, or while its group gathers), while groups are recycled:
// every nil return has its offset durable, nothing hangs, and once all
// returned every group is free with no reference and empty slots.
func TestSyncGroupsRecycledUnderLoad(t *testing.T) {
	opts := smallOpts(t)
	opts.SegmentBytes = 8 << 20
	opts.MaxIndexBytes = 1 << 20
	l, _ := openTestLog(t, opts)
	b := makeBatch(t, 1, 200, 1)
	const writers, each = 12, 60
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range each {
				info, err := l.AppendAsLeader(b, 0)
				if err != nil {
					errs <- err
					return
				}
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if w%3 != 0 {
					ctx, cancel = context.WithTimeout(context.Background(), time.Duration(r.IntN(300))*time.Microsecond)
				}
				err = l.Sync(ctx, info.LastOffset+1)
				cancel()
				switch {
				case err == nil && l.RecoveryPoint() <= info.LastOffset:
					errs <- errors.New("Sync returned before its offset was durable")
					return
				case err != nil && !errors.Is(err, context.DeadlineExceeded):
					errs <- err
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Sync callers hang")
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkGroupsFree(t, l)
}

// checkGroupsFree checks, once every Sync returned, that no group is in
// use and that the free ones hold no reference and no pending wake-up.
func checkGroupsFree(t *testing.T, l *Log) {
	t.Helper()
	l.commit.mu.Lock()
	defer l.commit.mu.Unlock()
	if l.commit.running != nil || l.commit.gathering != nil {
		t.Fatalf("groups still in use after every Sync returned: %p %p", l.commit.running, l.commit.gathering)
	}
	n := 0
	for g := l.commit.free; g != nil; g = g.free {
		n++
		if r := g.refs.Load(); r != 0 || g.waits != 0 || g.finished || g.prev != nil {
			t.Fatalf("free group with %d references, %d waits, finished %v", r, g.waits, g.finished)
		}
		for i, s := range g.slots {
			if len(s.ch) != 0 {
				t.Fatalf("free group's slot %d holds a wake-up", i)
			}
		}
		if g.ready != nil && len(g.ready) != 0 {
			t.Fatal("free group's ready holds a wake-up")
		}
	}
	if n == 0 {
		t.Fatal("no group was recycled")
	}
}

// TestSyncWaiterLeavesAsFlushEnds: a waiter whose context ends while the
// flush it waits for is blocked gets the context's error and leaves its
// slot; the flush's end then skips the slot, the others get their result,
// and the group is reused by later Syncs with no wake-up left in it.
func TestSyncWaiterLeavesAsFlushEnds(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	b := makeBatch(t, 1, 50, 1)
	first, err := l.AppendAsLeader(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	entered, release, _ := blockFirstFlush(l, nil, nil)
	done := make(chan error, 4)
	go syncChecked(l, first.LastOffset+1, done)
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	info, err := l.AppendAsLeader(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	left := make(chan error, 1)
	go func() { left <- l.Sync(ctx, info.LastOffset+1) }() // leads the next group
	for range 2 {
		appendSyncing(t, l, b, done)
	}
	waitParked(t, l, 3)
	// A waiter of the running flush (covered by its plan) leaves too.
	ctx2, cancel2 := context.WithCancel(context.Background())
	left2 := make(chan error, 1)
	go func() { left2 <- l.Sync(ctx2, first.LastOffset+1) }()
	waitParked(t, l, 4)
	cancel2()
	if err := <-left2; !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter whose context ended got %v", err)
	}
	cancel() // the next group's leader does not watch ctx: it leads on
	close(release)
	waitDone(t, done, 3)
	if err := <-left; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	l.flushFault = nil
	for range 5 {
		info, err := l.AppendAsLeader(b, 0)
		if err == nil {
			err = l.Sync(context.Background(), info.LastOffset+1)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	checkGroupsFree(t, l)
}

// TestGroupFlushMovesWritebackMark: a group's flush records how far it
// made the active segment durable, so members joining the next group
// start the writeout only of bytes appended after it, not again of
// bytes the flush already wrote.
func TestGroupFlushMovesWritebackMark(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	info, err := l.AppendAsLeader(makeBatch(t, 4, 1000, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(context.Background(), info.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	active, size := l.activeEnd()
	l.commit.mu.Lock()
	seg, at := l.commit.gather.wbSeg, l.commit.gather.wbAt
	l.commit.mu.Unlock()
	if seg != active || at != size {
		t.Errorf("after the flush the writeback mark is at %d of segment %p, want %d of the active segment %p", at, seg, size, active)
	}
}
