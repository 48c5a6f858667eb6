package partlog

import (
	"context"
	"sync"
	"sync/atomic"
)

// notifier wakes the goroutines waiting for one offset to move. The
// waiters share one channel, made when the first of them arrives and
// closed (and forgotten) when the offset moves, so thousands of waiters
// cost one channel and one close per move. With nobody waiting, a move
// costs one atomic load: no lock, no allocation.
type notifier struct {
	waiting atomic.Int32 // goroutines inside wait, and watchers
	mu      sync.Mutex   // guards st
	st      *notifyState // made by the first waiter (one word: the Log's layout counts)
}

type notifyState struct {
	ch chan struct{}
	// watchers are signalled (without blocking) at every move: one
	// channel can watch many logs (Log.WatchHighWatermark).
	watchers map[chan<- struct{}]struct{}
}

// stateLocked returns n.st, made if needed. Caller holds mu.
func (n *notifier) stateLocked() *notifyState {
	if n.st == nil {
		n.st = &notifyState{}
	}
	return n.st
}

// moved wakes the current waiters, if any. The offset's new value must
// be stored before the call: a waiter counts itself in before it reads
// the offset, so either it sees the new value or moved sees it.
func (n *notifier) moved() {
	if n.waiting.Load() != 0 { // inline: with nobody waiting, one load
		n.wake()
	}
}

// wake is moved's slow path.
func (n *notifier) wake() {
	n.mu.Lock()
	if n.st == nil {
		n.mu.Unlock()
		return
	}
	if n.st.ch != nil {
		close(n.st.ch)
		n.st.ch = nil
	}
	for w := range n.st.watchers {
		select {
		case w <- struct{}{}:
		default: // a signal is pending already
		}
	}
	n.mu.Unlock()
}

// watch adds ch to the watchers until the returned stop is called.
func (n *notifier) watch(ch chan<- struct{}) (stop func()) {
	n.mu.Lock()
	st := n.stateLocked()
	if st.watchers == nil {
		st.watchers = map[chan<- struct{}]struct{}{}
	}
	st.watchers[ch] = struct{}{}
	n.mu.Unlock()
	n.waiting.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			n.mu.Lock()
			delete(n.st.watchers, ch)
			n.mu.Unlock()
			n.waiting.Add(-1)
		})
	}
}

// channel returns the channel the next move closes.
func (n *notifier) channel() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.stateLocked()
	if st.ch == nil {
		st.ch = make(chan struct{})
	}
	return st.ch
}

// waiters are the log's two notifiers.
type waiters struct {
	logEnd, highWatermark notifier
}

func (w *waiters) logEndMoved()        { w.logEnd.moved() }
func (w *waiters) highWatermarkMoved() { w.highWatermark.moved() }

// closed wakes everybody (the log closed).
func (w *waiters) closed() {
	w.logEnd.moved()
	w.highWatermark.moved()
}

// WaitLogEndOffset blocks until the log end offset is above offset (a
// record at offset exists), the context is done or the log closes, and
// returns the log end offset it saw. A follower's or a consumer's
// long-poll fetch at the log end waits here. It returns at once when
// the log end is already above offset; it does not poll, and an append
// with nobody waiting pays one atomic load for it.
func (l *Log) WaitLogEndOffset(ctx context.Context, offset int64) (int64, error) {
	return l.waitAbove(ctx, &l.waiters.logEnd, &l.logEndOffset, offset)
}

// WaitHighWatermark blocks until the high watermark is above offset, the
// context is done or the log closes, and returns the high watermark it
// saw: a broker's delayed fetch at the high watermark waits here for
// SetHighWatermark (or SetLogStartOffset, or a retention pass) to move
// it.
func (l *Log) WaitHighWatermark(ctx context.Context, offset int64) (int64, error) {
	return l.waitAbove(ctx, &l.waiters.highWatermark, &l.highWatermark, offset)
}

// WatchHighWatermark signals ch, without blocking, whenever the high
// watermark moves (and when the log closes) until stop is called. One
// channel (of capacity 1) may watch many logs: a delayed fetch of many
// partitions waits on one channel instead of a goroutine per partition.
// A move between reading the high watermark and the call is not
// signalled: read it again after the call.
func (l *Log) WatchHighWatermark(ch chan<- struct{}) (stop func()) {
	return l.waiters.highWatermark.watch(ch)
}

func (l *Log) waitAbove(ctx context.Context, n *notifier, v *atomic.Int64, offset int64) (int64, error) {
	if cur := v.Load(); cur > offset {
		return cur, nil
	}
	n.waiting.Add(1)
	defer n.waiting.Add(-1)
	for {
		ch := n.channel()
		if cur := v.Load(); cur > offset {
			return cur, nil
		}
		if l.closed.Load() {
			return v.Load(), ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return v.Load(), ctx.Err()
		}
	}
}
