package partlog

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

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
