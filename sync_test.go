package partlog

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
