package cleaner

import (
	"errors"
	"sync"
	"time"
)

// PoolConfig configures a Pool (Kafka's broker-wide log.cleaner.*
// settings).
type PoolConfig struct {
	// Threads is how many logs are cleaned at once (log.cleaner.threads).
	// Default 1.
	Threads int
	// MapBytes is the memory of the offset maps of all threads together
	// (log.cleaner.dedupe.buffer.size): each thread's map takes
	// MapBytes/Threads, reserved when the thread first runs and touched
	// only as far as a round needs. Default 128 MiB.
	MapBytes int64
	// IOBytesPerSecond bounds the bytes the threads read and write per
	// second together (log.cleaner.io.max.bytes.per.second). Default (0):
	// unbounded.
	IOBytesPerSecond float64
	// Backoff is how soon a log whose cleaning is not due yet, but may
	// become due with time alone (compaction lags, an open transaction
	// holding the last stable offset), is looked at again
	// (log.cleaner.backoff.ms). Default 15 s.
	Backoff time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Defaults of PoolConfig (Kafka's).
const (
	DefaultThreads  = 1
	DefaultMapBytes = 128 << 20
	DefaultBackoff  = 15 * time.Second
)

// Task is a log the pool cleans (the root package's Log).
type Task interface {
	// Evaluate plans a cleaning at now (cheap: segment sizes and
	// offsets).
	Evaluate(now time.Time) (Evaluation, error)
	// Clean runs one round with w's offset map and buffers.
	Clean(w *Worker, now time.Time) error
}

// Evaluation is what Task.Evaluate found.
type Evaluation struct {
	// Due: clean now. Ratio orders due logs (the dirtiest first).
	Due   bool
	Ratio float64
	// Recheck: not due, but time alone may make it due (look again after
	// Backoff); otherwise only new data or new settings do (Notify).
	Recheck bool
}

// Pool cleans the logs that ask for it on a few workers shared by every
// log of the process: no goroutine per log, and none at all while no log
// is due. A log asks with Notify (it rolled a segment, opened, or its
// settings changed); the pool evaluates the logs that asked, cleans the
// dirtiest due one, and forgets a log once it has nothing due and nothing
// that time alone would make due. Workers are goroutines started on
// demand, up to Threads, that end when no log is due; a timer (no
// goroutine) wakes the pool for the logs awaiting a recheck.
type Pool struct {
	cfg      PoolConfig
	throttle *Throttle

	mu sync.Mutex // guards everything below
	// watch holds the logs to look at, each with a count of its Notify
	// calls (a look that began before a Notify does not forget it).
	watch map[Task]uint64
	// notifies counts every Notify: a look that found nothing to clean
	// looks again when one came meanwhile, because the worker that runs
	// it is why that Notify started no other.
	notifies uint64
	running  map[Task]bool
	failed   map[Task]error
	workers  int
	free     []*Worker
	timer    *time.Timer
	wakeAt   time.Time
	closed   bool
	idleCond *sync.Cond
	// OnError, when set before use, is told of each failed cleaning.
	onError func(Task, error)
}

// NewPool returns a pool with the given configuration (zero fields:
// defaults).
func NewPool(cfg PoolConfig) *Pool {
	if cfg.Threads <= 0 {
		cfg.Threads = DefaultThreads
	}
	if cfg.MapBytes <= 0 {
		cfg.MapBytes = DefaultMapBytes
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Pool{cfg: cfg, throttle: NewThrottle(cfg.IOBytesPerSecond),
		watch: map[Task]uint64{}, running: map[Task]bool{}, failed: map[Task]error{}}
	p.idleCond = sync.NewCond(&p.mu)
	return p
}

// Config returns the pool's configuration, defaults filled in.
func (p *Pool) Config() PoolConfig { return p.cfg }

// SetOnError sets a function told of each failed cleaning (a log the pool
// then leaves alone until it is notified again).
func (p *Pool) SetOnError(f func(Task, error)) {
	p.mu.Lock()
	p.onError = f
	p.mu.Unlock()
}

// Notify asks the pool to look at t.
func (p *Pool) Notify(t Task) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	delete(p.failed, t)
	p.watch[t]++
	p.notifies++
	p.startLocked()
}

// Forget drops t (its log is closing) and waits until no worker is
// cleaning it. The log must make its running round stop (Round.Stop)
// before, or Forget waits for the round's end.
func (p *Pool) Forget(t Task) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.watch, t)
	delete(p.failed, t)
	for p.running[t] {
		p.idleCond.Wait()
	}
}

// Err returns the error of t's last failed cleaning, if the pool left it
// alone because of one.
func (p *Pool) Err(t Task) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed[t]
}

// Idle waits until no worker runs and no log is due (for tests and
// offline tools); logs awaiting a recheck stay watched.
func (p *Pool) Idle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.workers > 0 {
		p.idleCond.Wait()
	}
}

// Close stops the pool: workers finish the round they run, the timer is
// stopped and the maps are unmapped.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
	}
	for p.workers > 0 {
		p.idleCond.Wait()
	}
	free := p.free
	p.free = nil
	p.mu.Unlock()
	var errs []error
	for _, w := range free {
		errs = append(errs, w.Close())
	}
	return errors.Join(errs...)
}

// startLocked starts a worker when one may help.
func (p *Pool) startLocked() {
	if p.closed || p.workers >= p.cfg.Threads || len(p.watch) <= len(p.running) {
		return
	}
	p.workers++
	go p.work()
}

// wake is the timer's function: rechecks are due.
func (p *Pool) wake() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wakeAt = time.Time{}
	p.startLocked()
}

// armLocked sets the timer for a recheck after Backoff.
func (p *Pool) armLocked() {
	at := p.cfg.Now().Add(p.cfg.Backoff)
	if !p.wakeAt.IsZero() && !p.wakeAt.After(at) {
		return
	}
	p.wakeAt = at
	if p.timer == nil {
		p.timer = time.AfterFunc(p.cfg.Backoff, p.wake)
	} else {
		p.timer.Reset(p.cfg.Backoff)
	}
}

func (p *Pool) work() {
	var w *Worker
	defer func() {
		p.mu.Lock()
		if w != nil {
			_ = w.Release()
			p.free = append(p.free, w)
		}
		p.workers--
		p.idleCond.Broadcast()
		p.mu.Unlock()
	}()
	for {
		t := p.next()
		if t == nil {
			return
		}
		if w == nil {
			p.mu.Lock()
			if n := len(p.free); n > 0 {
				w, p.free = p.free[n-1], p.free[:n-1]
			}
			p.mu.Unlock()
			if w == nil {
				var err error
				if w, err = NewWorker(p.cfg.MapBytes/int64(p.cfg.Threads), p.throttle); err != nil {
					p.done(t, err)
					return
				}
			}
		}
		p.done(t, t.Clean(w, p.cfg.Now()))
	}
}

// done ends t's cleaning; a failed log is left alone (Kafka marks it
// uncleanable) until notified again. t stays watched otherwise: the next
// look finds whether the round left more to do (a full offset map).
func (p *Pool) done(t Task, err error) {
	p.mu.Lock()
	delete(p.running, t)
	var report func(Task, error)
	if err != nil && !errors.Is(err, ErrStopped) {
		delete(p.watch, t)
		p.failed[t] = err
		report = p.onError
	}
	p.idleCond.Broadcast()
	p.mu.Unlock()
	if report != nil {
		report(t, err)
	}
}

// next evaluates the watched logs no worker is cleaning and returns the
// dirtiest due one, marked running; nil when none is due and no Notify
// came while it looked.
func (p *Pool) next() Task {
	for {
		t, again := p.look()
		if !again {
			return t
		}
	}
}

// look is one pass of next; again when it found nothing to clean but a
// log was notified during the pass.
func (p *Pool) look() (_ Task, again bool) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, false
	}
	notifies := p.notifies
	var cands []Task
	var gens []uint64
	for t, g := range p.watch {
		if !p.running[t] {
			cands = append(cands, t)
			gens = append(gens, g)
		}
	}
	p.mu.Unlock()
	now := p.cfg.Now()
	var best Task
	bestRatio := -1.0
	var forget []int
	recheck := false
	for i, t := range cands {
		e, err := t.Evaluate(now)
		switch {
		case err != nil:
			p.done(t, err)
		case e.Due:
			if e.Ratio > bestRatio {
				best, bestRatio = t, e.Ratio
			}
		case e.Recheck:
			recheck = true
		default:
			forget = append(forget, i)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, i := range forget {
		if g, ok := p.watch[cands[i]]; ok && g == gens[i] {
			delete(p.watch, cands[i])
		}
	}
	if recheck && !p.closed {
		p.armLocked()
	}
	if p.closed {
		return nil, false
	}
	if best != nil {
		if _, ok := p.watch[best]; ok && !p.running[best] {
			p.running[best] = true
			return best, false
		}
		// forgotten, or taken by another worker, meanwhile
	}
	return nil, p.notifies != notifies
}
