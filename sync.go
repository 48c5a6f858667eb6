package partlog

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog/internal/testhook"
	"github.com/partlog/partlog/segment"
)

// syncGroup is one flush shared by every Sync caller that joined it
// while it was gathering (see Sync).
//
// Groups are recycled (Log.syncFree) so that a Sync allocates nothing
// once the log has seen its usual number of waiters: refs counts who may
// still read the group (its leader until its flush is over, each waiter
// until it has read err, the next group's leader until it has read err
// through prev), and the one that drops it to 0 puts the group on the
// free list. Nobody can take a new reference once the group's flush is
// over: it is then neither l.syncing nor l.syncNext, through which
// callers find a group. A waiter waits on a slot of its own (a channel of
// one, kept with the group), which the flush's end sends to once, so a
// flush nobody waits for (a lone writer) needs no channel at all.
type syncGroup struct {
	// slots[:waits] are the waiters' (waitSlot); finished is set, with
	// err, when the flush is over and every slot not left has been sent
	// to. Under syncMu; err is read by the waiters after their wake-up.
	slots    []waitSlot
	waits    int
	finished bool
	err      error // its result, set before the slots are sent to
	refs     atomic.Int32
	free     *syncGroup // next on Log.syncFree
	// prev is the flush that was running when the group formed; the
	// group's flush starts after it. ready (with a prev only, made on
	// first use and kept) is sent to once by prev's flush when it is
	// over, after the slots: the leader of this group is the last
	// goroutine it wakes, so it runs next (a goroutine woken from a
	// channel takes the waker's run-next slot, and each later one takes
	// it over) rather than behind the members prev released.
	prev  *syncGroup
	ready chan struct{}
	// plan is what the group's flush syncs when planned is set: planned
	// by prev's flush as it ended, under the same hold of appendMu that
	// advanced the recovery point for prev (when no append is running,
	// since every appender is waiting in one of the two groups), so the
	// leader starts its fdatasync without queueing on appendMu behind
	// the appends prev's members make as they come back. Written before
	// ready is closed, read by the leader after.
	plan    flushPlan
	planned bool
	// target is plan.leo once planned (0 before): a member of the group
	// behind whose offset it covers waits for this group's flush rather
	// than its own.
	target atomic.Int64
	// members counts the callers that led or joined the group (under
	// syncMu while it gathers); a plan made ahead covers the first
	// covered of them (the later ones make the leader plan again).
	members, covered int
	// took is how long the group's fsyncs took, set by its flush.
	took time.Duration
}

// waitSlot is one waiter's place in a group: ch (capacity 1) gets one
// send when the flush is over, unless the waiter left first (its context
// ended before the flush did).
type waitSlot struct {
	ch   chan struct{}
	left bool
}

// newGroupLocked returns a group for a leader, recycled if one is free,
// with one reference (the leader's) and, with prev, one on prev. Caller
// holds syncMu.
func (l *Log) newGroupLocked(prev *syncGroup) *syncGroup {
	g := l.syncFree
	if g != nil {
		l.syncFree, g.free = g.free, nil
	} else {
		g = new(syncGroup)
	}
	g.members, g.prev = 1, prev
	g.refs.Store(1)
	if prev != nil {
		prev.refs.Add(1)
		if g.ready == nil {
			g.ready = make(chan struct{}, 1)
		}
	}
	return g
}

// waitLocked registers a waiter on g, which is l.syncing or l.syncNext
// (so its flush is not over), and returns its slot. Caller holds syncMu.
func (l *Log) waitLocked(g *syncGroup) int {
	k := g.waits
	if k == len(g.slots) {
		g.slots = append(g.slots, waitSlot{ch: make(chan struct{}, 1)})
	}
	g.slots[k].left = false
	g.waits++
	g.refs.Add(1)
	return k
}

// finish reports err to g's waiters: every slot not left is
// sent to (never blocking: each gets one send per use of the group).
// Caller holds syncMu.
func (g *syncGroup) finish(err error) {
	g.err, g.finished = err, true
	for i := range g.slots[:g.waits] {
		if !g.slots[i].left {
			g.slots[i].ch <- struct{}{}
		}
	}
}

// releaseGroup drops a reference to g; the last one puts g, cleared, on
// the free list. locked: the caller holds syncMu.
func (l *Log) releaseGroup(g *syncGroup, locked bool) {
	if g.refs.Add(-1) != 0 {
		return
	}
	if !locked {
		l.syncMu.Lock()
		defer l.syncMu.Unlock()
	}
	// Every slot's channel is empty: each sent-to slot's waiter received
	// before it let go, and ready's one send was received by the leader.
	for i := range g.slots[:g.waits] {
		g.slots[i].left = false
	}
	g.waits, g.finished, g.err, g.prev = 0, false, nil, nil
	g.plan, g.planned = flushPlan{}, false
	g.target.Store(0)
	g.members, g.covered, g.took = 0, 0, 0
	g.free, l.syncFree = l.syncFree, g
}

// syncGather decides how long a group's leader lets the group grow
// before its flush starts (gatherWait). Under syncMu.
type syncGather struct {
	// off makes every leader flush at once; bound, when set, replaces
	// the last fsync time as the longest wait, and the wait does not end
	// when members stop coming (tests, and the in-process comparison in
	// BenchmarkSyncGather).
	off   bool
	bound time.Duration
	// released is how many members the last flush released, at when,
	// after fsyncs that took took; back counts the callers that led or
	// joined a group since.
	released, back int
	at, last       time.Time // last: when the last of back came
	took           time.Duration
	// waiting: a leader waits in gatherWait, woken through wake (one
	// slot) when back reaches released, or by timer.
	waiting bool
	wake    chan struct{}
	timer   *time.Timer
	// flushes counts the group flushes that ended, waits the leaders
	// that waited in gatherWait, waited their time and fsyncs the
	// flushes' (tests, and the comparison reports them per flush).
	flushes, waits int64
	waited, fsyncs time.Duration
	// Writeback started by members as they join (see claimWriteback),
	// or made durable by a group's flush (flushed): up to wbAt in
	// segment wbSeg; wbOff switches it off (tests and the
	// comparison); wbStarts counts the calls.
	wbSeg    *segment.Segment
	wbAt     int64
	wbOff    bool
	wbStarts int64
}

// writebackStep is how many bytes appended since the last start of
// writeback or the last group flush make a member joining a gathering
// group start the writeout of them (sync_file_range, see claimWriteback).
//
// An fdatasync's time grows with the bytes it writes (about 0.9 ms plus
// 60 µs per 16 KiB batch, in a probe on a 2-vCPU VM), and the writers a
// flush released append again one after another, with the disk idle,
// while the next group gathers. Writing their bytes out as they come moves most of
// that per-byte part into the gathering: in a standalone probe (64
// pwrites of 16 KiB 20 µs apart, then one fdatasync; 60 rounds, three
// runs) starting writeback every 8 pwrites cut the fdatasync from 3.64-
// 3.84 ms to 2.45-2.67 ms and the round from 5.68-5.82 ms to 4.88-5.13.
// In BenchmarkSyncGather (64 writers, blocks of 16, three runs, batches/s
// over the same log without it) a step of 64 KiB gave 1.03, 0.80, 1.10;
// 128 KiB 0.97, 1.16, 1.08; 256 KiB 1.09, 1.03, 1.16; 512 KiB 0.99, 0.98,
// 1.09. The fdatasync's time per batch fell in every run (for 256 KiB
// 66/136/64 µs against 79/138/85), but the flushes carried fewer batches
// (45-53 against 49-59): the members' writeout competes with the others'
// appends for the CPUs and, in the filesystem, for the extent tree (the
// writeout converts the fallocated, unwritten extents it writes).
const writebackStep = 256 << 10

// flushed records that a flush made segment seg durable up to size: the
// members' writeout counts the bytes appended after it (at 8 writers of
// 16 KiB a group's bytes stay below writebackStep, so nothing is started
// that the flush would not have written at once anyway). Caller holds
// syncMu.
func (w *syncGather) flushed(seg *segment.Segment, size int64) {
	if seg != w.wbSeg || size > w.wbAt {
		w.wbSeg, w.wbAt = seg, size
	}
}

// claimWriteback returns the range of segment seg, whose size is size,
// that a member joining a group starts the writeout of: the bytes since
// the last claim once they reach writebackStep (from ≥ to: none). Caller
// holds syncMu.
func (w *syncGather) claimWriteback(seg *segment.Segment, size int64) (from, to int64) {
	if w.wbOff || seg == nil {
		return 0, 0
	}
	if seg != w.wbSeg || size < w.wbAt {
		// A roll, or a truncation cut below the last claim.
		w.wbSeg, w.wbAt = seg, 0
	}
	if size-w.wbAt < writebackStep {
		return 0, 0
	}
	from, w.wbAt = w.wbAt, size
	w.wbStarts++
	return from, size
}

// release records a flush of n members whose fsyncs took took, ending
// now. Caller holds syncMu.
func (w *syncGather) release(n int, took time.Duration, now time.Time) {
	w.released, w.back = n, 0
	w.at, w.took = now, took
	w.flushes++
	w.fsyncs += took
}

// gatherGaps is how many mean gaps between the members coming back a
// leader waits after the last one came, and gatherTooks how many times
// the last flush's fsync time after that flush ended it waits at most,
// while members are on their way (Log.comingBack: an append runs or waits
// for appendMu, or a member the last flush woke has not run yet);
// gatherIdleGaps and gatherIdleTooks when none is (a member that does not
// come back, such as a writer that is done, costs that rather than the
// whole bound).
//
// The members a flush released append again one after another under
// appendMu, and at 64 writers of 16 KiB those appends (a pwritev of about
// 10-20 µs each here, 0.6-1.3 ms for all of them) take longer than the
// fsync they follow: a bound of one fsync time, with 4 gaps, cut the
// groups at 37-41 batches of 64 on average (a trace of 4 096 durable
// appends: 31 flushes of all 64 among 91, the rest from 1 to 58). The
// members left out then cost a flush of their own, which carries few. In
// one process (blocks of 16 batches per writer, 8 192 batches per
// variant, three runs, batches/s over the old bound of 1 fsync time and
// 4 gaps, whoever was on the way): 4 fsync times and 16 gaps 1.26, 1.19,
// 1.21 at 64 writers (57.7-58.9 batches per flush against 39.8-41.0) and
// 1.16, 1.23, 1.21 at 8 (7.5 against 6.4-6.6); 4 fsync times with 4 gaps
// 1.05, 1.03, 1.12 and 1.03, 1.15, 1.17; 1 fsync time with 16 gaps 1.04,
// 0.87, 1.05 and 1.14, 1.22, 1.25. But 16 gaps for every wait made blocks
// of 2 batches per writer (writers that are done, every other batch)
// wait 1.7-1.9x longer per flush at 8 writers in BenchmarkSyncGather;
// with the old bound kept when nobody is on the way it is as before
// (311-324 µs against 320-344), and block=16 has 54.6-56.9 batches per
// flush at 64 writers against 41.8-44.0 (two runs of each binary,
// alternated).
const (
	gatherGaps      = 16
	gatherTooks     = 4
	gatherIdleGaps  = 4
	gatherIdleTooks = 1
)

// deadline is when a leader waiting in gatherWait stops waiting for the
// members the last flush released: gatherTooks fsync times after that
// flush ended (or bound after it, when set), and once members are coming
// back, gatherGaps of their mean gaps after the last one came if that is
// sooner; gatherIdleTooks and gatherIdleGaps instead when no member is
// on its way (appending false, see Log.comingBack). Caller holds syncMu.
func (w *syncGather) deadline(appending bool) time.Time {
	if w.bound != 0 {
		return w.at.Add(w.bound)
	}
	tooks, gaps := time.Duration(gatherIdleTooks), time.Duration(gatherIdleGaps)
	if appending {
		tooks, gaps = gatherTooks, gatherGaps
	}
	deadline := w.at.Add(w.took * tooks)
	if w.back > 0 {
		// Members are coming back: wait on only while they keep coming.
		if d := w.last.Add(w.last.Sub(w.at) * gaps / time.Duration(w.back)); d.Before(deadline) {
			deadline = d
		}
	}
	return deadline
}

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
	// lone is set when the last flush was a Sync whose caller was alone
	// in Sync (one appender syncing each append): see write.
	lone atomic.Bool
	// syncers counts the callers inside Sync (in the padding after lone,
	// on the line appends read: enterAppend looks at it).
	syncers atomic.Int32
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

// loneWriteMinBytes is the append size from which a lone appender that
// syncs each append (see writePolicy.lone) writes with pwritev.
// BenchmarkWritePath (sync, 1 writer, 4 096 appends per variant, one
// process): pwrite/mapped 1.57 at 1 KiB, 0.54 and 0.50 (two runs) at
// 16 KiB, 0.93 at 16 KiB with 640 appends. Earlier short runs (1 280-
// 2 560 durable 16 KiB appends, seven runs) had stores at 0.70-0.91 of
// pwritev's time, which is why the rule once stored up to writeMinBytes;
// over longer runs the stores at 16 KiB fell far behind.
const loneWriteMinBytes = 16 << 10

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
		// With 8 writers pwritev took 0.76-0.94 of the stores' time, with
		// 64 0.47-0.75 in four runs of five (1.22 in one): the stores'
		// page faults serialize under appendMu. A lone appender that
		// syncs each append stores below loneWriteMinBytes.
		return !w.lone.Load() || n >= loneWriteMinBytes
	}
	return n >= writeMinBytes
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
	_, err = l.syncPlan(&p, nil)
	return err
}

// planLocked fills p for a flush of everything appended so far. Caller
// holds appendMu.
func (l *Log) planLocked(p *flushPlan) error {
	if err := l.checkWritable(); err != nil {
		return err
	}
	l.writes.flushes.Add(1)
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

// syncPlan syncs what p lists, then, under appendMu, advances the
// recovery point to p.leo (or poisons the log). With g, the group whose
// flush this is, it also ends the gathering of the next group (which
// it returns) and, when this flush succeeded, plans that group's flush
// under the same hold of appendMu. Caller holds flushMu; appends go on
// during the fsyncs.
func (l *Log) syncPlan(p *flushPlan, g *syncGroup) (*syncGroup, error) {
	var err error
	start := time.Now()
	if l.flushFault != nil {
		err = l.flushFault()
	}
	if f := testhook.LogFlushFault.Load(); f != nil && err == nil {
		err = (*f)(l.dir)
	}
	for _, s := range p.segs {
		if err != nil {
			break
		}
		if l.flushed != nil {
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
		err = segment.SyncDir(l.dir)
	}

	var next *syncGroup
	if g != nil {
		g.took = time.Since(start)
		// Whoever joined so far appended before joining, so the plan made
		// below covers them. The group goes on gathering (until its
		// leader's gatherWait ends) unless gathering is off.
		next = l.nextGroup(!l.gather.off)
	}
	l.writes.lone.Store(g != nil && next == nil && l.writes.syncers.Load() <= 1)

	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err = l.finishLocked(p, err); err == nil && next != nil {
		if l.planLocked(&next.plan) == nil {
			next.planned = true
			next.target.Store(next.plan.leo)
		}
	}
	return next, err
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
	if p.leo > l.recoveryPoint.Load() {
		l.recoveryPoint.Store(p.leo)
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
	l.writes.syncers.Add(1)
	defer l.writes.syncers.Add(-1)
	for {
		if l.truncations.Load() != gen && l.truncatedBelow(gen, offset) {
			return &OffsetError{Err: ErrTruncated, Offset: offset, LogStartOffset: l.logStartOffset.Load(), LogEndOffset: l.logEndOffset.Load()}
		}
		if l.recoveryPoint.Load() >= offset {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		seg, size := l.activeEnd()
		l.syncMu.Lock()
		wait := l.syncNext
		if r := l.syncing; r != nil && r.target.Load() >= offset {
			// The running flush's plan covers offset: wait for it
			// rather than lead or join the next one.
			wait = r
		}
		if wait != nil {
			// Join the gathering group (or wait for the running flush).
			var from, to int64
			if wait == l.syncNext {
				wait.members++
				l.arrived()
				from, to = l.gather.claimWriteback(seg, size)
			}
			k := l.waitLocked(wait)
			ch := wait.slots[k].ch
			l.syncMu.Unlock()
			if seg != nil && from < to {
				// The group's flush writes these bytes whatever happens
				// here; starting now overlaps their writeout with the
				// gathering (writebackStep). Its error is the flush's.
				_ = seg.StartWriteback(from, to)
			}
			l.parked.Add(1)
			select {
			case <-ch:
			case <-ctx.Done():
				l.parked.Add(-1)
				l.syncMu.Lock()
				over := wait.finished
				if !over {
					wait.slots[k].left = true // the flush's end skips it
				}
				l.syncMu.Unlock()
				if over {
					// The flush's end sent to the slot (or is sending):
					// take it, so the group is reused with it empty.
					<-ch
				}
				l.releaseGroup(wait, false)
				return ctx.Err()
			}
			l.parked.Add(-1)
			err := wait.err
			l.releaseGroup(wait, false)
			if err != nil {
				return err
			}
			continue
		}
		g := l.newGroupLocked(l.syncing)
		l.arrived()
		if g.prev == nil {
			// Nothing is flushing: this group flushes at once, and the
			// next one gathers behind it.
			l.syncing = g
		}
		l.syncNext = g
		l.syncMu.Unlock()
		if err := l.leadGroup(g); err != nil {
			return err
		}
	}
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

// truncation is one entry of Log.truncated.
type truncation struct {
	gen uint64
	to  int64
}

// noteTruncation counts a truncation of the log to offset (-1: all of
// it). Caller holds appendMu.
func (l *Log) noteTruncation(to int64) {
	gen := l.truncations.Add(1)
	l.truncated[gen%uint64(len(l.truncated))] = truncation{gen: gen, to: to}
}

// truncatedBelow reports whether a truncation after generation since cut
// the log below offset. Truncations too many to be remembered count as
// one that did.
func (l *Log) truncatedBelow(since uint64, offset int64) bool {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	for gen := since + 1; gen <= l.truncations.Load(); gen++ {
		if t := l.truncated[gen%uint64(len(l.truncated))]; t.gen != gen || t.to < offset {
			return true
		}
	}
	return false
}

// leadGroup waits for the running flush, then flushes for g (see Sync)
// and reports the result to it.
func (l *Log) leadGroup(g *syncGroup) error {
	var err error
	if g.prev != nil {
		l.parked.Add(1)
		<-g.ready // prev ended the gathering and, if it succeeded, planned g
		l.parked.Add(-1)
		// A failed flush poisoned the log: g's members get that error
		// itself, not one of a flush of their own on the failed log.
		err = g.prev.err
		l.releaseGroup(g.prev, false)
		g.prev = nil
	}
	// Let the group grow (when nothing failed), then end its gathering.
	members := l.gatherWait(g, err == nil)
	var next *syncGroup
	ended := false
	if err == nil {
		l.flushMu.Lock()
		if !g.planned || members > g.covered {
			// Members joined after the plan made ahead: plan again.
			l.appendMu.Lock()
			if err = l.planLocked(&g.plan); err == nil {
				g.target.Store(g.plan.leo)
			}
			l.appendMu.Unlock()
		}
		if err == nil {
			next, err = l.syncPlan(&g.plan, g)
			ended = true
		}
		l.flushMu.Unlock()
	}
	if !ended {
		// No flush: the group gathering behind g gets g's error.
		next = l.nextGroup(false)
	}

	l.syncMu.Lock()
	g.finish(err)
	if ended {
		l.gather.release(members, g.took, time.Now())
		if err == nil {
			l.gather.flushed(g.plan.active, g.plan.size)
		}
	}
	if next != nil {
		next.ready <- struct{}{} // its one send: never blocks
	}
	// The leader's reference: g is no longer l.syncing or l.syncNext
	// (nextGroup moved on), so only its waiters and next may still read it.
	l.releaseGroup(g, true)
	l.syncMu.Unlock()
	if next != nil {
		// Let next's leader (in the run-next slot, see syncGroup.ready)
		// start its fdatasync now rather than after this caller's next
		// append. In one run of BenchmarkDurableAppend's appenders
		// (three pairs, 1280 batches), the time from one flush's end to
		// the next flush's start at 8 writers fell from 81-117 µs to
		// 21-48 µs, the leader's wake-up from 50-59 µs to 7-12 µs.
		runtime.Gosched()
	}
	return err
}

// nextGroup makes the group gathering behind the running flush the next
// to flush and returns it; with gathering, it goes on gathering (its
// leader ends that), else later callers form the group after it. The
// members it has now are those a plan made from here on covers.
func (l *Log) nextGroup(gathering bool) *syncGroup {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	next := l.syncNext
	if !gathering {
		l.syncNext = nil
	}
	l.syncing = next
	if next != nil {
		next.covered = next.members
	}
	return next
}

// arrived counts a caller that led or joined a group, and wakes the
// leader waiting in gatherWait once the members the last flush released
// are back. Caller holds syncMu.
func (l *Log) arrived() {
	w := &l.gather
	if w.back >= w.released {
		return // nobody waits for more
	}
	w.back++
	w.last = time.Now()
	if w.waiting && w.back >= w.released {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// comingBack reports whether members are likely still to come back to
// g, whose leader calls it: an append counted by enterAppend (begun
// while a caller was in Sync, as a member coming back is) runs or waits
// for appendMu, or more callers are parked than g's members other than its leader, which
// are those the last flush woke that have not run yet (with 64 writers on
// 2 CPUs, most of them for a while after the release). Caller holds
// syncMu.
func (l *Log) comingBack(g *syncGroup) bool {
	return l.appending.Load() > 0 || l.parked.Load() > int64(g.members-1)
}

// gatherWait lets g grow before its flush (if grow), then ends its
// gathering and returns how many members it has.
//
// With one flush in flight and W writers that each append and sync, a
// group that flushes as soon as the previous flush ends holds the W/2
// appends made while that flush ran, and the members it releases append
// again during the next flush, which does not cover them: each flush
// carries half the writers. Waiting for the released members to append
// again makes one flush carry all W: per batch, lat/W + per + R/W
// against 2·lat/W + per without (an fsync of n batches taking lat +
// per·n, R the time the W appends take one after another under
// appendMu), so it pays when R < lat; yet cutting the wait short when
// R ≥ lat leaves the members still to come for a flush of their own,
// which costs more (gatherTooks). In BenchmarkSyncGather (one
// process, blocks of 16 batches per writer, seven runs) 8 writers had
// 6.4 to 7.3 batches per flush against 3.6 to 4.0, and 1.4x to 2.1x the
// batches/s in six runs (0.88x in one); 64 writers 49 to 58 against 28
// to 31, but there the fsync time grew with the bytes and the appends
// took 1.4-1.9 ms, so the batches/s were 0.82x to 1.21x (ahead in five
// runs). In blocks of 2 batches per writer (BenchmarkDurableAppend's
// with -bench.durableblock 2), where every block ends with a wait for
// writers that are done, it was 0.59x to 1.27x at 8 writers and 0.90x
// to 0.96x at 64 (seven runs).
//
// The leader waits until as many callers came back (led or joined a
// group) as the last flush released, at most a few times the last
// flush's fsync time after it ended, and only while they keep coming
// (syncGather.deadline): a caller that does
// not come back (a writer that is done) costs a few of their gaps, and
// the next group expects one fewer. A lone writer is back as soon as it
// leads, so it never waits; nor does the first Sync after an idle spell
// (the bound has passed).
func (l *Log) gatherWait(g *syncGroup, grow bool) int {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	w := &l.gather
	counted := false
	for grow && !w.off && !w.waiting && w.back < w.released && l.syncNext == g {
		// Sleep to the idle deadline at most, then look again: members
		// on their way then decide whether to wait on (comingBack).
		left := time.Until(w.deadline(false))
		if left <= 0 && l.comingBack(g) {
			left = time.Until(w.deadline(true))
			if gap := w.last.Sub(w.at) / time.Duration(max(w.back, 1)); gap > 0 {
				left = min(left, gap)
			}
		}
		if left <= 0 {
			break
		}
		if w.wake == nil {
			w.wake = make(chan struct{}, 1)
			w.timer = time.NewTimer(left)
		} else {
			w.timer.Reset(left)
		}
		w.waiting = true
		l.syncMu.Unlock()
		l.parked.Add(1)
		start := time.Now()
		select {
		case <-w.wake:
		case <-w.timer.C:
		}
		w.timer.Stop()
		l.parked.Add(-1)
		l.syncMu.Lock()
		w.waiting = false
		w.waited += time.Since(start)
		if !counted {
			w.waits, counted = w.waits+1, true
		}
	}
	select {
	case <-w.wake: // a wake-up that came too late for this wait
	default:
	}
	if l.syncNext == g {
		l.syncNext = nil
	}
	return g.members
}
