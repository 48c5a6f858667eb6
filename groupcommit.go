package partlog

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog/segment"
)

// groupCommit is the group commit of a Log: callers of Sync share
// flushes. It is the whole of the mechanism (groups, their gathering,
// recycling, waking); what a flush does to the log comes from its
// environment, commitEnv, which the Log implements (flush.go), so that
// the pipeline can be read, and driven by tests, without a Log.
//
// Ordering: a flush plans under the log's append lock what it will make
// durable (everything appended so far), fsyncs without that lock, then
// advances the durable offset under it again. At most one flush runs
// (the env's flush lock); while it runs, the next group gathers, and the
// running flush plans the next group's flush as it ends. A caller returns
// once the durable offset reaches its offset, or with the error of the
// flush that was to cover it.
type groupCommit struct {
	env commitEnv
	// syncers counts the callers inside Sync; it lives on the line every
	// append reads (Log.writes), since enterAppend and the write policy
	// look at it.
	syncers *atomic.Int32

	mu      sync.Mutex // guards running, gathering, free and gather
	running *syncGroup // the flush Sync callers currently share, if any
	// gathering is the group gathering for the next flush.
	gathering *syncGroup
	// free lists the groups nobody references any more, for reuse
	// (syncGroup), under mu.
	free *syncGroup
	// gather is how long a group's leader lets its group grow before its
	// flush starts, under mu.
	gather syncGather
	// parked counts the callers inside Sync waiting for a flush to end
	// or, as a group's leader, to start (tests wait on it: a caller inside
	// Sync may not have joined yet).
	parked atomic.Int64
	// appending counts the callers inside an append, waiting for the
	// append lock or holding it, that began while a caller was in Sync
	// (Log.enterAppend): while some are, a group's leader waiting for the
	// members the last flush released expects more of them (comingBack).
	appending atomic.Int64
}

// commitEnv is what the group commit needs of its log.
type commitEnv interface {
	// durableOffset is the offset below which everything is durable (the
	// recovery point).
	durableOffset() int64
	// truncationGen counts the truncations; truncatedBelow reports
	// whether one after generation since cut the log below offset.
	truncationGen() uint64
	truncatedBelow(since uint64, offset int64) bool
	// activeEnd is the active segment and its size (nil: none), whose
	// writeback members start as they join.
	activeEnd() (*segment.Segment, int64)
	// lockFlush and unlockFlush hold off every other flush.
	lockFlush()
	unlockFlush()
	// planFlush fills p for a flush of everything appended so far.
	planFlush(p *flushPlan) error
	// fsyncPlan makes what p lists durable (no lock of the log held).
	fsyncPlan(p *flushPlan) error
	// finishFlush ends a flush of p whose fsyncs returned err: the
	// durable offset moves to p's, or the log fails. With next, it then
	// plans next's flush under the same hold of the append lock and
	// reports whether it did. lone says the flush was a Sync's whose
	// caller was alone in Sync (the write policy's hint).
	finishFlush(p *flushPlan, err error, next *flushPlan, lone bool) (nextPlanned bool, _ error)
}

// errWaitTruncated is groupCommit.wait's: a truncation removed offsets
// the caller waited for (Log.Sync reports ErrTruncated).
var errWaitTruncated = errors.New("partlog: truncated while waiting")

// syncGroup is one flush shared by every Sync caller that joined it
// while it was gathering (see Sync).
//
// Groups are recycled (groupCommit.free) so that a Sync allocates nothing
// once the log has seen its usual number of waiters: refs counts who may
// still read the group (its leader until its flush is over, each waiter
// until it has read err, the next group's leader until it has read err
// through prev), and the one that drops it to 0 puts the group on the
// free list. Nobody can take a new reference once the group's flush is
// over: it is then neither c.running nor c.gathering, through which
// callers find a group. A waiter waits on a slot of its own (a channel of
// one, kept with the group), which the flush's end sends to once, so a
// flush nobody waits for (a lone writer) needs no channel at all.
type syncGroup struct {
	// slots[:waits] are the waiters' (waitSlot); finished is set, with
	// err, when the flush is over and every slot not left has been sent
	// to. Under c.mu; err is read by the waiters after their wake-up.
	slots    []waitSlot
	waits    int
	finished bool
	err      error // its result, set before the slots are sent to
	refs     atomic.Int32
	free     *syncGroup // next on groupCommit.free
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
	// c.mu while it gathers); a plan made ahead covers the first
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
// holds c.mu.
func (c *groupCommit) newGroupLocked(prev *syncGroup) *syncGroup {
	g := c.free
	if g != nil {
		c.free, g.free = g.free, nil
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

// waitLocked registers a waiter on g, which is c.running or c.gathering
// (so its flush is not over), and returns its slot. Caller holds c.mu.
func (c *groupCommit) waitLocked(g *syncGroup) int {
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
// Caller holds c.mu.
func (g *syncGroup) finish(err error) {
	g.err, g.finished = err, true
	for i := range g.slots[:g.waits] {
		if !g.slots[i].left {
			g.slots[i].ch <- struct{}{}
		}
	}
}

// releaseGroup drops a reference to g; the last one puts g, cleared, on
// the free list. locked: the caller holds c.mu.
func (c *groupCommit) releaseGroup(g *syncGroup, locked bool) {
	if g.refs.Add(-1) != 0 {
		return
	}
	if !locked {
		c.mu.Lock()
		defer c.mu.Unlock()
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
	g.free, c.free = c.free, g
}

// syncGather decides how long a group's leader lets the group grow
// before its flush starts (gatherWait). Under c.mu.
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
// An fdatasync's time grows with the bytes it writes, and the writers a
// flush released append again one after another, with the disk idle,
// while the next group gathers: writing their bytes out as they come
// moves most of that per-byte cost into the gathering. The step is a
// compromise: the members' writeout competes with the others' appends
// for the CPUs and the extent tree (bench/RESULTS.md, writebackStep).
const writebackStep = 256 << 10

// flushed records that a flush made segment seg durable up to size: the
// members' writeout counts the bytes appended after it (at 8 writers of
// 16 KiB a group's bytes stay below writebackStep, so nothing is started
// that the flush would not have written at once anyway). Caller holds
// c.mu.
func (w *syncGather) flushed(seg *segment.Segment, size int64) {
	if seg != w.wbSeg || size > w.wbAt {
		w.wbSeg, w.wbAt = seg, size
	}
}

// claimWriteback returns the range of segment seg, whose size is size,
// that a member joining a group starts the writeout of: the bytes since
// the last claim once they reach writebackStep (from ≥ to: none). Caller
// holds c.mu.
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
// now. Caller holds c.mu.
func (w *syncGather) release(n int, took time.Duration, now time.Time) {
	w.released, w.back = n, 0
	w.at, w.took = now, took
	w.flushes++
	w.fsyncs += took
}

// gatherGaps is how many mean gaps between the members coming back a
// leader waits after the last one came, and gatherTooks how many times
// the last flush's fsync time after that flush ended it waits at most,
// while members are on their way (comingBack: an append runs or waits
// for appendMu, or a member the last flush woke has not run yet);
// gatherIdleGaps and gatherIdleTooks when none is (a member that does not
// come back, such as a writer that is done, costs that rather than the
// whole bound).
//
// The members a flush released append again one after another under
// appendMu, and with many writers those appends take longer than the
// fsync they follow: a bound of one fsync time cut the groups short, and
// the members left out cost a flush of their own. Waiting longer while
// members are on their way, and only the old bound when none is, carries
// more batches per flush without slowing writers that are done
// (bench/RESULTS.md, gatherGaps).
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
// on its way (appending false, see comingBack). Caller holds c.mu.
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

// wait is Sync once offset is known to be within the log: it returns
// when the durable offset reaches offset (see Sync for the protocol),
// errWaitTruncated when a truncation after generation gen removed the
// offsets waited for, or the flush's error or ctx's.
func (c *groupCommit) wait(ctx context.Context, offset int64, gen uint64) error {
	c.syncers.Add(1)
	defer c.syncers.Add(-1)
	for {
		if c.env.truncationGen() != gen && c.env.truncatedBelow(gen, offset) {
			return errWaitTruncated
		}
		if c.env.durableOffset() >= offset {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		seg, size := c.env.activeEnd()
		c.mu.Lock()
		wait := c.gathering
		if r := c.running; r != nil && r.target.Load() >= offset {
			// The running flush's plan covers offset: wait for it
			// rather than lead or join the next one.
			wait = r
		}
		if wait != nil {
			// Join the gathering group (or wait for the running flush).
			var from, to int64
			if wait == c.gathering {
				wait.members++
				c.arrived()
				from, to = c.gather.claimWriteback(seg, size)
			}
			k := c.waitLocked(wait)
			ch := wait.slots[k].ch
			c.mu.Unlock()
			if seg != nil && from < to {
				// The group's flush writes these bytes whatever happens
				// here; starting now overlaps their writeout with the
				// gathering (writebackStep). Its error is the flush's.
				_ = seg.StartWriteback(from, to)
			}
			c.parked.Add(1)
			select {
			case <-ch:
			case <-ctx.Done():
				c.parked.Add(-1)
				c.mu.Lock()
				over := wait.finished
				if !over {
					wait.slots[k].left = true // the flush's end skips it
				}
				c.mu.Unlock()
				if over {
					// The flush's end sent to the slot (or is sending):
					// take it, so the group is reused with it empty.
					<-ch
				}
				c.releaseGroup(wait, false)
				return ctx.Err()
			}
			c.parked.Add(-1)
			err := wait.err
			c.releaseGroup(wait, false)
			if err != nil {
				return err
			}
			continue
		}
		g := c.newGroupLocked(c.running)
		c.arrived()
		if g.prev == nil {
			// Nothing is flushing: this group flushes at once, and the
			// next one gathers behind it.
			c.running = g
		}
		c.gathering = g
		c.mu.Unlock()
		if err := c.lead(g); err != nil {
			return err
		}
	}
}

// leadGroup waits for the running flush, then flushes for g (see Sync)
// and reports the result to it.
func (c *groupCommit) lead(g *syncGroup) error {
	var err error
	if g.prev != nil {
		c.parked.Add(1)
		<-g.ready // prev ended the gathering and, if it succeeded, planned g
		c.parked.Add(-1)
		// A failed flush poisoned the log: g's members get that error
		// itself, not one of a flush of their own on the failed log.
		err = g.prev.err
		c.releaseGroup(g.prev, false)
		g.prev = nil
	}
	// Let the group grow (when nothing failed), then end its gathering.
	members := c.gatherWait(g, err == nil)
	var next *syncGroup
	ended := false
	if err == nil {
		c.env.lockFlush()
		if !g.planned || members > g.covered {
			// Members joined after the plan made ahead: plan again.
			if err = c.env.planFlush(&g.plan); err == nil {
				g.target.Store(g.plan.leo)
			}
		}
		if err == nil {
			next, err = c.flush(g)
			ended = true
		}
		c.env.unlockFlush()
	}
	if !ended {
		// No flush: the group gathering behind g gets g's error.
		next = c.nextGroup(false)
	}

	c.mu.Lock()
	g.finish(err)
	if ended {
		c.gather.release(members, g.took, time.Now())
		if err == nil {
			c.gather.flushed(g.plan.active, g.plan.size)
		}
	}
	if next != nil {
		next.ready <- struct{}{} // its one send: never blocks
	}
	// The leader's reference: g is no longer c.running or c.gathering
	// (nextGroup moved on), so only its waiters and next may still read it.
	c.releaseGroup(g, true)
	c.mu.Unlock()
	if next != nil {
		// Let next's leader (in the run-next slot, see syncGroup.ready)
		// start its fdatasync now rather than after this caller's next
		// append (bench/RESULTS.md, groupCommit.lead).
		runtime.Gosched()
	}
	return err
}

// flush is g's flush (the caller holds the env's flush lock): the
// fsyncs of g's plan, then, with the next group's gathering ended (or,
// gathering on, made the next to flush), the end of the flush under the
// append lock, which plans the next group's flush too when this one
// succeeded. It returns the next group.
func (c *groupCommit) flush(g *syncGroup) (*syncGroup, error) {
	start := time.Now()
	err := c.env.fsyncPlan(&g.plan)
	g.took = time.Since(start)
	// Whoever joined so far appended before joining, so the plan made
	// by finishFlush covers them. The group goes on gathering (until its
	// leader's gatherWait ends) unless gathering is off.
	next := c.nextGroup(!c.gather.off)
	var np *flushPlan
	if next != nil {
		np = &next.plan
	}
	planned, err := c.env.finishFlush(&g.plan, err, np, next == nil && c.syncers.Load() <= 1)
	if planned {
		next.planned = true
		next.target.Store(next.plan.leo)
	}
	return next, err
}

// nextGroup makes the group gathering behind the running flush the next
// to flush and returns it; with gathering, it goes on gathering (its
// leader ends that), else later callers form the group after it. The
// members it has now are those a plan made from here on covers.
func (c *groupCommit) nextGroup(gathering bool) *syncGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.gathering
	if !gathering {
		c.gathering = nil
	}
	c.running = next
	if next != nil {
		next.covered = next.members
	}
	return next
}

// arrived counts a caller that led or joined a group, and wakes the
// leader waiting in gatherWait once the members the last flush released
// are back. Caller holds c.mu.
func (c *groupCommit) arrived() {
	w := &c.gather
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
// c.mu.
func (c *groupCommit) comingBack(g *syncGroup) bool {
	return c.appending.Load() > 0 || c.parked.Load() > int64(g.members-1)
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
// which costs more (gatherTooks). It pays most with few writers; with
// many the fsync's time grows with the bytes (bench/RESULTS.md,
// gatherWait).
//
// The leader waits until as many callers came back (led or joined a
// group) as the last flush released, at most a few times the last
// flush's fsync time after it ended, and only while they keep coming
// (syncGather.deadline): a caller that does
// not come back (a writer that is done) costs a few of their gaps, and
// the next group expects one fewer. A lone writer is back as soon as it
// leads, so it never waits; nor does the first Sync after an idle spell
// (the bound has passed).
func (c *groupCommit) gatherWait(g *syncGroup, grow bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &c.gather
	counted := false
	for grow && !w.off && !w.waiting && w.back < w.released && c.gathering == g {
		// Sleep to the idle deadline at most, then look again: members
		// on their way then decide whether to wait on (comingBack).
		left := time.Until(w.deadline(false))
		if left <= 0 && c.comingBack(g) {
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
		c.mu.Unlock()
		c.parked.Add(1)
		start := time.Now()
		select {
		case <-w.wake:
		case <-w.timer.C:
		}
		w.timer.Stop()
		c.parked.Add(-1)
		c.mu.Lock()
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
	if c.gathering == g {
		c.gathering = nil
	}
	return g.members
}
