package segment

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/testhook"
	"golang.org/x/sys/unix"
)

// TestIndexRemapThenFullDisk: an active index outgrows its first mapping
// (64 KiB), is mapped again, and the fallocate of that step fails (a full
// disk). The append fails cleanly; the segment's lookups, which read the
// indexes, and later appends must go on. Before the fix the index's view
// still pointed into its old mapping, unmapped by the remap, and the next
// lookup faulted (SIGSEGV).
func TestIndexRemapThenFullDisk(t *testing.T) {
	// The .log is reserved whole at creation, so every fallocate below is
	// an index's.
	cfg := Config{SegmentBytes: 16 << 20, MaxIndexBytes: 1 << 20, IndexIntervalBytes: 1, ReserveMaxBytes: -1}
	s, err := Create(t.TempDir(), 0, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hook := func(fd int, off, n int64) error {
		if off+n > 64<<10 {
			return unix.ENOSPC
		}
		return nil
	}
	if !testhook.Fallocate.CompareAndSwap(nil, &hook) {
		t.Fatal("testhook.Fallocate is already set")
	}
	defer testhook.Fallocate.Store(nil)
	var written []segWritten
	var appendErr error
	for i := 0; i < 20000 && appendErr == nil; i++ {
		src := segMakeBatch(t, 2, 20, 1000+int64(i)*10)
		var a Appended
		next := s.NextOffset()
		appendErr = appendChecked(s, src, Stamp{Assign: true, NextOffset: next, LeaderEpoch: 4}, &a)
		if appendErr == nil {
			written = append(written, segWritten{a.FirstOffset, a.LastOffset, nil})
		}
	}
	if !errors.Is(appendErr, unix.ENOSPC) {
		t.Fatalf("append when the index step failed: %v", appendErr)
	}
	for i := 0; i < len(written); i += 97 {
		r, err := s.Read(written[i].base, 1, math.MaxInt64)
		if err != nil || r.Bytes == nil {
			t.Fatalf("read %d: %v", written[i].base, err)
		}
		r.Release()
		got, found, _, err := s.FindOffsetByTimestamp(1000+int64(i)*10, 0, nil)
		if err != nil || !found || got.Offset != written[i].base {
			t.Fatalf("timestamp lookup %d: %+v %v %v", i, got, found, err)
		}
	}
	testhook.Fallocate.Store(nil)
	segFill(t, s, 100)
}
