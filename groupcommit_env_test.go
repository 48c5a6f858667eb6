package partlog

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partlog/partlog/segment"
)

// fakeCommitEnv is a commitEnv without a log: an end offset the test
// raises, a durable offset its flushes move, and fsyncs that take a
// fixed time and can be made to fail.
type fakeCommitEnv struct {
	flushMu   sync.Mutex
	mu        sync.Mutex // guards end, durable, inFlush, the counts
	end       int64
	durable   atomic.Int64
	fsyncs    int
	inFlush   int
	maxFlush  int
	fail      error
	fsyncTime time.Duration
	lone      atomic.Bool
}

func (e *fakeCommitEnv) durableOffset() int64                 { return e.durable.Load() }
func (e *fakeCommitEnv) truncationGen() uint64                { return 0 }
func (e *fakeCommitEnv) truncatedBelow(uint64, int64) bool    { return false }
func (e *fakeCommitEnv) activeEnd() (*segment.Segment, int64) { return nil, 0 }
func (e *fakeCommitEnv) lockFlush()                           { e.flushMu.Lock() }
func (e *fakeCommitEnv) unlockFlush()                         { e.flushMu.Unlock() }

func (e *fakeCommitEnv) planFlush(p *flushPlan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	p.leo = e.end
	return nil
}

func (e *fakeCommitEnv) fsyncPlan(p *flushPlan) error {
	e.mu.Lock()
	e.fsyncs++
	e.inFlush++
	e.maxFlush = max(e.maxFlush, e.inFlush)
	fail := e.fail
	e.mu.Unlock()
	time.Sleep(e.fsyncTime)
	e.mu.Lock()
	e.inFlush--
	e.mu.Unlock()
	return fail
}

func (e *fakeCommitEnv) finishFlush(p *flushPlan, err error, next *flushPlan, lone bool) (bool, error) {
	e.lone.Store(lone)
	if err != nil {
		return false, err
	}
	if p.leo > e.durable.Load() {
		e.durable.Store(p.leo)
	}
	if next == nil {
		return false, nil
	}
	return e.planFlush(next) == nil, nil
}

func (e *fakeCommitEnv) append() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.end++
	return e.end
}

// TestGroupCommitWithoutLog drives the group commit through its
// environment alone: writers that each append and wait share flushes
// (fewer fsyncs than waits), never run two flushes at once, and each
// returns once the durable offset covers its append; a failed fsync
// reaches the callers it was to cover.
func TestGroupCommitWithoutLog(t *testing.T) {
	var syncers atomic.Int32
	env := &fakeCommitEnv{fsyncTime: time.Millisecond}
	c := &groupCommit{env: env, syncers: &syncers}
	const writers, rounds = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				off := env.append()
				if err := c.wait(context.Background(), off, 0); err != nil {
					errs <- err
					return
				}
				if d := env.durableOffset(); d < off {
					errs <- errors.New("returned before its offset was durable")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if env.fsyncs >= writers*rounds {
		t.Errorf("%d fsyncs for %d waits: no flush was shared", env.fsyncs, writers*rounds)
	}
	if env.maxFlush != 1 {
		t.Errorf("%d flushes ran at once", env.maxFlush)
	}
	if syncers.Load() != 0 || c.running != nil || c.gathering != nil {
		t.Errorf("left behind: %d syncers, running %p, gathering %p", syncers.Load(), c.running, c.gathering)
	}

	boom := errors.New("fsync failed")
	env.mu.Lock()
	env.fail = boom
	env.mu.Unlock()
	if err := c.wait(context.Background(), env.append(), 0); !errors.Is(err, boom) {
		t.Fatalf("wait across a failed fsync: %v, want %v", err, boom)
	}
}
