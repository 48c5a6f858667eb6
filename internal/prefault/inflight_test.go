package prefault

import (
	"sync"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/mmapfile"
	"github.com/partlog/partlog/internal/testutil"
)

// heldPool returns a pool whose workers' chunks block until release is
// called, and a channel that receives each chunk's length as a worker
// starts it. check, if set, runs (under the pool's lock) at each start.
func heldPool(t *testing.T, workers int, budget int64, check func(pp *Pool)) (pp *Pool, started <-chan int64, release func()) {
	pp = NewPool(workers, budget)
	ch := make(chan int64, 64)
	gate := make(chan struct{})
	var once sync.Once
	pp.populate = func(f *mmapfile.File, off, n int64) error {
		if check != nil {
			pp.mu.Lock()
			check(pp)
			pp.mu.Unlock()
		}
		ch <- n
		<-gate
		return f.Prefault(off, n)
	}
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return pp, ch, release
}

func recvChunk(t *testing.T, started <-chan int64) int64 {
	t.Helper()
	select {
	case n := <-started:
		return n
	case <-time.After(testutil.SettleTimeout):
		t.Fatal("no worker started a chunk")
		return 0
	}
}

// TestPoolStopWaitsForChunkInFlight: Stop called while a worker populates
// a chunk for the writer waits for that chunk, and returns once it is
// done: the worker's end of the chunk wakes it (without that wake-up Stop
// would wait for ever).
func TestPoolStopWaitsForChunkInFlight(t *testing.T) {
	pp, started, release := heldPool(t, 1, 64<<20, nil)
	f, err := mmapfile.Open(testutil.TempPath(t, "w"), mmapfile.Options{Create: true, Reserve: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pp.NewWriter(f, 4<<20)
	w.Advance(1)
	recvChunk(t, started)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop() }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while its chunk was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testutil.SettleTimeout):
		t.Fatal("Stop still waits after the chunk in flight ended")
	}
}

// TestPoolBudgetCountsChunksInFlight: with two workers populating at
// once, the bytes populated ahead plus those being populated never exceed
// the budget: a worker sizes its chunk by what the others have in
// flight, not only by what is done. The first writer, alone, gets a whole
// chunk; two more then share the rest of the budget, of which the second
// worker may take only what the first chunk left.
func TestPoolBudgetCountsChunksInFlight(t *testing.T) {
	const budget = chunk + chunk/4
	over := make(chan int64, 8)
	pp, started, release := heldPool(t, 2, budget, func(pp *Pool) {
		if pp.ahead+pp.flight > pp.budget {
			select {
			case over <- pp.ahead + pp.flight:
			default:
			}
		}
	})
	var ws []*Writer
	for i := range 3 {
		f, err := mmapfile.Open(testutil.TempPath(t, "w"+string(rune('0'+i))), mmapfile.Options{Create: true, Reserve: 8 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ws = append(ws, pp.NewWriter(f, 4<<20))
	}
	ws[0].Advance(1)
	n1 := recvChunk(t, started)
	// The second worker starts for the second writer once a third is
	// queued behind it.
	ws[1].Advance(1)
	ws[2].Advance(1)
	n2 := recvChunk(t, started)
	if n1+n2 > budget {
		t.Errorf("two chunks of %d and %d bytes in flight at once, over the budget of %d", n1, n2, budget)
	}
	select {
	case v := <-over:
		t.Errorf("%d bytes ahead or in flight, over the budget of %d", v, budget)
	default:
	}
	release()
	for _, w := range ws {
		if err := w.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPoolStopWaitsForBusyCall: Stop waits while a writer's preallocation
// or page drop runs outside the pool's lock (busyCall), and returns once
// it ends: the call's end wakes it, as a chunk's end does.
func TestPoolStopWaitsForBusyCall(t *testing.T) {
	pp := NewPool(1, 64<<20)
	f, err := mmapfile.Open(testutil.TempPath(t, "w"), mmapfile.Options{Create: true, Reserve: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pp.NewWriter(f, 4<<20)
	entered, hold, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		pp.mu.Lock()
		defer pp.mu.Unlock()
		pp.busyCall(w, func(*mmapfile.File) { close(entered); <-hold })
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop() }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a busy call ran", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(hold)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testutil.SettleTimeout):
		t.Fatal("Stop still waits after the busy call ended")
	}
	<-done
}
