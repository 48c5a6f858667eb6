package partlog

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/partlog/partlog/internal/testhook"
	"github.com/partlog/partlog/segment"
)

// syncGroup is one flush shared by every Sync caller that joined it
// while it was gathering (see Sync).
type syncGroup struct {
	done chan struct{} // closed when the flush is over
	err  error         // its result, set before done is closed
	// prev is the flush that was running when the group formed; the
	// group's flush starts after it.
	prev *syncGroup
}

// Flush makes everything appended so far durable and advances the
// recovery point to the log end offset it saw when it started: the .log
// data and length of every segment from the one holding the recovery
// point to the active one and their transaction indexes, then the
// directory if a segment was created (recovery.md §3.5). The active
// segment's offset and time indexes are not synced: recovery rebuilds
// them from the recovery point, and roll and close trim and sync them
// (segment.Flush). Appends go on while it waits for the
// disk. A failure poisons the log: it refuses writes until reopened,
// because the kernel may already have dropped the dirty pages it could
// not write (a failed fsync is never retried).
func (l *Log) Flush() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.flush()
}

// writePolicy decides, for each append, whether its bytes go to the page
// cache by stores into the mapping or by pwritev (Options.WritePath).
type writePolicy struct {
	// flushes counts flushes started; written by flush, read by appends.
	flushes atomic.Int64
	// Under appendMu: the flush count seen last, and how many more
	// appends use pwritev because of it.
	seen, left int
}

// durableWindow is how many appends after a flush WriteAuto writes with
// pwritev: long enough to cover appenders that sync every few appends,
// short enough that a log flushed now and then (by a periodic flusher)
// is back to stores within microseconds to milliseconds.
const durableWindow = 1024

// writeMinBytes is the append size from which WriteAuto writes with
// pwritev even when nothing is synced. In BenchmarkWritePath (sync=false,
// one run, pwrite time / mapped time): 256 B 6.1, 1 KiB 4.7, 16 KiB 0.97,
// 64 KiB 0.65, 256 KiB 0.61, 1 MiB 0.49. Small appends gain from skipping
// the syscall; large ones from skipping the page faults (the kernel fills
// page-cache pages without mapping them).
const writeMinBytes = 32 << 10

// write reports whether the next append, of n bytes, uses pwritev.
// Caller holds appendMu.
func (w *writePolicy) write(path WritePath, n int) bool {
	switch path {
	case WriteMapped:
		return false
	case WritePwrite:
		return true
	}
	if f := int(w.flushes.Load()); f != w.seen {
		w.seen, w.left = f, durableWindow
	}
	if w.left > 0 {
		w.left--
		return true
	}
	return n >= writeMinBytes
}

// flush is Flush with flushMu held.
func (l *Log) flush() error {
	l.writes.flushes.Add(1)
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
// point has reached it), flushing if needed. offset may not exceed the
// log end offset. A flush failure is returned to every waiter and leaves
// the log refusing writes until it is reopened.
//
// Group commit: concurrent callers share flushes. While one flush runs,
// the next group gathers: the first caller to find no gathering group
// leads it, every later one joins it. The leader waits for the running
// flush to end and then flushes at once for everyone who joined meanwhile:
// the disk never idles while callers wait, and with W writers that each
// append and sync, a group holds the appends made during the previous
// flush (W/2 on average). Waiting for more members first leaves the disk
// idle: in three interleaved pairs of runs of BenchmarkDurableAppend at 8
// writers, waiting for as many members as the last group had (up to half
// a flush) gave partlog/limit 0.32, 0.54, 0.40, flushing at once 0.75,
// 0.47, 0.77 (64 writers: 0.26, 0.38, 0.24 against 0.40, 0.37, 0.23);
// waiting for the previous group's members to come back was worse still.
// A single writer never waits.
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
		if g := l.syncNext; g != nil {
			// Join the gathering group. The running flush may already
			// cover offset: wake for whichever ends first and look again.
			l.syncMu.Unlock()
			var prev <-chan struct{}
			if g.prev != nil {
				prev = g.prev.done
			}
			select {
			case <-g.done:
			case <-prev:
				if l.recoveryPoint.Load() >= offset {
					return nil
				}
				// Not covered: stay in g.
				select {
				case <-g.done:
				case <-ctx.Done():
					return ctx.Err()
				}
			case <-ctx.Done():
				return ctx.Err()
			}
			if g.err != nil {
				return g.err
			}
			continue
		}
		g := &syncGroup{done: make(chan struct{}), prev: l.syncing}
		l.syncNext = g
		l.syncMu.Unlock()
		if err := l.leadGroup(g); err != nil {
			return err
		}
	}
}

// leadGroup waits for the running flush, then flushes for g (see Sync)
// and reports the result to it.
func (l *Log) leadGroup(g *syncGroup) error {
	if g.prev != nil {
		<-g.prev.done
	}
	l.syncMu.Lock()
	l.syncNext = nil
	l.syncing = g
	l.syncMu.Unlock()

	var err error
	if g.prev != nil && g.prev.err != nil {
		// The flush this group waited for failed and poisoned the log:
		// its members get that error itself, not one of a flush of their
		// own on the failed log.
		err = g.prev.err
	} else {
		err = l.Flush()
	}

	l.syncMu.Lock()
	if l.syncing == g {
		l.syncing = nil
	}
	g.err = err
	close(g.done)
	l.syncMu.Unlock()
	return err
}
