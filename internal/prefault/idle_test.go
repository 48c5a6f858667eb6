package prefault

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/mmapfile"
	"github.com/partlog/partlog/internal/testutil"
)

// TestPrefaultIdleWriterGivesBack: a writer that took the whole budget
// and then stopped appending holds it until it has been idle for
// Idle; then a busy writer gets pages ahead of it, the idle
// one's populated pages leave its mapping, and when the idle writer
// appends again it is counted and populated again.
func TestPrefaultIdleWriterGivesBack(t *testing.T) {
	var clock atomic.Int64
	clock.Store(int64(time.Millisecond))
	pool := NewPool(1, 1<<20)
	pool.clock = clock.Load
	var ps [2]*Writer
	for i := range ps {
		f, err := mmapfile.Open(testutil.TempPath(t, fmt.Sprint("w", i)), mmapfile.Options{Create: true, Reserve: 16 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ps[i] = pool.NewWriter(f, 4<<20)
	}
	idle, busy := ps[0], ps[1]
	idle.Advance(0)
	waitPoolIdle(pool)
	if a := pool.Ahead(); a != 1<<20 {
		t.Fatalf("%d bytes ahead, want the whole 1 MiB budget", a)
	}
	mapped := func(p *Writer) int { return testutil.PresentPages(t, p.f.Bytes()[:4<<20]) }
	if n := mapped(idle); n != 256 {
		t.Skipf("%d pages mapped after the populate (no populate here?)", n)
	}
	busy.Advance(0)
	waitPoolIdle(pool)
	if d := prefaulterDone(busy); d != 0 {
		t.Fatalf("the budget is spent, yet the second writer got %d bytes", d)
	}

	// Not idle long enough yet: nothing is given back.
	clock.Add(int64(Idle) / 2)
	busy.Advance(1 << 20)
	waitPoolIdle(pool)
	if d := prefaulterDone(busy); d != 0 {
		t.Fatalf("after %v the second writer got %d bytes", Idle/2, d)
	}
	// Idle for Idle: its share comes back to the pool.
	clock.Add(int64(Idle))
	busy.Advance(2 << 20)
	waitPoolIdle(pool)
	if d := prefaulterDone(busy); d <= 2<<20 {
		t.Fatalf("the second writer got nothing ahead of it (populated to %d)", d)
	}
	if a := pool.Ahead(); a > 1<<20 {
		t.Fatalf("%d bytes ahead, budget 1 MiB", a)
	}
	if n := mapped(idle); n != 0 {
		t.Fatalf("the idle writer still has %d pages mapped ahead of it", n)
	}
	pool.mu.Lock()
	writers := len(pool.counted)
	pool.mu.Unlock()
	if writers != 1 {
		t.Fatalf("%d writers counted, want the busy one", writers)
	}

	// The idle writer comes back: it is counted and populated again.
	if err := busy.Stop(); err != nil {
		t.Fatal(err)
	}
	idle.Advance(pageSize)
	waitPoolIdle(pool)
	if d := prefaulterDone(idle); d <= pageSize {
		t.Fatalf("the writer back from idle was not populated (to %d)", d)
	}
	if err := idle.Stop(); err != nil {
		t.Fatal(err)
	}
	if pool.Ahead() != 0 || pool.demand != 0 || len(pool.counted) != 0 {
		t.Fatalf("ahead %d demand %d writers %d after both stopped", pool.Ahead(), pool.demand, len(pool.counted))
	}
}

// TestPrefaultSweeperWhenAllIdle: when every writer has stopped
// appending, no worker runs to find them idle; the pool's timer, set by
// its last worker, sweeps then, and their pages leave their mappings.
func TestPrefaultSweeperWhenAllIdle(t *testing.T) {
	var clock atomic.Int64
	clock.Store(int64(time.Millisecond))
	pool := NewPool(1, 64<<20)
	pool.clock = clock.Load
	pool.sweepAfter = 10 * time.Millisecond
	f, err := mmapfile.Open(testutil.TempPath(t, "s"), mmapfile.Options{Create: true, Reserve: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := pool.NewWriter(f, 1<<20)
	defer p.Stop()
	p.Advance(0)
	waitPopulated(t, p, 1<<20)
	waitPoolIdle(pool)
	if n := testutil.PresentPages(t, f.Bytes()); n == 0 {
		t.Skip("nothing mapped after the populate (no populate here?)")
	}
	// The timer has run at least once by now, with the writer not idle
	// yet: it is set again while the share is held.
	time.Sleep(50 * time.Millisecond)
	if a := pool.Ahead(); a != 1<<20 {
		t.Fatalf("%d bytes ahead before the writer was idle, want its window", a)
	}
	clock.Add(int64(Idle + sweepEvery))
	deadline := time.Now().Add(testutil.SettleTimeout)
	for (pool.Ahead() != 0 || testutil.PresentPages(t, f.Bytes()) != 0) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if a, n := pool.Ahead(), testutil.PresentPages(t, f.Bytes()); a != 0 || n != 0 {
		t.Fatalf("after the writer was idle: %d bytes counted ahead, %d pages mapped", a, n)
	}
}
