package cleaner

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTask is due `due` times, then asks for rechecks while recheck is
// set.
type fakeTask struct {
	mu      sync.Mutex
	name    string
	due     int
	ratio   float64
	recheck bool
	err     error
	cleaned int
	order   *[]string
	running atomic.Int32
	maxRun  *atomic.Int32
	block   chan struct{}
	started chan struct{}
	onEval  func() // called at each Evaluate, after it read the task
}

func (f *fakeTask) Evaluate(time.Time) (Evaluation, error) {
	f.mu.Lock()
	e := Evaluation{Due: f.due > 0, Ratio: f.ratio, Recheck: f.recheck}
	f.mu.Unlock()
	if f.onEval != nil {
		f.onEval()
	}
	return e, nil
}

func (f *fakeTask) Clean(w *Worker, _ time.Time) error {
	if w == nil || w.Map() == nil {
		return errors.New("no worker")
	}
	if f.maxRun != nil {
		n := f.maxRun.Add(1)
		defer f.maxRun.Add(-1)
		_ = n
	}
	if f.started != nil {
		close(f.started)
	}
	if f.block != nil {
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.due--
	f.cleaned++
	if f.order != nil {
		*f.order = append(*f.order, f.name)
	}
	return f.err
}

// TestPoolCleansDirtiestFirst: due logs are cleaned, the dirtiest first,
// until none is due; then no worker goroutine is left.
func TestPoolCleansDirtiestFirst(t *testing.T) {
	before := runtime.NumGoroutine()
	p := NewPool(PoolConfig{Threads: 1, MapBytes: 1 << 20})
	defer p.Close()
	var order []string
	a := &fakeTask{name: "a", due: 1, ratio: 0.6, order: &order}
	b := &fakeTask{name: "b", due: 2, ratio: 0.9, order: &order}
	block := make(chan struct{})
	started := make(chan struct{})
	first := &fakeTask{name: "first", due: 1, ratio: 0.1, order: &order, block: block, started: started}
	p.Notify(first) // holds the only worker while a and b are notified
	<-started
	p.Notify(a)
	p.Notify(b)
	close(block)
	p.Idle()
	if got := len(order); got != 4 || order[0] != "first" || order[1] != "b" || order[2] != "b" || order[3] != "a" {
		t.Fatalf("cleaning order %v", order)
	}
	waitGoroutines(t, before)
}

// TestPoolRecheck: a log not due but awaiting time is looked at again
// after Backoff by the timer; one with nothing that time would change is
// forgotten.
func TestPoolRecheck(t *testing.T) {
	p := NewPool(PoolConfig{Threads: 2, MapBytes: 1 << 20, Backoff: 20 * time.Millisecond})
	defer p.Close()
	r := &fakeTask{recheck: true}
	p.Notify(r)
	p.Idle()
	r.mu.Lock()
	r.due, r.recheck = 1, false
	r.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		c := r.cleaned
		r.mu.Unlock()
		if c == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the recheck never ran")
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.Idle()
	p.mu.Lock()
	_, watched := p.watch[r]
	armed := !p.wakeAt.IsZero()
	p.mu.Unlock()
	if watched || armed {
		t.Fatalf("a log with nothing due stays watched (%v) or the timer armed (%v)", watched, armed)
	}
}

// TestPoolNotifyDuringEvaluate: a Notify that comes while the only worker
// is evaluating the log (it rolled after the evaluation read it) is not
// lost: the worker looks again before it ends, rather than leaving the log
// to the next recheck (a Backoff later).
func TestPoolNotifyDuringEvaluate(t *testing.T) {
	p := NewPool(PoolConfig{Threads: 1, MapBytes: 1 << 20, Backoff: time.Hour})
	defer p.Close()
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	r := &fakeTask{recheck: true}
	r.onEval = func() {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
	}
	p.Notify(r)
	<-entered // the worker is evaluating the log as it was: nothing due
	r.mu.Lock()
	r.due, r.recheck = 1, false
	r.mu.Unlock()
	p.Notify(r) // the log rolled: now it is due
	close(release)
	p.Idle()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cleaned != 1 {
		t.Fatalf("cleaned %d times after a Notify during an evaluation, want 1 (evaluated %d times)", r.cleaned, calls.Load())
	}
}

// TestPoolFailedLogLeftAlone: a failed cleaning is reported and the log
// left alone until notified again; a stopped one is not a failure.
func TestPoolFailedLogLeftAlone(t *testing.T) {
	p := NewPool(PoolConfig{MapBytes: 1 << 20})
	defer p.Close()
	var reported atomic.Int32
	p.SetOnError(func(Task, error) { reported.Add(1) })
	bad := &fakeTask{due: 5, err: ErrUncleanable}
	p.Notify(bad)
	p.Idle()
	if bad.cleaned != 1 || reported.Load() != 1 || !errors.Is(p.Err(bad), ErrUncleanable) {
		t.Fatalf("cleaned %d times, %d reports, err %v", bad.cleaned, reported.Load(), p.Err(bad))
	}
	stopped := &fakeTask{due: 1, err: ErrStopped}
	p.Notify(stopped)
	p.Idle()
	if p.Err(stopped) != nil || reported.Load() != 1 {
		t.Fatal("a stopped round counted as a failure")
	}
	bad.mu.Lock()
	bad.err = nil
	bad.mu.Unlock()
	p.Notify(bad)
	p.Idle()
	if bad.cleaned != 5 || p.Err(bad) != nil {
		t.Fatalf("notified again: cleaned %d, err %v", bad.cleaned, p.Err(bad))
	}
}

// TestPoolThreads: at most Threads logs are cleaned at once, and Forget
// waits for a running cleaning.
func TestPoolThreads(t *testing.T) {
	p := NewPool(PoolConfig{Threads: 2, MapBytes: 2 << 20})
	defer p.Close()
	var running atomic.Int32
	block := make(chan struct{})
	// A failed check must still release the blocked cleanings, or the
	// deferred Close waits for them forever.
	release := sync.OnceFunc(func() { close(block) })
	defer release()
	var tasks []*fakeTask
	for i := 0; i < 5; i++ {
		ft := &fakeTask{due: 1, ratio: float64(i), maxRun: &running, block: block}
		tasks = append(tasks, ft)
		p.Notify(ft)
	}
	deadline := time.Now().Add(5 * time.Second)
	for running.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if n := running.Load(); n != 2 {
		t.Fatalf("%d cleanings at once, want 2", n)
	}
	forgot := make(chan struct{})
	go func() {
		p.Forget(tasks[4]) // the dirtiest: running
		close(forgot)
	}()
	select {
	case <-forgot:
		t.Fatal("Forget returned while its log was being cleaned")
	case <-time.After(20 * time.Millisecond):
	}
	release()
	<-forgot
	p.Idle()
}

func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before", runtime.NumGoroutine(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
