package prefault

import (
	"os"

	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog/internal/mmapfile"
)

// DefaultWindow is the distance a Writer keeps populated ahead of
// the write position when it is given a window ≤ 0.
const DefaultWindow = 8 << 20

// DefaultBudget is the process-wide bound, in bytes, of pages the
// default pool keeps populated ahead of the writers (resident but not yet
// written): 32 partitions appending at once each get a full default window.
const DefaultBudget = 256 << 20

// pageSize is the unit the workers populate in.
var pageSize = int64(os.Getpagesize())

// chunk bounds one madvise call, so Stop is noticed quickly, the
// workers take turns between partitions, and populated pages become usable
// by the writer in small steps.
const chunk = 1 << 20

// Pool populates pages ahead of many writers with a few goroutines.
//
// Each writer (a Writer, one per active segment) reports its position;
// when it has moved a quarter window past what was populated ahead of it,
// it is queued and a worker populates [max(populated, position),
// position+window) in chunks of at most 1 MiB, taking turns between queued
// writers. The workers are started on demand, at most Workers of them, and
// exit when the queue is empty: a process whose partitions are idle runs no
// prefault goroutine at all, and a partition that has not appended since it
// was opened is never queued, so it holds no populated pages ahead of its
// data.
//
// Rate-aware windows: a worker measures each writer's rate (bytes per
// second, between two of its turns at least 10 ms apart, the later one
// after the writer reported progress, averaged with the previous
// figure; a turn more than horizon after the last measure starts
// it again instead, so that a pause is not taken for slow appends) and
// the window it keeps is about a second of that
// rate (horizon), at least 64 KiB and at most the Writer's own
// window. A slow writer then holds few populated pages ahead of it (pages
// populated long before they are written are written back as zeros by
// the flusher, write-protected, and fault again on the store), and a fast
// one among many slow ones asks for a large window. Until its rate is
// known a writer gets its own window or the budget divided among the
// writers that have appended, whichever is smaller.
//
// Fair share: when the windows asked for add up to more than the budget,
// each is scaled down by the same factor (but not below 64 KiB), so a
// thousand partitions appending round robin each get pages ahead of them
// instead of the first few taking the whole budget, and the writer with
// a thousand times their rate gets a thousand times their window. A
// writer that a worker leaves less than a quarter of its window ahead of
// its position is served before those that are further ahead, and so is
// one waiting for a Preallocate (its next reservation step, which its
// appends may reach before a worker gets through a long queue).
//
// Budget bounds the sum over writers of the populated bytes ahead of their
// positions (each writer's share is recounted whenever a worker serves it,
// and released when it stops). When the budget is spent, writers are served
// only as far as what is left, and those that got nothing are dropped from
// the queue until they report progress again.
//
// Idle writers: a writer that has not reported progress for Idle
// gives its share back when the budget or the fair share runs short (a
// worker looks at most once per sweepEvery), or when no worker has run
// for Idle (the pool's one timer, set when its last worker exits
// while shares are held, looks then): its demand and its share
// leave the pool's counts, and a worker takes the pages it populated past
// its position out of its mapping (File.DropPages; they stay in the page
// cache, so nothing is lost, and the kernel writes them back and may
// evict them like any other page). Without it, partitions that appended
// for a while and then stopped kept the budget until their segments
// rolled, which at a slow partition's rate can be days, and a partition
// that became busy afterwards got no page ahead of it. Its next Advance
// counts it again, and the worker populates its window again from its
// position.
type Pool struct {
	workers int
	budget  int64

	mu      sync.Mutex
	queue   []*Writer    // writers waiting for a worker, FIFO
	urgent  []*Writer    // as queue, for writers less than step ahead or with a Preallocate
	demand  int64        // sum of the writers' rate-based windows
	clock   func() int64 // monotonicNanos; tests set their own pool's
	running int          // live worker goroutines
	ahead   int64        // sum of the writers' counted shares
	flight  int64        // bytes being populated by workers right now
	// counted lists the writers advanced at least once and neither
	// stopped nor found idle since (Writer.slot is each one's
	// index); swept is when the sweep of idle writers last ran (clock).
	counted []*Writer
	swept   int64
	// sweeper is the one timer that sweeps for idle writers when no
	// worker runs while shares are held (armed: it is set), after
	// sweepAfter (Idle+sweepEvery; tests set their own pool's).
	sweeper    *time.Timer
	armed      bool
	sweepAfter time.Duration
	// populate, set by tests on their own pool, replaces File.Prefault
	// for the workers' chunks.
	populate func(f *mmapfile.File, off, n int64) error
}

// minFairWindow is the smallest window a writer gets when the budget is
// shared among many (16 pages).
const minFairWindow = 64 << 10

// horizon is how long, at a writer's measured rate, its window
// lasts; rateInterval is the shortest time over which a rate is measured.
const (
	horizon      = time.Second
	rateInterval = 10 * time.Millisecond
)

// Idle is how long a writer goes without reporting progress
// before it counts as idle (see Pool, idle writers); a pool with
// no worker running looks for idle writers Idle+sweepEvery
// after its last worker exited. sweepEvery is the shortest time
// between two looks (a look goes over every writer). A writer slower
// than a quarter of its window per Idle (at least 16 KiB per
// 10 s) is taken for idle too; that costs it the repopulation of one
// window at its next Advance.
const (
	Idle       = 10 * time.Second
	sweepEvery = time.Second
)

// clockBase and monotonicNanos are the pools' clock, in nanoseconds.
var clockBase = time.Now()

func monotonicNanos() int64 { return int64(time.Since(clockBase)) }

// NewPool returns a pool of at most workers goroutines (≤ 0: one per
// CPU, GOMAXPROCS) that keeps at most budget bytes (≤ 0:
// DefaultBudget) populated ahead of its writers.
func NewPool(workers int, budget int64) *Pool {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if budget <= 0 {
		budget = DefaultBudget
	}
	return &Pool{workers: workers, budget: budget, clock: monotonicNanos, sweepAfter: Idle + sweepEvery}
}

var (
	defaultPoolOnce sync.Once
	defaultPool     *Pool
)

// Default is the pool shared by the process: one worker per CPU
// and DefaultBudget.
func Default() *Pool {
	defaultPoolOnce.Do(func() { defaultPool = NewPool(0, 0) })
	return defaultPool
}

// Ahead returns the populated bytes ahead of the writers, as last counted.
func (pp *Pool) Ahead() int64 {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return pp.ahead
}

// Workers returns the number of worker goroutines running now.
func (pp *Pool) Workers() int {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return pp.running
}

// enqueue queues p unless it is queued, being served or stopped, and
// starts a worker if all running ones are busy. Caller holds pp.mu. A
// writer being served is not queued again (a second worker would serve
// it beside the first, and busy would go false under the first's call):
// its worker takes the latest position on its next turn.
func (pp *Pool) enqueue(p *Writer) {
	if p.queued || p.stopped || p.busy {
		return
	}
	p.queued = true
	if p.allocN > 0 || p.done-p.pos.Load() < p.step.Load() {
		pp.urgent = append(pp.urgent, p)
	} else {
		pp.queue = append(pp.queue, p)
	}
	if pp.running < pp.workers && pp.running < len(pp.queue)+len(pp.urgent) {
		pp.running++
		go pp.work()
	}
}

// work serves queued writers one chunk at a time until the queue is empty.
func (pp *Pool) work() {
	pp.mu.Lock()
	for len(pp.queue)+len(pp.urgent) > 0 {
		q := &pp.urgent
		if len(*q) == 0 {
			q = &pp.queue
		}
		p := (*q)[0]
		(*q)[0] = nil
		*q = (*q)[1:]
		p.queued = false
		dropped := p.dropN > 0 && pp.drop(p)
		if p.allocN > 0 {
			pp.preallocate(p)
		}
		if dropped && !p.isCounted() {
			// An idle writer's turn is its drop: populating its window
			// again would undo it. It is queued again at its next
			// Advance (sweepIdle cleared next), the one that counts it.
			continue
		}
		if pp.budget-pp.ahead-pp.flight < chunk || pp.demand > pp.budget {
			pp.sweepIdle()
		}
		start, n := p.nextChunk()
		if n <= 0 {
			if p.allocN > 0 {
				// A Preallocate made while the one above ran (p was
				// busy, so not queued): no chunk brings p back.
				pp.enqueue(p)
			}
			continue
		}
		p.busy = true
		pp.flight += n
		f := p.f // Retarget changes it only while p is not busy
		pp.mu.Unlock()
		var err error
		if pp.populate != nil {
			err = pp.populate(f, start, n)
		} else {
			err = f.Prefault(start, n)
		}
		pp.mu.Lock()
		pp.flight -= n
		p.busy = false
		if err != nil {
			if !errors.Is(err, mmapfile.ErrClosed) && p.err == nil {
				p.err = err
			}
			p.stopped = true
		} else {
			p.done = start + n
			pp.recount(p)
			pp.enqueue(p) // more to do is found out on its next turn
		}
		if p.stopped {
			pp.release(p)
		}
		p.idle.Broadcast() // Stop and Retarget wait for busy to go
	}
	pp.queue = pp.queue[:0:0] // let a long queue's array go
	pp.urgent = pp.urgent[:0:0]
	pp.running--
	if pp.running == 0 {
		pp.armSweeper()
	}
	pp.mu.Unlock()
}

// armSweeper sets the sweeper to run after Idle, unless it is
// set or no writer holds a share: when every partition has stopped
// appending, no worker runs to find them idle, and their pages would
// stay mapped. Caller holds pp.mu.
func (pp *Pool) armSweeper() {
	if pp.armed || pp.ahead <= 0 {
		return
	}
	pp.armed = true
	if pp.sweeper == nil {
		pp.sweeper = time.AfterFunc(pp.sweepAfter, pp.sweepLater)
	} else {
		pp.sweeper.Reset(pp.sweepAfter)
	}
}

// sweepLater is the sweeper's run: a sweep for idle writers (queuing
// those with pages to drop, which starts a worker), set again while
// shares are held and no worker runs.
func (pp *Pool) sweepLater() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.armed = false
	pp.swept = 0
	pp.sweepIdle()
	if pp.running == 0 {
		pp.armSweeper()
	}
}

// preallocate runs p's pending Preallocate request (see
// Writer.Preallocate) with p busy, so Stop and Retarget wait for it.
// Caller holds pp.mu, which is released during the call. A failure is
// dropped: the Grow that takes the range reports its own.
func (pp *Pool) preallocate(p *Writer) {
	off, n := p.allocAt, p.allocN
	p.allocN = 0
	if p.stopped {
		return
	}
	pp.busyCall(p, func(f *mmapfile.File) { _ = f.Preallocate(off, n) })
}

// busyCall runs call on p's File with p busy (Stop and Retarget wait
// for it) and pp.mu released; caller holds pp.mu.
func (pp *Pool) busyCall(p *Writer, call func(*mmapfile.File)) {
	p.busy = true
	f := p.f
	pp.mu.Unlock()
	call(f)
	pp.mu.Lock()
	p.busy = false
	p.idle.Broadcast()
}

// sweepIdle gives back the shares of the writers that have been idle for
// Idle (see Pool, idle writers), at most once per
// sweepEvery, and queues each one whose populated pages past its
// position are to be dropped. Caller holds pp.mu.
func (pp *Pool) sweepIdle() {
	now := pp.clock()
	if now-pp.swept < int64(sweepEvery) {
		return
	}
	pp.swept = now
	for i := len(pp.counted) - 1; i >= 0; i-- { // release moves the last writer to i
		p := pp.counted[i]
		if p.busy || p.queued || p.stopped || now-p.active < int64(Idle) {
			continue
		}
		pp.release(p)
		p.next.Store(0)
		if from := (p.pos.Load() + pageSize - 1) &^ (pageSize - 1); p.done > from {
			p.dropAt, p.dropN = from, p.done-from
			p.done = from
			pp.enqueue(p)
		}
	}
}

// drop takes the pages sweepIdle found populated past an idle writer's
// position out of its mapping, with p busy (so Stop and Retarget wait
// for it), unless the writer came back meanwhile (it is counted again,
// and will write into them). It reports whether it dropped them. Caller
// holds pp.mu, which is released during the call. A failure is dropped:
// the pages stay mapped, and nothing else depends on it.
func (pp *Pool) drop(p *Writer) bool {
	off, n := p.dropAt, p.dropN
	p.dropN = 0
	if p.stopped || p.isCounted() {
		return false
	}
	pp.busyCall(p, func(f *mmapfile.File) { _ = f.DropPages(off, n) })
	return true
}

// recount updates p's share of the budget from its current position.
// Caller holds pp.mu.
func (pp *Pool) recount(p *Writer) {
	share := max(p.done-p.pos.Load(), 0)
	pp.ahead += share - p.share
	p.share = share
}

// release returns p's share (and its place among the writers). Caller
// holds pp.mu.
func (pp *Pool) release(p *Writer) {
	pp.ahead -= p.share
	p.share = 0
	pp.demand -= p.demand
	p.demand = 0
	if p.isCounted() {
		last := pp.counted[len(pp.counted)-1]
		pp.counted[p.slot], last.slot = last, p.slot
		pp.counted[len(pp.counted)-1] = nil
		pp.counted = pp.counted[:len(pp.counted)-1]
		p.slot = -1
	}
}

// count adds p to the pool's writers, unless it is counted or stopped.
// Caller holds pp.mu.
func (pp *Pool) count(p *Writer) {
	if p.isCounted() || p.stopped {
		return
	}
	p.slot = len(pp.counted)
	pp.counted = append(pp.counted, p)
}

// Writer keeps the pages just ahead of one writer populated, using the
// workers of a Pool.
//
// The writer reports its position with Advance after its stores. Advance is
// cheap on the append path: an integer compare, and only when the position
// has crossed the next quarter-window boundary an atomic store and a queue
// operation under the pool's lock. Populating a page the writer is storing
// into at the same moment is harmless: MADV_POPULATE_WRITE only faults pages
// in, it never changes their contents.
//
// Why off the append path: a store into a fresh mapped page pays its page
// fault, while MADV_POPULATE_WRITE provides pages about three times
// faster (bench/RESULTS.md, prefault.Writer); run a window ahead, that cost
// leaves the append path on a machine with a spare core.
//
// Advance must be called by one goroutine (the writer). Stop may be called
// from any goroutine, more than once.
type Writer struct {
	pool   *Pool
	f      *mmapfile.File
	window int64

	pos  atomic.Int64 // latest position reported by Advance
	step atomic.Int64 // a quarter of the window in force (fair share)
	// next is the position at which Advance next takes the pool's lock
	// (set by the writer; cleared by sweepIdle, so that a writer back
	// from idle is counted and queued at its first Advance).
	next atomic.Int64
	last int64 // writer only: previous position, to detect rewinds

	// Guarded by pool.mu.
	done    int64 // pages below this offset have been populated
	share   int64 // populated bytes ahead of pos, as counted in pool.ahead
	slot    int   // index in pool.counted; -1: not counted (isCounted)
	active  int64 // pool.clock at the last Advance that took the lock
	queued  bool
	busy    bool // a worker is populating a chunk of it
	stopped bool
	// rate is the writer's measured rate in bytes per second (0: not yet
	// known), from ratePos at rateAt (pool.clock) to the latest turn;
	// demand is the window that rate asks for, as counted in pool.demand.
	rate    int64
	ratePos int64
	rateAt  int64
	demand  int64
	// allocAt and allocN are the range a worker preallocates (File.
	// Preallocate) before its next chunk; allocN 0: none.
	allocAt int64
	allocN  int64
	// dropAt and dropN are the range of populated pages a worker takes
	// out of the mapping of an idle writer (File.DropPages) on its next
	// turn; dropN 0: none.
	dropAt int64
	dropN  int64
	err    error      // first error other than the File being closed
	idle   *sync.Cond // signalled when busy goes false
}

// isCounted reports whether p is among its pool's writers (pool.counted).
// Caller holds pool.mu.
func (p *Writer) isCounted() bool { return p.slot >= 0 }

// NewWriter returns a Writer of f in the default pool.
func NewWriter(f *mmapfile.File, window int64) *Writer {
	return Default().NewWriter(f, window)
}

// NewWriter returns a writer's Writer that keeps window bytes (≤ 0:
// DefaultWindow) of f populated ahead of the position reported
// with Advance. Nothing is populated before the first Advance.
func (pp *Pool) NewWriter(f *mmapfile.File, window int64) *Writer {
	if window <= 0 {
		window = DefaultWindow
	}
	p := &Writer{pool: pp, f: f, window: window, slot: -1}
	p.step.Store(window / 4)
	p.idle = sync.NewCond(&pp.mu)
	return p
}

// Advance reports that the writer has written up to pos. It never blocks
// for long (only on the pool's lock, at quarter-window steps). A position
// lower than the previous one (after a truncation) restarts population
// from there.
func (p *Writer) Advance(pos int64) {
	rewound := pos < p.last
	p.last = pos
	if pos < p.next.Load() && !rewound {
		return
	}
	p.next.Store(pos + max(p.step.Load(), pageSize))
	p.pos.Store(pos)
	pp := p.pool
	pp.mu.Lock()
	pp.count(p)
	p.active = pp.clock()
	if rewound {
		// Pages after pos may have gone with the file's tail.
		p.done = min(p.done, pos)
	}
	pp.recount(p)
	pp.enqueue(p)
	pp.mu.Unlock()
}

// Retarget moves p to f, the File its writer's file was mapped again as
// (File.Remap), once a chunk being populated in the old mapping is done;
// the caller closes the old File after Retarget returns.
// The new mapping has none of the old one's pages mapped, so population
// starts again from the writer's position, and p's share is recounted
// from there; the next Advance queues p. Writer only.
func (p *Writer) Retarget(f *mmapfile.File) {
	pp := p.pool
	pp.mu.Lock()
	defer pp.mu.Unlock()
	for p.busy {
		p.idle.Wait()
	}
	p.f = f
	p.done = 0
	p.dropN = 0 // the new mapping has none of the old one's pages
	pp.recount(p)
	p.next.Store(0)
}

// Preallocate asks a worker to allocate the blocks of [off, off+n) of
// p's file (File.Preallocate) before it populates more pages, replacing a
// request not yet taken: the writer's next reservation step then finds
// them allocated instead of waiting on the disk under an append. It
// never blocks for long (the pool's lock). Writer only.
func (p *Writer) Preallocate(off, n int64) {
	pp := p.pool
	pp.mu.Lock()
	p.allocAt, p.allocN = off, n
	pp.enqueue(p)
	pp.mu.Unlock()
}

// Grew tells p that its file's reserved size grew, so the next Advance
// queues it (the window may have been cut short by the old size). Writer
// only.
func (p *Writer) Grew() { p.next.Store(0) }

// nextChunk returns the range a worker should populate next for p, within
// the window, the file's reserved size and the pool's budget. Caller holds
// pool.mu.
func (p *Writer) nextChunk() (start, n int64) {
	if p.stopped {
		return 0, 0
	}
	pp := p.pool
	pos := p.pos.Load()
	pp.recount(p)
	start = max(p.done, pos)
	window := p.windowAt(pos)
	p.step.Store(window / 4)
	target := min(pos+window, p.f.Size())
	n = min(target-start, chunk, pp.budget-pp.ahead-pp.flight)
	return start, n
}

// windowAt measures p's rate at its position pos and returns the window
// it gets now (see Pool, rate-aware windows and fair share).
// Caller holds pool.mu.
func (p *Writer) windowAt(pos int64) int64 {
	pp := p.pool
	now := pp.clock()
	switch dt := now - p.rateAt; {
	case p.rateAt == 0 || pos < p.ratePos || dt > int64(horizon):
		// First turn, a rewind, or a writer back from a pause: an
		// interval that spans the pause would put its rate at a small
		// fraction of what it appends at now (the previous figure, if
		// any, is kept until the next turn measures).
		p.rateAt, p.ratePos = now, pos
	case dt >= int64(rateInterval) && pos > p.ratePos:
		// Only a turn after the writer reported progress measures: the
		// position moves in quarter-window steps, and the chunks of one
		// turn's window (or a long queue) can take longer than
		// rateInterval, so a turn at the same position says nothing of
		// the rate (measuring zero there halved it at every chunk).
		r := int64(float64(pos-p.ratePos) * float64(time.Second) / float64(dt))
		if p.rate > 0 {
			r = (r + p.rate) / 2
		}
		p.rate, p.rateAt, p.ratePos = max(r, 1), now, pos
	}
	if p.rate == 0 {
		return min(p.window, max(pp.budget/int64(max(len(pp.counted), 1)), minFairWindow))
	}
	demand := int64(float64(p.rate) * float64(horizon) / float64(time.Second))
	demand = min(max(demand, minFairWindow), p.window)
	pp.demand += demand - p.demand
	p.demand = demand
	if pp.demand <= pp.budget {
		return demand
	}
	return max(int64(float64(demand)*float64(pp.budget)/float64(pp.demand)), minFairWindow)
}

// Stop takes p out of its pool, waits for a chunk being populated for it,
// and returns the first error met, other than the File being closed.
func (p *Writer) Stop() error {
	pp := p.pool
	pp.mu.Lock()
	defer pp.mu.Unlock()
	p.stopped = true
	for p.busy {
		p.idle.Wait()
	}
	pp.release(p)
	// A queued entry is skipped by the worker (nextChunk of a stopped p).
	return p.err
}
