package index

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestColdActiveIndexSanityReadsAhead: an active index's writable mapping
// takes no read-ahead on faults (mmapfile, "Read-ahead"), so Sanity,
// which walks every entry of a cold index at a clean reopen, asks for
// them at once rather than a major fault per page.
func TestColdActiveIndexSanityReadsAhead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000000.index")
	const n = 1 << 17 // 1 MiB of entries
	x, err := CreateOffsetIndex(path, 0, 10<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < n; i++ {
		if err := x.Append(i+1, int32(i*4096+4096)); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Trim(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// Synced (Trim and Close), then out of the page cache.
	if err := unix.Fdatasync(int(fd.Fd())); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(fd.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	_ = fd.Close()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := majorFaults(t)
	y, err := OpenActiveOffsetIndex(path, 0, 10<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = y.Close() }()
	if err := y.Sanity(); err != nil {
		t.Fatal(err)
	}
	pages := int64(n*OffsetEntrySize) / 4096
	if got := majorFaults(t) - before; got > pages/8 {
		t.Fatalf("open and Sanity of a cold active index of %d pages took %d major faults", pages, got)
	}
}

// majorFaults is the calling thread's count of major page faults. The
// caller locks its goroutine to the thread around what it measures: the
// process's count would take in the faults of other goroutines too (a
// prefault worker, the runtime, pages of the binary itself evicted on a
// machine short of memory), which have nothing to do with the read.
func majorFaults(t *testing.T) int64 {
	t.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Majflt
}
