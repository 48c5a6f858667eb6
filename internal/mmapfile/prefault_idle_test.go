package mmapfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// presentPages counts the pages of b that are mapped in this process's
// page tables (bit 63 of their /proc/self/pagemap entries): what a
// mapping adds to the resident set, unlike mincore, which reports the
// page cache.
func presentPages(t *testing.T, b []byte) int {
	t.Helper()
	addr, err := strconv.ParseUint(fmt.Sprintf("%p", &b[0])[2:], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Skipf("no pagemap: %v", err)
	}
	defer pm.Close()
	pages := (len(b) + int(pageSize) - 1) / int(pageSize)
	entries := make([]byte, 8*pages)
	if _, err := pm.ReadAt(entries, int64(addr/uint64(pageSize))*8); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range pages {
		if binary.LittleEndian.Uint64(entries[8*i:])>>63 != 0 {
			n++
		}
	}
	return n
}

// TestDropPagesKeepsContents: DropPages unmaps whole pages inside its
// range (the start rounded up, the end down), and the bytes stored into
// them are read back unchanged afterwards; ranges outside the file or
// empty do nothing.
func TestDropPagesKeepsContents(t *testing.T) {
	f, err := Create(tempPath(t, "d"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := f.Bytes()
	want := make([]byte, 256<<10)
	for i := range want {
		want[i] = byte(i*7 + 1)
	}
	copy(data, want)
	if err := f.Prefault(0, 1<<20); err != nil {
		t.Fatal(err)
	}
	all := int(1<<20) / int(pageSize)
	if n := presentPages(t, data); n != all {
		t.Skipf("%d of %d pages mapped after Prefault (no populate here?)", n, all)
	}
	// From the second byte of page 1 to the middle of page 38 (0-based):
	// the whole pages 2 to 37 go, 36 of them.
	if err := f.DropPages(pageSize+1, 38*pageSize+pageSize/2-(pageSize+1)); err != nil {
		t.Fatal(err)
	}
	if n := presentPages(t, data); n != all-36 {
		t.Fatalf("%d pages mapped after dropping 36 of %d", n, all)
	}
	for _, r := range [][2]int64{{0, 0}, {-pageSize, pageSize / 2}, {2 << 20, pageSize}, {1<<20 - 10, 1 << 30}} {
		if err := f.DropPages(r[0], r[1]); err != nil {
			t.Fatalf("DropPages(%d, %d): %v", r[0], r[1], err)
		}
	}
	if !bytes.Equal(data[:len(want)], want) {
		t.Fatal("contents changed by DropPages")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.DropPages(0, pageSize); err == nil {
		t.Fatal("DropPages of a closed File succeeded")
	}
}

// TestPrefaultIdleWriterGivesBack: a writer that took the whole budget
// and then stopped appending holds it until it has been idle for
// PrefaultIdle; then a busy writer gets pages ahead of it, the idle
// one's populated pages leave its mapping, and when the idle writer
// appends again it is counted and populated again.
func TestPrefaultIdleWriterGivesBack(t *testing.T) {
	var clock atomic.Int64
	clock.Store(int64(time.Millisecond))
	pool := NewPrefaultPool(1, 1<<20)
	pool.clock = clock.Load
	var ps [2]*Prefaulter
	for i := range ps {
		f, err := Create(tempPath(t, fmt.Sprint("w", i)), 16<<20)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ps[i] = pool.NewPrefaulter(f, 4<<20)
	}
	idle, busy := ps[0], ps[1]
	idle.Advance(0)
	waitPoolIdle(pool)
	if a := pool.Ahead(); a != 1<<20 {
		t.Fatalf("%d bytes ahead, want the whole 1 MiB budget", a)
	}
	mapped := func(p *Prefaulter) int { return presentPages(t, p.f.Bytes()[:4<<20]) }
	if n := mapped(idle); n != 256 {
		t.Skipf("%d pages mapped after the populate (no populate here?)", n)
	}
	busy.Advance(0)
	waitPoolIdle(pool)
	if d := prefaulterDone(busy); d != 0 {
		t.Fatalf("the budget is spent, yet the second writer got %d bytes", d)
	}

	// Not idle long enough yet: nothing is given back.
	clock.Add(int64(PrefaultIdle) / 2)
	busy.Advance(1 << 20)
	waitPoolIdle(pool)
	if d := prefaulterDone(busy); d != 0 {
		t.Fatalf("after %v the second writer got %d bytes", PrefaultIdle/2, d)
	}
	// Idle for PrefaultIdle: its share comes back to the pool.
	clock.Add(int64(PrefaultIdle))
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
	pool := NewPrefaultPool(1, 64<<20)
	pool.clock = clock.Load
	pool.sweepAfter = 10 * time.Millisecond
	f, err := Create(tempPath(t, "s"), 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := pool.NewPrefaulter(f, 1<<20)
	defer p.Stop()
	p.Advance(0)
	waitPopulated(t, p, 1<<20)
	waitPoolIdle(pool)
	if n := presentPages(t, f.Bytes()); n == 0 {
		t.Skip("nothing mapped after the populate (no populate here?)")
	}
	// The timer has run at least once by now, with the writer not idle
	// yet: it is set again while the share is held.
	time.Sleep(50 * time.Millisecond)
	if a := pool.Ahead(); a != 1<<20 {
		t.Fatalf("%d bytes ahead before the writer was idle, want its window", a)
	}
	clock.Add(int64(PrefaultIdle + prefaultSweep))
	deadline := time.Now().Add(settleTimeout)
	for (pool.Ahead() != 0 || presentPages(t, f.Bytes()) != 0) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if a, n := pool.Ahead(), presentPages(t, f.Bytes()); a != 0 || n != 0 {
		t.Fatalf("after the writer was idle: %d bytes counted ahead, %d pages mapped", a, n)
	}
}
