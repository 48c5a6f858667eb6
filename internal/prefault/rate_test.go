package prefault

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/mmapfile"
	"github.com/partlog/partlog/internal/testutil"
)

// TestPrefaultRateNeedsProgress: the worker's turns for one writer come
// more than the rate interval apart (slow chunks, or many writers queued)
// while the writer has not reported a new position. Such a turn says
// nothing about the writer's rate: its window must not shrink (such
// turns, taken as a rate of zero, once shrank it to the minimum).
func TestPrefaultRateNeedsProgress(t *testing.T) {
	const window = 4 << 20
	f, err := mmapfile.Open(testutil.TempPath(t, "still"), mmapfile.Options{Create: true, Reserve: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var clock atomic.Int64
	pool := NewPool(1, 64<<20)
	pool.clock = func() int64 { return clock.Add(int64(20 * time.Millisecond)) } // every turn 20 ms later
	p := pool.NewWriter(f, window)
	p.Advance(4096)
	waitPoolIdle(pool)
	if d := prefaulterDone(p); d < 4096+window {
		t.Fatalf("populated to %d with the writer still at 4096, want its %d-byte window", d, window)
	}
	if rate := prefaulterRate(p); rate != 0 {
		t.Fatalf("rate %d measured while the writer did not move", rate)
	}
	p.Advance(4096 + 2<<20)
	waitPoolIdle(pool)
	if rate := prefaulterRate(p); rate <= 1 {
		t.Fatalf("rate %d after the writer moved 2 MiB", rate)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestPrefaultRateAfterPause: a writer that appends again after a pause
// longer than the horizon has its rate measured from where it resumed.
// Measured across the pause (and averaged with that figure), a writer
// back at 10 MiB/s after 5 s idle was put at about half that, and its
// window with it: after a warm-up and a pause, 1 000 partitions appended
// round robin got windows too small for the pool to keep ahead of them.
func TestPrefaultRateAfterPause(t *testing.T) {
	const window = 4 << 20
	f, err := mmapfile.Open(testutil.TempPath(t, "pause"), mmapfile.Options{Create: true, Reserve: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var clock atomic.Int64
	pool := NewPool(1, 64<<20)
	pool.clock = clock.Load
	p := pool.NewWriter(f, window)
	clock.Store(int64(time.Millisecond))
	p.Advance(4096) // the first turn: where the measure starts
	waitPoolIdle(pool)
	clock.Add(int64(5 * time.Second))
	p.Advance(4096 + 1<<20) // back after the pause: the measure starts again
	waitPoolIdle(pool)
	if r := prefaulterRate(p); r != 0 {
		t.Fatalf("rate %d measured across a 5 s pause", r)
	}
	clock.Add(int64(100 * time.Millisecond))
	p.Advance(4096 + 2<<20) // 1 MiB in 100 ms
	waitPoolIdle(pool)
	if r := prefaulterRate(p); r < 9<<20 || r > 11<<20 {
		t.Fatalf("rate %d after 1 MiB in 100 ms, want ~10 MiB/s", r)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
}
