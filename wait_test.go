package partlog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestWait covers both waits: already satisfied, woken by the move,
// cancelled, and woken by Close.
func TestWait(t *testing.T) {
	type waitFn func(l *Log, ctx context.Context, off int64) (int64, error)
	leo := func(l *Log, ctx context.Context, off int64) (int64, error) { return l.WaitLogEndOffset(ctx, off) }
	hw := func(l *Log, ctx context.Context, off int64) (int64, error) { return l.WaitHighWatermark(ctx, off) }
	appendOne := func(t *testing.T, l *Log) {
		if _, err := l.AppendAsLeader(makeBatch(t, 2, 10, 1000), 0); err != nil {
			t.Error(err)
		}
	}
	for _, c := range []struct {
		name    string
		wait    waitFn
		offset  int64
		move    func(t *testing.T, l *Log) // nil: no move
		cancel  bool
		close   bool
		wantErr error
		wantMin int64
	}{
		{"log end already above", leo, 3, nil, false, false, nil, 4},
		{"log end moved by an append", leo, 4, appendOne, false, false, nil, 5},
		{"log end cancelled", leo, 4, nil, true, false, context.Canceled, 4},
		{"log end closed", leo, 4, nil, false, true, ErrClosed, 4},
		{"high watermark already above", hw, 1, nil, false, false, nil, 2},
		{"high watermark moved", hw, 2, func(t *testing.T, l *Log) { l.SetHighWatermark(4) }, false, false, nil, 4},
		{"high watermark not moved by an append", hw, 2, appendOne, true, false, context.Canceled, 2},
		{"high watermark moved by the log start", hw, 2, func(t *testing.T, l *Log) {
			if err := l.SetLogStartOffset(4); err != nil {
				t.Error(err)
			}
		}, false, false, nil, 4},
		{"high watermark closed", hw, 2, nil, false, true, ErrClosed, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, _ := openTestLog(t, smallOpts(t))
			appendOne(t, l)
			appendOne(t, l)
			l.SetHighWatermark(2)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				v   int64
				err error
			}
			done := make(chan result, 1)
			go func() {
				v, err := c.wait(l, ctx, c.offset)
				done <- result{v, err}
			}()
			// Let the waiter block (when it is to) before acting.
			deadline := time.Now().Add(5 * time.Second)
			for l.waiters.logEnd.waiting.Load()+l.waiters.highWatermark.waiting.Load() == 0 && c.wantMin <= c.offset && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if c.move != nil {
				c.move(t, l)
			}
			if c.cancel {
				cancel()
			}
			if c.close {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
			r := <-done
			if !errors.Is(r.err, c.wantErr) || (c.wantErr == nil && r.v < c.wantMin) {
				t.Fatalf("got %d, %v; want ≥ %d, %v", r.v, r.err, c.wantMin, c.wantErr)
			}
		})
	}
}

// TestWaitThousands: 5000 waiters on one partition, each for its own
// offset, are all released by appends and leave no waiter counted.
func TestWaitThousands(t *testing.T) {
	l, _ := openTestLog(t, smallOpts(t))
	const n = 5000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := int64(i % 200)
			got, err := l.WaitLogEndOffset(context.Background(), off)
			if err == nil && got <= off {
				err = errors.New("woken below its offset")
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	src := makeBatch(t, 1, 10, 1000)
	for l.LogEndOffset() <= 200 {
		if _, err := l.AppendAsLeader(src, 0); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if w := l.waiters.logEnd.waiting.Load(); w != 0 {
		t.Fatalf("%d waiters still counted", w)
	}
	// With nobody waiting the append path is back to no allocation and
	// no lock (TestAppendDoesNotAllocate guards the general case).
	if a := testing.AllocsPerRun(200, func() {
		if _, err := l.AppendAsLeader(src, 0); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Fatalf("append allocates %v times after the waiters left", a)
	}
}

// BenchmarkAppendWaiters: the append path with nobody waiting, and with
// 1000 waiters parked for an offset far ahead (each append then closes
// and replaces their channel).
func BenchmarkAppendWaiters(b *testing.B) {
	for _, waiters := range []int{0, 1000} {
		b.Run(map[int]string{0: "none", 1000: "1000"}[waiters], func(b *testing.B) {
			o := smallOpts(b)
			o.SegmentBytes = 256 << 20
			o.MaxIndexBytes = 4 << 20
			l, _ := openTestLog(b, o)
			src := makeBatch(b, 3, 100, 1000)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for i := 0; i < waiters; i++ {
				wg.Add(1)
				go func() { defer wg.Done(); _, _ = l.WaitLogEndOffset(ctx, 1<<60) }()
			}
			for l.waiters.logEnd.waiting.Load() != int32(waiters) {
				time.Sleep(time.Millisecond)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.AppendAsLeader(src, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cancel()
			wg.Wait()
		})
	}
}

// TestWatchHighWatermark: one channel watches two logs; a move of
// either signals it, many moves before it is read leave one signal, an
// append that does not move the high watermark does not, Close does, and
// after stop nothing does.
func TestWatchHighWatermark(t *testing.T) {
	a, _ := openTestLog(t, smallOpts(t))
	b, _ := openTestLog(t, smallOpts(t))
	for _, l := range []*Log{a, b} {
		for i := 0; i < 3; i++ {
			if _, err := l.AppendAsLeader(makeBatch(t, 2, 10, 1000), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	ch := make(chan struct{}, 1)
	stopA, stopB := a.WatchHighWatermark(ch), b.WatchHighWatermark(ch)
	signalled := func() bool {
		select {
		case <-ch:
			return true
		case <-time.After(20 * time.Millisecond):
			return false
		}
	}
	if signalled() {
		t.Fatal("signalled before any move")
	}
	b.SetHighWatermark(1)
	if !signalled() {
		t.Fatal("a move of the second log did not signal")
	}
	a.SetHighWatermark(1)
	a.SetHighWatermark(2)
	b.SetHighWatermark(2)
	if !signalled() || signalled() {
		t.Fatal("three moves before a read: want exactly one signal")
	}
	if _, err := a.AppendAsLeader(makeBatch(t, 2, 10, 1000), 0); err != nil {
		t.Fatal(err)
	}
	if signalled() {
		t.Fatal("an append signalled a high-watermark watch")
	}
	stopB()
	stopB() // idempotent
	b.SetHighWatermark(3)
	if signalled() {
		t.Fatal("signalled after stop")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !signalled() {
		t.Fatal("Close did not signal")
	}
	stopA()
	if n := a.waiters.highWatermark.waiting.Load(); n != 0 {
		t.Fatalf("%d waiters counted after stop", n)
	}
}
