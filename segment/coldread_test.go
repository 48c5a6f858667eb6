package segment

import (
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"golang.org/x/sys/unix"
)

// coldSegment writes 32 batches of 64 KiB into a new segment, closes it,
// drops its .log from the page cache and opens it again as the active
// segment.
func coldSegment(t *testing.T) *Segment {
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
	return s
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
// range at once: the pages arrive read ahead, not by one major fault each.
func TestSegmentColdReadReadsAhead(t *testing.T) {
	t.Run("Read", func(t *testing.T) {
		s := coldSegment(t)
		before := majorFaults(t)
		r, err := s.Read(3, 1<<20, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Release()
		sum := 0
		for _, b := range r.Bytes {
			sum += int(b)
		}
		pages := int64(len(r.Bytes)) / 4096
		if got := majorFaults(t) - before; got > pages/8 {
			t.Fatalf("Read of %d cold pages and a pass over them took %d major faults (sum %d)", pages, got, sum)
		}
	})
	t.Run("Scan", func(t *testing.T) {
		s := coldSegment(t)
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

// evictedSegment writes 32 batches of 64 KiB into a new active segment
// and takes them out of the page cache after a Flush, as reclaim would:
// out of the page tables, then (clean) out of the page cache.
func evictedSegment(t *testing.T) *Segment {
	t.Helper()
	dir := t.TempDir()
	cfg := segTestCfg
	cfg.SegmentBytes, cfg.MaxIndexBytes = 8<<20, 1<<20
	s, err := Create(dir, 0, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	src := segMakeBatch(t, 1, 64<<10, 1000)
	var a Appended
	for range 32 {
		if err := s.Append(src, Stamp{Assign: true, NextOffset: s.NextOffset(), LeaderEpoch: 1}, &a); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Madvise(s.log.Bytes(), unix.MADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(s.Path(LogSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(fd.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	_ = fd.Close()
	return s
}

// TestSegmentEvictedReadsAhead: data the active segment was given after
// it was opened can leave the page cache too (reclaim takes clean pages,
// mapped or not), and a Read or a Scan of it through the writable
// mapping, which takes no read-ahead on faults, asks for it as for data
// the segment was opened with, rather than a major fault per page.
func TestSegmentEvictedReadsAhead(t *testing.T) {
	t.Run("Read", func(t *testing.T) {
		s := evictedSegment(t)
		before := majorFaults(t)
		r, err := s.Read(3, 1<<20, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Release()
		sum := 0
		for _, b := range r.Bytes {
			sum += int(b)
		}
		pages := int64(len(r.Bytes)) / 4096
		if got := majorFaults(t) - before; got > pages/8 {
			t.Fatalf("Read of %d evicted pages and a pass over them took %d major faults (sum %d)", pages, got, sum)
		}
	})
	t.Run("Scan", func(t *testing.T) {
		s := evictedSegment(t)
		before := majorFaults(t)
		n := 0
		if err := s.Scan(func(int64, batch.View) error { n++; return nil }); err != nil || n != 32 {
			t.Fatalf("Scan: %d batches, %v", n, err)
		}
		pages := s.Size() / 4096
		if got := majorFaults(t) - before; got > pages/8 {
			t.Fatalf("Scan of %d evicted pages took %d major faults", pages, got)
		}
	})
}

// logRandomRead reports whether the active .log's mapping is advised
// MADV_RANDOM (VmFlags "rr" in /proc/self/smaps).
func logRandomRead(t *testing.T, s *Segment) bool {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	found, mine := 0, false
	random := false
	for _, line := range strings.Split(string(smaps), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			mine = strings.HasSuffix(line, " "+s.Path(LogSuffix))
			if mine {
				found++
			}
			continue
		}
		if mine && strings.HasPrefix(line, "VmFlags:") {
			random = slices.Contains(strings.Fields(line), "rr")
		}
	}
	if found != 1 {
		t.Fatalf("%d mappings of %s", found, s.Path(LogSuffix))
	}
	return random
}

// TestSegmentFaultReadaheadPastFirstMapping: a new active .log's mapping
// takes no read-ahead on faults (its writer may be one of thousands of
// slow ones), and the mapping of its whole capacity, made once the data
// outgrows the first, takes it again (a fast writer that may outrun the
// prefaulter: one fault brings what it is about to write).
func TestSegmentFaultReadaheadPastFirstMapping(t *testing.T) {
	cfg := segTestCfg
	cfg.SegmentBytes, cfg.MaxIndexBytes = 8<<20, 1<<20
	s, err := Create(t.TempDir(), 0, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if !logRandomRead(t, s) {
		t.Fatal("a new segment's mapping takes fault read-ahead")
	}
	src := segMakeBatch(t, 1, 64<<10, 1000)
	var a Appended
	for s.Size() <= MapMinBytes {
		if err := s.Append(src, Stamp{Assign: true, NextOffset: s.NextOffset(), LeaderEpoch: 1}, &a); err != nil {
			t.Fatal(err)
		}
	}
	if s.log.MapLen() != cfg.SegmentBytes {
		t.Fatalf("mapped %d past MapMinBytes, want the capacity %d", s.log.MapLen(), cfg.SegmentBytes)
	}
	if logRandomRead(t, s) {
		t.Fatal("the capacity mapping takes no fault read-ahead")
	}
}
