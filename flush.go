package partlog

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/partlog/partlog/internal/fsutil"
	"github.com/partlog/partlog/internal/testhook"
	"github.com/partlog/partlog/segment"
)

// flushPlan is what one flush makes durable, read under appendMu: the
// segments from the one holding the recovery point to the active one,
// and the log end offset the recovery point moves to when they are
// synced.
type flushPlan struct {
	leo  int64
	gen  uint64 // l.truncations when planned
	segs []*segment.Segment
	// dirDirty: the directory changed (a segment was made or deleted)
	// since the last flush that synced it; active is the active segment
	// when planned, which tells whether it changed again since.
	dirDirty bool
	active   *segment.Segment
	size     int64               // active's size when planned
	buf      [2]*segment.Segment // segs' room for the usual one or two
	// roll: a roll's background flush (flushRolled), which the Log's
	// own test hooks (flushFault, flushed) do not see: they observe the
	// flushes their test starts; testhook's see every flush.
	roll bool
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

// flush is Flush with flushMu held.
func (l *Log) flush() error {
	var p flushPlan
	l.appendMu.Lock()
	err := l.planLocked(&p)
	l.appendMu.Unlock()
	if err != nil {
		return err
	}
	_, err = l.finishFlush(&p, l.fsyncPlan(&p), nil, false)
	return err
}

// rollFlush is the flush a roll starts, as Kafka's roll schedules
// flushUptoOffsetExclusive of the new segment's base: the sealed segments
// and the directory are synced and the recovery point moves to the new
// base, in the background (the appender does not wait for the disk).
// Without it the recovery point stayed where the last explicit flush left
// it: a crash made recovery rescan every segment rolled since, and a
// power cut could tear any of them. Rolls that come while one runs raise
// its target; no goroutine is left once it has caught up. Fields under
// appendMu.
type rollFlush struct {
	target  int64 // the recovery point the rolls asked for
	running bool  // a flushRolled goroutine owns the work
	stopped bool  // Close or discard began: no new goroutine
	done    sync.WaitGroup
}

// rollFlushSlots bounds the roll flushes that fsync at once in the
// process, as Kafka runs them on its scheduler's few threads
// (background.threads): thousands of partitions rolling together wait
// here as goroutines, not as threads blocked in fsync.
var rollFlushSlots = make(chan struct{}, 8)

// startRollFlush asks for the segments below base to be made durable.
// Caller holds appendMu.
func (l *Log) startRollFlush(base int64) {
	r := &l.rollFlush
	r.target = max(r.target, base)
	if r.running || r.stopped {
		return
	}
	r.running = true
	r.done.Add(1)
	go l.flushRolled()
}

// stopRollFlush lets no new roll flush start and waits for the running
// one, so that Close syncs and closes segments no flush still holds.
func (l *Log) stopRollFlush() {
	l.appendMu.Lock()
	l.rollFlush.stopped = true
	l.appendMu.Unlock()
	l.rollFlush.done.Wait()
}

// flushRolled syncs the segments below the rolls' target and moves the
// recovery point there, as a flush does (a failure poisons the log),
// until the recovery point has caught up with the target.
func (l *Log) flushRolled() {
	r := &l.rollFlush
	defer r.done.Done()
	for {
		rollFlushSlots <- struct{}{}
		err := l.flushRolledOnce()
		<-rollFlushSlots
		if err != nil {
			return
		}
	}
}

// flushRolledOnce is one round of flushRolled: errDone when there is
// nothing left to do (caught up, closed or failed), the flush's error,
// or nil to go round again.
func (l *Log) flushRolledOnce() error {
	r := &l.rollFlush
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	p := flushPlan{roll: true}
	l.appendMu.Lock()
	end := min(r.target, l.logEndOffset.Load())
	if l.recoveryPoint.Load() >= end || l.planLocked(&p) != nil {
		// Caught up (a flush or Sync may have got there first), or
		// closed or failed.
		r.running = false
		l.appendMu.Unlock()
		return errDone
	}
	l.appendMu.Unlock()
	p.leo = min(p.leo, end)
	segs := p.segs[:0]
	for _, s := range p.segs {
		if s.BaseOffset() < end {
			segs = append(segs, s)
		}
	}
	p.segs = segs
	err := l.fsyncPlan(&p)
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err = l.finishLocked(&p, err); err != nil {
		r.running = false
	}
	return err
}

// errDone ends flushRolled's rounds.
var errDone = errors.New("partlog: roll flush caught up")

// planLocked fills p for a flush of everything appended so far. Caller
// holds appendMu.
func (l *Log) planLocked(p *flushPlan) error {
	if err := l.checkWritable(); err != nil {
		return err
	}
	if !p.roll {
		// A roll's flush says nothing of the appenders (writePolicy).
		l.writes.flushes.Add(1)
	}
	p.leo, p.gen = l.logEndOffset.Load(), l.truncations.Load()
	rp := l.recoveryPoint.Load()
	l.mu.RLock()
	p.segs = unflushed(p.buf[:0], l.segments, rp)
	l.mu.RUnlock()
	p.dirDirty, p.active = l.dirDirty, l.active()
	p.size = p.active.Size()
	return nil
}

// unflushed appends to dst the segments of segs (the log's, oldest
// first) a flush syncs when the recovery point is rp: the one holding it
// and every later one.
func unflushed(dst, segs []*segment.Segment, rp int64) []*segment.Segment {
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].BaseOffset() <= rp {
			continue // wholly below the recovery point
		}
		dst = append(dst, s)
	}
	return dst
}

// fsyncPlan makes what p lists durable: the .log data and length of each
// segment, then the directory when it changed. Caller holds flushMu;
// appends go on during the fsyncs.
func (l *Log) fsyncPlan(p *flushPlan) error {
	var err error
	if !p.roll && l.flushFault != nil {
		err = l.flushFault()
	}
	if f := testhook.LogFlushFault.Load(); f != nil && err == nil {
		err = (*f)(l.dir)
	}
	for _, s := range p.segs {
		if err != nil {
			break
		}
		if !p.roll && l.flushed != nil {
			l.flushed(s.BaseOffset(), p.leo)
		}
		if err = s.Flush(); errors.Is(err, segment.ErrClosed) && l.deleted(s) {
			// Retention or a truncation deleted it after the plan listed
			// it: its offsets are gone from the log, nothing to make
			// durable (a log start or truncation moved past it).
			err = nil
		}
	}
	if err == nil && p.dirDirty {
		err = fsutil.SyncDir(l.dir)
		if !p.roll && l.flushed != nil && err == nil {
			l.flushed(-1, p.leo)
		}
	}
	return err
}

// finishFlush is commitEnv's: under appendMu, the recovery point moves
// to p.leo (or the log is poisoned), then next's flush is planned.
func (l *Log) finishFlush(p *flushPlan, err error, next *flushPlan, lone bool) (bool, error) {
	l.writes.lone.Store(lone)
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err = l.finishLocked(p, err); err == nil && next != nil {
		return l.planLocked(next) == nil, nil
	}
	return false, err
}

// The rest of commitEnv, for the group commit of Sync (groupcommit.go).

func (l *Log) durableOffset() int64  { return l.recoveryPoint.Load() }
func (l *Log) truncationGen() uint64 { return l.truncations.Load() }
func (l *Log) lockFlush()            { l.flushMu.Lock() }
func (l *Log) unlockFlush()          { l.flushMu.Unlock() }

// planFlush plans a flush under appendMu.
func (l *Log) planFlush(p *flushPlan) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.planLocked(p)
}

// deleted reports whether s has left the log's segment list.
func (l *Log) deleted(s *segment.Segment) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return !slices.Contains(l.segments, s)
}

// finishLocked ends a flush of p whose fsyncs returned err: the recovery
// point moves to p.leo, or the log is poisoned. Caller holds appendMu.
func (l *Log) finishLocked(p *flushPlan, err error) error {
	if err == nil && l.failed != nil {
		// The log failed while this flush ran (a truncation or retention
		// that broke partway, which may have removed segments the flush
		// then skipped): its offsets are not known durable.
		return l.checkWritable()
	}
	if l.truncations.Load() != p.gen {
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
	if p.dirDirty && l.active() == p.active {
		// No segment was made since the plan (a truncation would have
		// changed the count): the directory is synced.
		l.dirDirty = false
	}
	if err := l.syncTrimPassed(p); err != nil {
		l.failed = err
		return err
	}
	if p.leo > l.recoveryPoint.Load() {
		l.recoveryPoint.Store(p.leo)
	}
	if f := testhook.LogFlushed.Load(); f != nil && !p.roll {
		(*f)(l.dir)
	}
	return nil
}

// syncTrimPassed syncs p.active again when a roll sealed it after this
// flush synced it and the recovery point is about to reach its end: its
// trim (the file length) came after the fdatasync, no later flush syncs
// a segment wholly below the recovery point, and recovery trusts such a
// segment as it is on disk, so a cut would leave its preallocated zero
// tail in the log. (rollLocked syncs the trim itself when the recovery
// point is already at the log end.) Caller holds appendMu.
func (l *Log) syncTrimPassed(p *flushPlan) error {
	if p.active == nil || l.active() == p.active {
		return nil
	}
	l.mu.RLock()
	i := slices.Index(l.segments, p.active)
	passed := i >= 0 && i+1 < len(l.segments) && l.segments[i+1].BaseOffset() <= p.leo
	l.mu.RUnlock()
	if !passed {
		return nil // deleted, or the next flush syncs it (it holds the recovery point)
	}
	if err := p.active.Flush(); err != nil && !(errors.Is(err, segment.ErrClosed) && l.deleted(p.active)) {
		return err
	}
	return nil
}

// activeEnd returns the active segment and its size (nil if the log has
// no segment).
func (l *Log) activeEnd() (*segment.Segment, int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segments) == 0 {
		return nil, 0
	}
	s := l.active()
	return s, s.Size()
}

// Sync returns once every offset below offset is durable (the recovery
// point has reached it), flushing if needed. offset may not exceed the
// log end offset. A flush failure is returned to every waiter and leaves
// the log refusing writes until it is reopened.
//
// Group commit: concurrent callers share flushes. While one flush runs,
// the next group gathers: the first caller to find no gathering group
// leads it, every later one joins it. The leader waits for the running
// flush to end, which plans the next group's flush in the critical
// section where it advances the recovery point and hands over to the
// leader. The group goes on gathering until the members that flush
// released have appended again and joined, bounded by a few times that
// flush's fsync time and by their pace (gatherWait): with W writers that each append
// and sync, a flush then carries all W rather than the W/2 that append
// while the previous flush runs. If nobody joined after the plan, the
// leader starts its fdatasync without taking appendMu. A single writer
// never waits.
//
// A truncation below offset while the caller waits (a follower's
// TruncateTo, a mirror's alignment) removed the bytes it waits for, which
// other bytes may replace: Sync returns ErrTruncated.
func (l *Log) Sync(ctx context.Context, offset int64) error {
	gen := l.truncations.Load()
	if end := l.logEndOffset.Load(); offset > end {
		return &OffsetError{Err: ErrOffsetOutOfRange, Offset: offset, LogStartOffset: l.logStartOffset.Load(), LogEndOffset: end}
	}
	if err := l.commit.wait(ctx, offset, gen); err != errWaitTruncated {
		return err
	}
	return &OffsetError{Err: ErrTruncated, Offset: offset, LogStartOffset: l.logStartOffset.Load(), LogEndOffset: l.logEndOffset.Load()}
}
