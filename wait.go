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
	waiting atomic.Int32 // goroutines inside wait
	mu      sync.Mutex   // guards ch
	ch      chan struct{}
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
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
}

// channel returns the channel the next move closes.
func (n *notifier) channel() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
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
