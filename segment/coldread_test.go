package segment

import (
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/filenames"
	"golang.org/x/sys/unix"
)

// coldCfg is the segments' Config of the cold-read tests.
var coldCfg = func() Config {
	c := segTestCfg
	c.SegmentBytes, c.MaxIndexBytes = 8<<20, 1<<20
	return c
}()

// filledSegment is a new active segment holding 12 batches of 64 KiB (a
// walk of their headers touches one page in 16), flushed: within its
// first mapping, which takes no fault read-ahead.
func filledSegment(t *testing.T, dir string) *Segment {
	t.Helper()
	s, err := Create(dir, 0, coldCfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	src := segMakeBatch(t, 1, 64<<10, 1000)
	var a Appended
	for range 12 {
		if err := appendChecked(s, src, Stamp{Assign: true, NextOffset: s.NextOffset(), LeaderEpoch: 1}, &a); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

// dropCached drops the (clean) file at path from the page cache.
func dropCached(t *testing.T, path string) {
	t.Helper()
	fd, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	if err := unix.Fadvise(int(fd.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// coldSink keeps TestSegmentColdDataReadsAhead's pass over the bytes
// read from being optimized away.
var coldSink int

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

// TestSegmentColdDataReadsAhead: the active segment's writable mapping
// takes no read-ahead on faults (mmapfile, "Read-ahead"), so a Read or a
// Scan of its data that is not in the page cache (what the segment was
// reopened with, or what reclaim took since it was written: reclaim
// takes clean pages, mapped or not) asks the kernel for its range at
// once: the pages arrive read ahead, not by a major fault each.
func TestSegmentColdDataReadsAhead(t *testing.T) {
	cold := []struct {
		name string
		make func(t *testing.T) *Segment
	}{
		{"reopened", func(t *testing.T) *Segment {
			dir := t.TempDir()
			s := filledSegment(t, dir)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			dropCached(t, s.Path(filenames.Log))
			s, err := OpenActive(dir, 0, coldCfg, time.Now(), Opened{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"evicted", func(t *testing.T) *Segment {
			s := filledSegment(t, t.TempDir())
			// As reclaim would: out of the page tables, then out of
			// the page cache.
			if err := unix.Madvise(s.log.Bytes(), unix.MADV_DONTNEED); err != nil {
				t.Fatal(err)
			}
			dropCached(t, s.Path(filenames.Log))
			return s
		}},
	}
	reads := []struct {
		name string
		read func(t *testing.T, s *Segment) (pages int64)
	}{
		{"Read", func(t *testing.T, s *Segment) int64 {
			r, err := s.Read(3, 1<<20, math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			for _, b := range r.Bytes {
				coldSink += int(b) // a pass over the bytes, kept
			}
			return int64(len(r.Bytes)) / 4096
		}},
		{"Scan", func(t *testing.T, s *Segment) int64 {
			n := 0
			if err := s.Scan(func(int64, batch.View, *batch.BatchHeader) error { n++; return nil }); err != nil || n != 12 {
				t.Fatalf("Scan: %d batches, %v", n, err)
			}
			return s.Size() / 4096
		}},
	}
	for _, c := range cold {
		for _, r := range reads {
			t.Run(c.name+"/"+r.name, func(t *testing.T) {
				s := c.make(t)
				runtime.LockOSThread()
				before := majorFaults(t)
				pages := r.read(t, s)
				got := majorFaults(t) - before
				runtime.UnlockOSThread()
				if got > pages/8 {
					t.Fatalf("%s of %d cold pages (and a pass over them) took %d major faults", r.name, pages, got)
				}
			})
		}
	}
}

// logRandomRead reports whether the active .log's current mapping is
// advised MADV_RANDOM (VmFlags "rr" in /proc/self/smaps).
func logRandomRead(t *testing.T, s *Segment) bool {
	t.Helper()
	entry := smapsEntry(t, s.log.Bytes())
	if !strings.HasSuffix(entry[0], " "+s.Path(filenames.Log)) {
		t.Fatalf("the mapping at the .log's data is %q", entry[0])
	}
	for _, l := range entry[1:] {
		if rest, ok := strings.CutPrefix(l, "VmFlags:"); ok {
			return slices.Contains(strings.Fields(rest), "rr")
		}
	}
	t.Fatal("no VmFlags in the mapping's smaps entry")
	return false
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
		if err := appendChecked(s, src, Stamp{Assign: true, NextOffset: s.NextOffset(), LeaderEpoch: 1}, &a); err != nil {
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
