package segment

import (
	"bytes"
	"math"
	"os"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/filenames"
)

// appendLeaderOrGeneral is what the log does with AppendLeader: the
// general ShouldRoll and Append when it declines. It reports whether the
// append rolled (nothing written then) and whether AppendLeader took it.
func appendLeaderOrGeneral(t *testing.T, s *Segment, src []byte, epoch int32, segmentMs, jitterMs int64, now time.Time) (rolled, fast bool) {
	t.Helper()
	var h batch.BatchHeader
	if _, err := batch.CheckAt(src, 0, &h); err != nil {
		t.Fatal(err)
	}
	next := s.NextOffset()
	pos, err := s.AppendLeader(src, &h, next, epoch, segmentMs, jitterMs, false)
	if err != nil {
		t.Fatal(err)
	}
	if pos >= 0 {
		return false, true
	}
	if s.ShouldRoll(int64(len(src)), next+int64(h.LastOffsetDelta), h.MaxTimestamp, segmentMs, jitterMs, func() time.Time { return now }) {
		return true, false
	}
	var out Appended
	if err := appendChecked(s, src, Stamp{Assign: true, NextOffset: next, LeaderEpoch: epoch}, &out); err != nil {
		t.Fatal(err)
	}
	return false, false
}

// TestAppendLeaderMatchesAppend appends the same batches (sizes across
// index entries and reservation steps, timestamps growing, missing,
// negative and old) to two segments, one through AppendLeader as the log
// does and one through ShouldRoll and Append only: they roll at the same
// append, AppendLeader takes most appends, and the files and the state
// appends read are the same.
func TestAppendLeaderMatchesAppend(t *testing.T) {
	created := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name                string
		cfg                 Config
		segmentMs, jitterMs int64
		ts                  func(i int) int64
	}{
		{"size roll, index entries, reservation steps", Config{SegmentBytes: 600 << 10, MaxIndexBytes: 64 << 10, IndexIntervalBytes: 4096}, -1, 0,
			func(i int) int64 { return 1000 + int64(i) }},
		{"timestamps missing, negative and old", Config{SegmentBytes: 600 << 10, MaxIndexBytes: 64 << 10, IndexIntervalBytes: 1000}, -1, 0,
			func(i int) int64 { return []int64{batch.NoTimestamp, -7, 5000, 10, 6000}[i%5] }},
		{"time roll by timestamps, with jitter", Config{SegmentBytes: 1 << 20, MaxIndexBytes: 64 << 10, IndexIntervalBytes: 4096}, 5000, 300,
			func(i int) int64 { return 1000 + 10*int64(i) }},
		{"time rule on, batches without timestamps (the clock)", Config{SegmentBytes: 1 << 20, MaxIndexBytes: 64 << 10, IndexIntervalBytes: 4096}, 5000, 0,
			func(i int) int64 { return batch.NoTimestamp }},
		{"full indexes", Config{SegmentBytes: 1 << 20, MaxIndexBytes: 96, IndexIntervalBytes: 0}, -1, 0,
			func(i int) int64 { return 1000 + int64(i) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var segs [2]*Segment
			var dirs [2]string
			for k := range segs {
				dirs[k] = t.TempDir()
				s, err := Create(dirs[k], 100, tc.cfg, created)
				if err != nil {
					t.Fatal(err)
				}
				segs[k] = s
			}
			fast, n := 0, 0
			now := created.Add(time.Hour) // the clock's age rolls a segment without timestamps
			for ; n < 4000; n++ {
				src := segMakeBatch(t, 1+n%3, 20+(n*37)%900, tc.ts(n))
				rolledA, took := appendLeaderOrGeneral(t, segs[0], src, 7, tc.segmentMs, tc.jitterMs, now)
				b := segs[1]
				last := b.NextOffset() + int64(batch.View(src).LastOffsetDelta())
				rolledB := b.ShouldRoll(int64(len(src)), last, batch.View(src).MaxTimestamp(), tc.segmentMs, tc.jitterMs, func() time.Time { return now })
				if rolledA != rolledB {
					t.Fatalf("append %d: AppendLeader's way rolls %v, ShouldRoll %v", n, rolledA, rolledB)
				}
				if rolledA {
					break
				}
				var out Appended
				if err := appendChecked(b, src, Stamp{Assign: true, NextOffset: b.NextOffset(), LeaderEpoch: 7}, &out); err != nil {
					t.Fatal(err)
				}
				if took {
					fast++
				}
				a := segs[0]
				if a.Size() != b.Size() || a.NextOffset() != b.NextOffset() || a.maxTimestamp != b.maxTimestamp ||
					a.offsetOfMaxTimestamp != b.offsetOfMaxTimestamp || a.rollingTimestamp != b.rollingTimestamp ||
					a.bytesSinceIndex != b.bytesSinceIndex || a.offsetIndex.Entries() != b.offsetIndex.Entries() ||
					a.timeIndex.Entries() != b.timeIndex.Entries() || a.indexesFull != b.indexesFull {
					t.Fatalf("append %d: states differ", n)
				}
			}
			if n == 4000 && tc.cfg.SegmentBytes < 1<<20 {
				t.Fatal("never rolled")
			}
			if tc.segmentMs < 0 || tc.ts(0) != batch.NoTimestamp {
				if fast < n*3/4 {
					t.Fatalf("AppendLeader took %d of %d appends", fast, n)
				}
			}
			for k, s := range segs {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				segs[k] = nil
			}
			for _, suffix := range []string{filenames.Log, filenames.Index, filenames.TimeIndex} {
				a, errA := os.ReadFile(filenames.Path(dirs[0], 100, suffix))
				b, errB := os.ReadFile(filenames.Path(dirs[1], 100, suffix))
				if errA != nil || errB != nil || !bytes.Equal(a, b) {
					t.Fatalf("%s files differ (%d and %d bytes; %v, %v)", suffix, len(a), len(b), errA, errB)
				}
			}
		})
	}
}

// TestAppendLeaderDeclines: each case AppendLeader leaves to the general
// path returns a negative position and changes nothing.
func TestAppendLeaderDeclines(t *testing.T) {
	created := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := Config{SegmentBytes: 4096, MaxIndexBytes: 4096, IndexIntervalBytes: 4096}
	one := segMakeBatch(t, 1, 10, 10_000)
	two := append(bytes.Clone(one), one...)
	big := segMakeBatch(t, 1, 4000, 10_000)
	noTs := segMakeBatch(t, 1, 10, batch.NoTimestamp)
	for _, tc := range []struct {
		name                string
		src                 []byte
		next                int64
		segmentMs, jitterMs int64
		sealed              bool
	}{
		{"two batches", two, 101, -1, 0, false},
		{"past the segment size", big, 101, -1, 0, false},
		{"offset below the base", one, 99, -1, 0, false},
		{"relative offset beyond int32", one, 101 + math.MaxInt32, -1, 0, false},
		{"older than segment.ms by the timestamps", segMakeBatch(t, 1, 10, 10_000+1001), 101, 1000, 0, false},
		{"older than segment.ms less the jitter", segMakeBatch(t, 1, 10, 10_000+801), 101, 1000, 200, false},
		{"no timestamp with the time rule on (the clock)", noTs, 101, 1000, 0, false},
		{"sealed", one, 101, -1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Create(t.TempDir(), 100, cfg, created)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var out Appended
			if err := appendChecked(s, one, Stamp{Assign: true, NextOffset: 100}, &out); err != nil {
				t.Fatal(err)
			}
			if tc.sealed {
				if err := s.Seal(); err != nil {
					t.Fatal(err)
				}
			}
			size, next := s.Size(), s.NextOffset()
			var h batch.BatchHeader
			if _, err := batch.CheckAt(tc.src, 0, &h); err != nil {
				t.Fatal(err)
			}
			pos, err := s.AppendLeader(tc.src, &h, tc.next, 1, tc.segmentMs, tc.jitterMs, false)
			if pos >= 0 || err != nil {
				t.Fatalf("AppendLeader = %d, %v; want it declined", pos, err)
			}
			if s.Size() != size || s.NextOffset() != next {
				t.Fatal("a declined append changed the segment")
			}
		})
	}
	// And the usual case is taken: the batch after the first, in time.
	s, err := Create(t.TempDir(), 100, cfg, created)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var h batch.BatchHeader
	if _, err := batch.CheckAt(one, 0, &h); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if pos, err := s.AppendLeader(one, &h, 100+int64(i), 1, 1000, 0, false); err != nil || pos != int64(i*len(one)) {
			t.Fatalf("append %d: AppendLeader = %d, %v", i, pos, err)
		}
	}
}
