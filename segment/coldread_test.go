package segment

import (
	"errors"

	"github.com/partlog/partlog/batch"
	"math"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cachedPages counts the pages of [off, off+n) of the file at path in the
// page cache (cachestat(2), Linux 6.5; the test is skipped before).
func cachedPages(t *testing.T, path string, off, n int64) int64 {
	t.Helper()
	fd, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	var st unix.Cachestat_t
	r := unix.CachestatRange{Off: uint64(off), Len: uint64(n)}
	if err := unix.Cachestat(uint(fd.Fd()), &r, &st, 0); errors.Is(err, unix.ENOSYS) {
		t.Skip("no cachestat(2)")
	} else if err != nil {
		t.Fatal(err)
	}
	return int64(st.Cache)
}

// coldSegment writes 32 batches of 64 KiB into a new segment, closes it,
// drops its .log from the page cache and opens it again as the active
// segment.
func coldSegment(t *testing.T) (*Segment, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := segTestCfg
	cfg.SegmentBytes, cfg.MaxIndexBytes = 8<<20, 1<<20
	s, err := Create(dir, 0, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Batches of 64 KiB: a walk of their headers touches one page in 16.
	src := segMakeBatch(t, 1, 64<<10, 1000)
	var a Appended
	for range 32 {
		if err := s.Append(src, Stamp{Assign: true, NextOffset: s.NextOffset(), LeaderEpoch: 1}, &a); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := s.Path(LogSuffix)
	fd, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// Clean (Close synced it), so DONTNEED drops it from the page cache.
	if err := unix.Fadvise(int(fd.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	_ = fd.Close()
	s, err = OpenActive(dir, 0, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

// majorFaults is the process's count of major page faults.
func majorFaults(t *testing.T) int64 {
	t.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Majflt
}

// TestSegmentColdReadReadsAhead: the active segment's writable mapping
// takes no read-ahead on faults (mmapfile, "Read-ahead"), so a Read or a
// Scan of the data a segment was reopened with asks the kernel for its
// range at once: afterwards the range is in (or on its way into) the
// page cache, not only the pages of the batch headers the walk touched
// (one in 16 here).
func TestSegmentColdReadReadsAhead(t *testing.T) {
	t.Run("Read", func(t *testing.T) {
		s, path := coldSegment(t)
		r, err := s.Read(3, 1<<20, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Release()
		want := (r.Position+int64(len(r.Bytes)))/4096 - r.Position/4096
		if got := cachedPages(t, path, r.Position, int64(len(r.Bytes))); got < want {
			t.Fatalf("%d of the read range's %d pages in the page cache after Read", got, want)
		}
	})
	t.Run("Scan", func(t *testing.T) {
		// Scan reads every byte (the CRCs), so the pages end up cached
		// either way: what tells is how they came, read ahead in bulk or
		// one major fault each.
		s, _ := coldSegment(t)
		before := majorFaults(t)
		n := 0
		if err := s.Scan(func(int64, batch.View) error { n++; return nil }); err != nil || n != 32 {
			t.Fatalf("Scan: %d batches, %v", n, err)
		}
		pages := s.Size() / 4096
		if got := majorFaults(t) - before; got > pages/8 {
			t.Fatalf("Scan of %d cold pages took %d major faults", pages, got)
		}
	})
}
