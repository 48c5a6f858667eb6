package partlog

import (
	"context"
	"errors"
	"time"

	"github.com/partlog/partlog/internal/testhook"
	"github.com/partlog/partlog/segment"
)

// syncGroup is one flush shared by every Sync caller that arrived while it
// was pending.
type syncGroup struct {
	done chan struct{}
	err  error
}

// Flush makes everything appended so far durable and advances the
// recovery point to the log end offset it saw when it started: the .log
// data and length of every segment from the one holding the recovery
// point to the active one, their indexes, then the directory if a segment
// was created (recovery.md §3.5). Appends go on while it waits for the
// disk. A failure poisons the log: it refuses writes until reopened,
// because the kernel may already have dropped the dirty pages it could
// not write (a failed fsync is never retried).
func (l *Log) Flush() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.flush()
}

// flush is Flush with flushMu held.
func (l *Log) flush() error {
	l.appendMu.Lock()
	if err := l.checkWritable(); err != nil {
		l.appendMu.Unlock()
		return err
	}
	leo, rp := l.logEndOffset.Load(), l.recoveryPoint.Load()
	gen := l.truncations.Load()
	l.mu.RLock()
	var segs []*segment.Segment
	for i, s := range l.segments {
		if i+1 < len(l.segments) && l.segments[i+1].BaseOffset() <= rp {
			continue // wholly below the recovery point
		}
		segs = append(segs, s)
	}
	l.mu.RUnlock()
	dirDirty := l.dirDirty
	l.dirDirty = false
	l.appendMu.Unlock()

	var err error
	if l.flushFault != nil {
		err = l.flushFault()
	}
	if f := testhook.LogFlushFault.Load(); f != nil && err == nil {
		err = (*f)(l.dir)
	}
	for _, s := range segs {
		if err != nil {
			break
		}
		if l.flushed != nil {
			l.flushed(s.BaseOffset(), leo)
		}
		err = s.Flush()
	}
	if err == nil && dirDirty {
		err = segment.SyncDir(l.dir)
	}

	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.truncations.Load() != gen {
		// A truncation ran meanwhile (and may have closed a segment we
		// were syncing): what was synced may not be what is there now.
		l.dirDirty = true
		if err != nil && errors.Is(err, segment.ErrClosed) {
			return nil
		}
		if err == nil {
			return nil
		}
	}
	if err != nil {
		l.failed = err
		return err
	}
	if leo > l.recoveryPoint.Load() {
		l.recoveryPoint.Store(leo)
	}
	if f := testhook.LogFlushed.Load(); f != nil {
		(*f)(l.dir)
	}
	return nil
}

// Sync returns once every offset below offset is durable (the recovery
// point has reached it), flushing if needed. Concurrent callers share
// flushes instead of each issuing their own: while a flush runs, callers
// wait for it, and one of those that still need more starts the next,
// which covers everything appended meanwhile (group commit). A flush
// failure is returned to every waiter and leaves the log refusing writes
// until it is reopened. offset may not exceed the log end offset.
func (l *Log) Sync(ctx context.Context, offset int64) error {
	if end := l.logEndOffset.Load(); offset > end {
		return &OffsetError{Err: ErrOffsetOutOfRange, Offset: offset, LogStartOffset: l.logStartOffset.Load(), LogEndOffset: end}
	}
	l.syncers.Add(1)
	defer l.syncers.Add(-1)
	for {
		if l.recoveryPoint.Load() >= offset {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		l.syncMu.Lock()
		if g := l.syncing; g != nil {
			l.syncMu.Unlock()
			select {
			case <-g.done:
				if g.err != nil {
					return g.err
				}
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		g := &syncGroup{done: make(chan struct{})}
		l.syncing = g
		l.syncMu.Unlock()

		// With other appenders about to wait too, give them a moment to
		// join this flush: a quarter of the last flush's duration (at
		// most 1 ms) costs little next to the fsync it saves them.
		if l.syncers.Load() > 1 {
			if d := time.Duration(l.lastFlushNs.Load()) / 4; d > 0 {
				time.Sleep(min(d, time.Millisecond))
			}
		}
		start := time.Now()
		err := l.Flush()
		l.lastFlushNs.Store(int64(time.Since(start)))

		l.syncMu.Lock()
		l.syncing = nil
		g.err = err
		close(g.done)
		l.syncMu.Unlock()
		if err != nil {
			return err
		}
	}
}
