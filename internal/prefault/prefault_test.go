package prefault

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/mmapfile"
	"github.com/partlog/partlog/internal/testhook"
	"github.com/partlog/partlog/internal/testutil"
)

func TestPrefaulter(t *testing.T) {
	const size = 16 << 20
	f, err := mmapfile.Open(testutil.TempPath(t, "w"), mmapfile.Options{Create: true, Reserve: size})
	if err != nil {
		t.Fatal(err)
	}
	p := NewWriter(f, 4<<20)
	buf := bytes.Repeat([]byte{0xab}, 64<<10)
	for pos := int64(0); pos < size; pos += int64(len(buf)) {
		copy(f.Bytes()[pos:], buf)
		p.Advance(pos + int64(len(buf)))
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	for i, c := range f.Bytes() {
		if c != 0xab {
			t.Fatalf("byte %d = %#x", i, c)
		}
	}
	// Rewind after a truncation and keep going until the file is closed.
	q := NewWriter(f, 1<<20)
	q.Advance(8 << 20)
	q.Advance(0)
	waitPopulated(t, q, 1<<20) // after a rewind
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	q.Advance(2 << 20)
	if err := q.Stop(); err != nil {
		t.Fatalf("Stop after Close: %v", err)
	}
}

func prefaulterDone(p *Writer) int64 {
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	return p.done
}

// prefaulterRate returns the rate p's worker measured (bytes a second).
func prefaulterRate(p *Writer) int64 {
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	return p.rate
}

// waitPoolIdle waits (testutil.SettleTimeout at most) until pool has no worker
// running: every writer served as far as it asked.
func waitPoolIdle(pool *Pool) {
	deadline := time.Now().Add(testutil.SettleTimeout)
	for pool.Workers() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

// waitPopulated waits (testutil.SettleTimeout at most) until p's worker has populated its
// file up to want.
func waitPopulated(t *testing.T, p *Writer, want int64) {
	t.Helper()
	deadline := time.Now().Add(testutil.SettleTimeout)
	for prefaulterDone(p) < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if d := prefaulterDone(p); d < want {
		t.Fatalf("populated to %d, want %d", d, want)
	}
}

// TestPrefaultPool checks the pool's bounds: nothing is populated for a
// writer that never advanced, the populated bytes ahead of the writers stay
// within the budget, the workers exit when there is nothing to do, and
// stopping a writer returns its share.
func TestPrefaultPool(t *testing.T) {
	const size = 8 << 20
	pool := NewPool(2, 3<<20)
	var files []*mmapfile.File
	var ps []*Writer
	for i := range 4 {
		f, err := mmapfile.Open(testutil.TempPath(t, fmt.Sprint("p", i)), mmapfile.Options{Create: true, Reserve: size})
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		ps = append(ps, pool.NewWriter(f, 2<<20))
	}
	idle := pool.NewWriter(files[0], 2<<20) // never advanced
	for _, p := range ps {
		p.Advance(4096)
	}
	waitPoolIdle(pool)
	if w := pool.Workers(); w != 0 {
		t.Fatalf("%d workers still running with nothing to do", w)
	}
	if a := pool.Ahead(); a > 3<<20 || a < 1<<20 {
		t.Fatalf("ahead = %d, want in [1 MiB, budget 3 MiB]", a)
	}
	if d := prefaulterDone(idle); d != 0 {
		t.Fatalf("a writer that never advanced was populated to %d", d)
	}
	var sum int64
	for _, p := range ps {
		d := prefaulterDone(p)
		if d > 0 {
			sum += d - 4096
		}
	}
	if sum != pool.Ahead() {
		t.Fatalf("shares sum to %d, pool counts %d", sum, pool.Ahead())
	}
	for _, p := range ps {
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if err := idle.Stop(); err != nil {
		t.Fatal(err)
	}
	if a := pool.Ahead(); a != 0 {
		t.Fatalf("ahead = %d after every writer stopped", a)
	}
	for _, f := range files {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPrefaulterRetarget: a writer whose file is mapped again keeps its
// Writer: after Retarget it populates the new mapping from the
// writer's position on, past the old mapping's end, and the old File's
// Close does not stop it.
func TestPrefaulterRetarget(t *testing.T) {
	f, err := mmapfile.Open(testutil.TempPath(t, "t"), mmapfile.Options{Create: true, Ahead: true, Reserve: 1 << 20, Capacity: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	pool := NewPool(1, 64<<20)
	// A clock that stands still: no rate is measured, so the window is
	// the writer's own whatever the machine's load (the rate is
	// TestPrefaultWindowFollowsRate's).
	pool.clock = func() int64 { return 1 }
	p := pool.NewWriter(f, 2<<20)
	p.Advance(4096)
	waitPopulated(t, p, 1<<20)
	g, err := f.Remap(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	p.Retarget(g)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Grow(4 << 20); err != nil {
		t.Fatal(err)
	}
	p.Grew()
	p.Advance(512 << 10)
	waitPopulated(t, p, 512<<10+2<<20)
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPrefaultWindowFollowsRate: a writer's window is about a second of
// its measured rate (at most its own window), and when the windows asked
// for exceed the budget they are scaled by one factor: a writer with 6.4
// times the rate of another gets about 3.2 times its window (its own
// window caps it at 4 MiB), where an equal split gave both 1 MiB, and the
// slow one holds no more than its share populated ahead of it.
func TestPrefaultWindowFollowsRate(t *testing.T) {
	var clock atomic.Int64
	pool := NewPool(1, 2<<20)
	pool.clock = clock.Load
	var ps [2]*Writer
	for i := range ps {
		f, err := mmapfile.Open(testutil.TempPath(t, fmt.Sprint("r", i)), mmapfile.Options{Create: true, Reserve: 16 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ps[i] = pool.NewWriter(f, 4<<20)
	}
	idle := func() { waitPoolIdle(pool) }
	window := func(p *Writer) int64 { return 4 * p.step.Load() }
	clock.Store(int64(time.Millisecond))
	fast, slow := ps[0], ps[1]
	fast.Advance(4096)
	slow.Advance(4096)
	idle()
	// A worker may have served the first writer before the second was
	// counted (a loaded machine), splitting the budget by one: one more
	// turn, at the same instant (so no rate is measured), splits it by
	// the two writers. The second writer's turn came after both counted.
	fast.Advance(4096 + 1<<20) // a quarter of the initial 4 MiB window on
	idle()
	if window(fast) != 1<<20 || window(slow) != 1<<20 {
		t.Fatalf("rates unknown: windows %d and %d, want the equal split", window(fast), window(slow))
	}
	clock.Add(int64(time.Second))
	fast.Advance(4096 + 8<<20)    // 8 MiB/s: asks for its own 4 MiB
	slow.Advance(4096 + 1280<<10) // 1.25 MiB/s
	idle()
	fast.Advance(4096 + 9<<20) // a turn with both rates known
	idle()
	if w := window(fast); w < 1400<<10 || w > 1600<<10 {
		t.Fatalf("fast writer's window %d, want ~4 MiB × 2/5.25", w)
	}
	if w := window(slow); w < 450<<10 || w > 530<<10 {
		t.Fatalf("slow writer's window %d, want ~1.25 MiB × 2/5.25", w)
	}
	if d := prefaulterDone(slow) - (4096 + 1280<<10); d > window(slow)+pageSize {
		t.Fatalf("slow writer has %d bytes populated ahead", d)
	}
	if a := pool.Ahead(); a > 2<<20 {
		t.Fatalf("%d bytes ahead, budget 2 MiB", a)
	}
	for _, p := range ps {
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if pool.demand != 0 || pool.Ahead() != 0 {
		t.Fatalf("demand %d ahead %d after every writer stopped", pool.demand, pool.Ahead())
	}
}

// TestPrefaultUrgentFirst: a writer left less than a quarter window ahead
// of its position, or waiting for a Preallocate (the step its next
// append may take), is queued before the writers that are further ahead.
func TestPrefaultUrgentFirst(t *testing.T) {
	f, err := mmapfile.Open(testutil.TempPath(t, "u"), mmapfile.Options{Create: true, Reserve: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pool := NewPool(1, 64<<20)
	ahead, behind, alloc := pool.NewWriter(f, 1<<20), pool.NewWriter(f, 1<<20), pool.NewWriter(f, 1<<20)
	pool.mu.Lock()
	for _, p := range []*Writer{ahead, alloc} {
		p.pos.Store(4096)
		p.done = 4096 + 512<<10
	}
	behind.pos.Store(4096)
	behind.done = 4096 + 64<<10
	alloc.allocAt, alloc.allocN = 1<<20, 1<<20
	pool.enqueue(ahead)
	pool.enqueue(behind)
	pool.enqueue(alloc)
	if len(pool.urgent) != 2 || pool.urgent[0] != behind || pool.urgent[1] != alloc || len(pool.queue) != 1 || pool.queue[0] != ahead {
		pool.mu.Unlock()
		t.Fatal("the writer behind, or the one waiting for a Preallocate, is not queued first")
	}
	pool.mu.Unlock()
	for _, p := range []*Writer{ahead, behind, alloc} {
		if err := p.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPrefaulterPreallocateDuringPreallocate: a Preallocate request made
// while a worker runs the writer's previous one (the writer is busy, so
// it is not queued) is still served, though the worker then finds no
// page to populate: the writer's next reservation step must not wait on
// the disk because its request arrived a moment too early.
func TestPrefaulterPreallocateDuringPreallocate(t *testing.T) {
	f, err := mmapfile.Open(testutil.TempPath(t, "d"), mmapfile.Options{Create: true, Ahead: true, Reserve: 64 << 10, Capacity: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex
	var calls []int64 // offsets of the fallocate calls
	entered, release := make(chan struct{}, 4), make(chan struct{})
	// Every fallocate after the file's creation is a Preallocate's
	// (KEEP_SIZE): the test grows nothing.
	hook := func(fd int, off, n int64) error {
		mu.Lock()
		calls = append(calls, off)
		first := len(calls) == 1
		mu.Unlock()
		if first {
			entered <- struct{}{}
			<-release
		}
		return nil
	}
	testhook.Fallocate.Store(&hook)
	t.Cleanup(func() { testhook.Fallocate.Store(nil) })
	pool := NewPool(1, 64<<20)
	pool.clock = func() int64 { return 1 } // the writer's own window
	p := pool.NewWriter(f, 64<<10)
	p.Advance(0)
	waitPopulated(t, p, 64<<10)
	// Its window is populated: the worker finds no chunk to do for it.
	p.Preallocate(1<<20, 1<<20)
	<-entered
	p.Preallocate(3<<20, 1<<20) // while the first one runs
	close(release)
	deadline := time.Now().Add(testutil.SettleTimeout)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(calls)
		mu.Unlock()
		if n >= 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 || calls[1] != 3<<20 {
		t.Fatalf("preallocations at %v, want [%d %d]", calls, 1<<20, 3<<20)
	}
}

// TestWriterPreallocate: a Writer's Preallocate is run by a worker, which
// allocates the blocks ahead of the data without changing the file's
// size (mmapfile's TestPreallocate checks the rest: a Grow into them, a
// Truncate freeing them).
func TestWriterPreallocate(t *testing.T) {
	path := testutil.TempPath(t, "p")
	f, err := mmapfile.Open(path, mmapfile.Options{Create: true, Ahead: true, Reserve: 64 << 10, Capacity: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	p := Default().NewWriter(f, 1<<20)
	p.Preallocate(2<<20, 1<<20)
	deadline := time.Now().Add(testutil.SettleTimeout)
	for _, a := testutil.LengthAndBlocks(t, path); a < 1<<20+64<<10 && time.Now().Before(deadline); _, a = testutil.LengthAndBlocks(t, path) {
		time.Sleep(time.Millisecond)
	}
	if _, a := testutil.LengthAndBlocks(t, path); a < 1<<20+64<<10 {
		t.Fatalf("the worker allocated only %d bytes", a)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if f.Size() != 64<<10 {
		t.Fatalf("size %d after a Preallocate, want 64 KiB", f.Size())
	}
}
