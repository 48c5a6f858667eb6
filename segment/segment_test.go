package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/testhook"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
)

var segTestCfg = Config{SegmentBytes: 64 << 10, MaxIndexBytes: 4096, IndexIntervalBytes: 256}

// segMakeBatch builds an uncompressed batch of n records at base offset
// 0, record i stamped ts+i.
func segMakeBatch(t testing.TB, n, valueSize int, ts int64) []byte {
	t.Helper()
	var b batch.Builder
	spec := batch.NewBatchSpec(0)
	val := bytes.Repeat([]byte{'v'}, valueSize)
	recs := make([]batch.RecordSpec, n)
	for i := range recs {
		recs[i] = batch.RecordSpec{Timestamp: ts + int64(i), Key: []byte(fmt.Sprint(i)), Value: val}
	}
	out, err := b.AppendBatch(nil, &spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// segWritten is a batch as the segment holds it.
type segWritten struct {
	base, last int64
	bytes      []byte
}

// segFill appends count batches of 2 records with leader stamping and
// returns them as written.
func segFill(t testing.TB, s *Segment, count int) []segWritten {
	t.Helper()
	var out []segWritten
	for i := 0; i < count; i++ {
		src := segMakeBatch(t, 2, 100+i*7, 1000+int64(i)*10)
		var a Appended
		next := s.NextOffset()
		if err := appendChecked(s, src, Stamp{Assign: true, NextOffset: next, LeaderEpoch: 4}, &a); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if a.FirstOffset != next || a.LastOffset != next+1 || s.NextOffset() != next+2 {
			t.Fatalf("append %d: %+v, next %d", i, a, s.NextOffset())
		}
		w := bytes.Clone(src)
		batch.View(w).SetBaseOffset(next)
		batch.View(w).SetPartitionLeaderEpoch(4)
		out = append(out, segWritten{next, next + 1, w})
	}
	return out
}

// segCheckReads reads every offset and checks the first batch returned.
func segCheckReads(t testing.TB, s *Segment, written []segWritten) {
	t.Helper()
	for _, w := range written {
		for o := w.base; o <= w.last; o++ {
			r, err := s.Read(o, 1, math.MaxInt64)
			if err != nil {
				t.Fatalf("read %d: %v", o, err)
			}
			v, err := batch.Check(r.Bytes)
			if err != nil || !bytes.Equal(v, w.bytes) {
				r.Release()
				t.Fatalf("read %d: %v (got %d bytes)", o, err, len(r.Bytes))
			}
			r.Release()
		}
	}
}

func segConcat(ws []segWritten) []byte {
	var out []byte
	for _, w := range ws {
		out = append(out, w.bytes...)
	}
	return out
}

func TestSegmentRoundTrip(t *testing.T) {
	dir := t.TempDir()
	const base = 1000
	s, err := Create(dir, base, segTestCfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !s.Active() || !s.IsEmpty() || s.NextOffset() != base {
		t.Fatalf("new segment: active %v empty %v next %d", s.Active(), s.IsEmpty(), s.NextOffset())
	}
	if st, err := os.Stat(s.Path(filenames.Log)); err != nil || st.Size() != segTestCfg.SegmentBytes {
		t.Fatalf("new .log not preallocated: %v", err)
	}
	written := segFill(t, s, 20)
	segCheckReads(t, s, written)
	// Reading a range: whole batches, bounded by maxBytes and upTo.
	r, err := s.Read(base, 1<<20, written[5].base)
	if err != nil || !bytes.Equal(r.Bytes, segConcat(written[:5])) {
		t.Fatalf("read up to batch 5: %v", err)
	}
	r.Release()
	r, err = s.Read(base+1, int64(len(written[0].bytes)+len(written[1].bytes)), math.MaxInt64)
	if err != nil || !bytes.Equal(r.Bytes, segConcat(written[:2])) {
		t.Fatalf("read with a budget of two batches: %v", err)
	}
	r.Release()
	if r, err := s.Read(s.NextOffset(), 100, math.MaxInt64); err != nil || r.Bytes != nil {
		t.Fatalf("read at the end: %v, %d bytes", err, len(r.Bytes))
	}

	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	if s.Active() {
		t.Fatal("sealed segment still active")
	}
	var a Appended
	if err := appendChecked(s, written[0].bytes, Stamp{}, &a); !errors.Is(err, ErrSealed) {
		t.Fatalf("append to a sealed segment: %v", err)
	}
	data, err := os.ReadFile(s.Path(filenames.Log))
	if err != nil || !bytes.Equal(data, segConcat(written)) {
		t.Fatalf("sealed .log is not exactly its data (%d bytes): %v", len(data), err)
	}
	segCheckReads(t, s, written)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// OpenSealed: lazily, reads the same.
	s2, err := OpenSealed(dir, base, segTestCfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if s2.Size() != int64(len(data)) {
		t.Fatalf("OpenSealed size %d, want %d", s2.Size(), len(data))
	}
	segCheckReads(t, s2, written)
	if err := s2.CheckIndexes(); err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Read(base, 100, math.MaxInt64); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}

	// OpenActive: appendable again, next offset from the data.
	s3, err := OpenActive(dir, base, segTestCfg, time.Now(), Opened{})
	if err != nil {
		t.Fatal(err)
	}
	if !s3.Active() || s3.NextOffset() != written[len(written)-1].last+1 {
		t.Fatalf("OpenActive: active %v next %d", s3.Active(), s3.NextOffset())
	}
	written = append(written, segFill(t, s3, 5)...)
	segCheckReads(t, s3, written)
	if err := s3.Close(); err != nil {
		t.Fatal(err)
	}
	data, err = os.ReadFile(s3.Path(filenames.Log))
	if err != nil || !bytes.Equal(data, segConcat(written)) {
		t.Fatalf("closed .log is not exactly its data: %v", err)
	}
	// The indexes reopen sane, every entry at a batch start.
	s4, err := OpenActive(dir, base, segTestCfg, time.Now(), Opened{})
	if err != nil {
		t.Fatal(err)
	}
	defer s4.Close()
	b, _ := os.ReadFile(s4.Path(filenames.Index))
	entries, err := index.DecodeOffsetIndex(b[:s4.offsetIndex.Entries()*8], base)
	if err != nil || len(entries) == 0 {
		t.Fatalf("offset index: %v, %d entries", err, len(entries))
	}
	for _, e := range entries {
		i := slices.IndexFunc(written, func(w segWritten) bool { return w.last == e.Offset })
		if i < 0 || int(e.Position) != len(segConcat(written[:i])) {
			t.Fatalf("index entry %+v is not at the start of the batch ending at its offset", e)
		}
	}
}

func TestSegmentSealedLazyMapAndUnmap(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir, 0, segTestCfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	written := segFill(t, s, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenSealed(dir, 0, segTestCfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var maps []int64
	s.SetOnMap(func(seg *Segment, cost int64) {
		if seg != s {
			t.Errorf("onMap told about another segment")
		}
		maps = append(maps, cost)
	})
	if len(maps) != 0 {
		t.Fatal("mapped before the first read")
	}
	r1, err := s.Read(0, 1<<20, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	want := segConcat(written)
	if !bytes.Equal(r1.Bytes, want) || !slices.Equal(maps, []int64{int64(len(want))}) {
		t.Fatalf("first read: %d bytes, maps %v", len(r1.Bytes), maps)
	}
	r2, err := s.Read(6, 1, math.MaxInt64)
	if err != nil || len(maps) != 1 {
		t.Fatalf("second read mapped again (%v): %v", maps, err)
	}
	held1, held2 := bytes.Clone(r1.Bytes), bytes.Clone(r2.Bytes)
	if s.Readers() != 2 {
		t.Fatalf("readers %d", s.Readers())
	}
	// Unmap drops the segment's mapping; the readers keep theirs.
	s.Unmap()
	s.Unmap()
	if !bytes.Equal(r1.Bytes, held1) || !bytes.Equal(r2.Bytes, held2) {
		t.Fatal("held range changed after Unmap")
	}
	// The next read maps again.
	r3, err := s.Read(0, 1<<20, math.MaxInt64)
	if err != nil || !bytes.Equal(r3.Bytes, want) || len(maps) != 2 {
		t.Fatalf("read after Unmap: %v, maps %v", err, maps)
	}
	r1.Release()
	r1.Release() // idempotent
	if !bytes.Equal(r2.Bytes, held2) {
		t.Fatal("held range changed after another reader's Release")
	}
	s.Unmap()
	r2.Release()
	r3.Release()
	if s.Readers() != 0 {
		t.Fatalf("readers %d after releasing all", s.Readers())
	}
	// Unmap of the active segment does nothing.
	a, err := Create(dir, 100, segTestCfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	aw := segFill(t, a, 3)
	a.Unmap()
	segCheckReads(t, a, aw)
}

func TestSegmentTruncate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		hold   bool // a reader holds a range over the whole segment
		sealed bool
		cut    int // index of the first batch removed
	}{
		{"active, in place", false, false, 4},
		{"active, reader holds a range", true, false, 4},
		{"active to empty, reader holds a range", true, false, 0},
		{"sealed", false, true, 7},
		{"sealed, reader holds a range", true, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Create(dir, 0, segTestCfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			written := segFill(t, s, 12)
			if tc.sealed {
				if err := s.Seal(); err != nil {
					t.Fatal(err)
				}
			}
			var held Range
			var heldCopy []byte
			if tc.hold {
				if held, err = s.Read(0, 1<<20, math.MaxInt64); err != nil {
					t.Fatal(err)
				}
				heldCopy = bytes.Clone(held.Bytes)
			}
			target := written[tc.cut].base
			removed, err := s.TruncateTo(target, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			keep := written[:tc.cut]
			if want := int64(len(segConcat(written[tc.cut:]))); removed != want {
				t.Fatalf("removed %d bytes, want %d", removed, want)
			}
			if !s.Active() || s.NextOffset() != target || s.Size() != int64(len(segConcat(keep))) {
				t.Fatalf("after truncation: active %v next %d size %d", s.Active(), s.NextOffset(), s.Size())
			}
			if tc.hold && !bytes.Equal(held.Bytes, heldCopy) {
				t.Fatal("held range changed by the truncation")
			}
			// On disk: the kept prefix, then zeros to the reserved end.
			data, err := os.ReadFile(s.Path(filenames.Log))
			if err != nil {
				t.Fatal(err)
			}
			prefix := segConcat(keep)
			if len(data) < len(prefix) || int64(len(data)) > segTestCfg.SegmentBytes || !bytes.Equal(data[:len(prefix)], prefix) {
				t.Fatalf(".log after truncation: %d bytes", len(data))
			}
			if i := slices.IndexFunc(data[len(prefix):], func(c byte) bool { return c != 0 }); i >= 0 {
				t.Fatalf("non-zero byte at %d after the kept %d bytes", len(prefix)+i, len(prefix))
			}
			segCheckReads(t, s, keep)
			if tc.hold && s.Readers() != 1 {
				t.Fatalf("readers %d, want the one holding a range", s.Readers())
			}
			if r, err := s.Read(target, 100, math.MaxInt64); err != nil || r.Bytes != nil {
				t.Fatalf("read at the truncation point: %v", err)
			}
			// Appends continue at the truncation point, and still do not
			// reach the held range.
			more := segFill(t, s, 3)
			if more[0].base != target {
				t.Fatalf("append after truncation at %d, want %d", more[0].base, target)
			}
			segCheckReads(t, s, append(slices.Clone(keep), more...))
			if tc.hold {
				if !bytes.Equal(held.Bytes, heldCopy) {
					t.Fatal("held range changed by an append after the truncation")
				}
				held.Release()
			}
			if s.Readers() != 0 {
				t.Fatalf("readers %d", s.Readers())
			}
			if _, err := os.Stat(s.Path(filenames.Log) + ".tmp"); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("leftover .tmp: %v", err)
			}
			if got := s.log.Path(); got != s.Path(filenames.Log) {
				t.Fatalf("the .log's File goes by %q, want %q", got, s.Path(filenames.Log))
			}
			// Sealed again, the files are exactly the data and sane indexes.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			data, _ = os.ReadFile(s.Path(filenames.Log))
			if !bytes.Equal(data, append(slices.Clone(prefix), segConcat(more)...)) {
				t.Fatal("closed .log is not the kept data and the new appends")
			}
			s2, err := OpenActive(dir, 0, segTestCfg, time.Now(), Opened{})
			if err != nil {
				t.Fatalf("reopen after truncation: %v", err)
			}
			defer s2.Close()
			segCheckReads(t, s2, append(slices.Clone(keep), more...))
		})
	}
}

func TestSegmentShouldRoll(t *testing.T) {
	const day = 24 * 60 * 60 * 1000
	created := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := Config{SegmentBytes: 4096, MaxIndexBytes: 4096, IndexIntervalBytes: 4096}
	dir := t.TempDir()
	// Segment at 100 with one batch of max timestamp 10_000.
	withTs, err := Create(dir, 100, cfg, created)
	if err != nil {
		t.Fatal(err)
	}
	defer withTs.Close()
	b := segMakeBatch(t, 1, 10, 10_000)
	var a Appended
	if err := appendChecked(withTs, b, Stamp{Assign: true, NextOffset: 100}, &a); err != nil {
		t.Fatal(err)
	}
	size := withTs.Size()
	// Segment at 500 with one batch without timestamps.
	noTs, err := Create(dir, 500, cfg, created)
	if err != nil {
		t.Fatal(err)
	}
	defer noTs.Close()
	if err := appendChecked(noTs, segMakeBatch(t, 1, 10, batch.NoTimestamp), Stamp{Assign: true, NextOffset: 500}, &a); err != nil {
		t.Fatal(err)
	}
	empty, err := Create(dir, 900, cfg, created)
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()

	at := func(ms int64) time.Time { return created.Add(time.Duration(ms) * time.Millisecond) }
	cases := []struct {
		name                string
		s                   *Segment
		size, last, maxTs   int64
		segmentMs, jitterMs int64
		now                 time.Time
		want                bool
	}{
		{"fits exactly", withTs, 4096 - size, 101, 10_000, day, 0, at(0), false},
		{"one byte too many", withTs, 4096 - size + 1, 101, 10_000, day, 0, at(0), true},
		{"empty segment, whole size", empty, 4096, 900, 5, day, 0, at(0), false},
		{"relative offset 2^31-1", withTs, 10, 100 + math.MaxInt32, 10_000, day, 0, at(0), false},
		{"relative offset 2^31", withTs, 10, 100 + math.MaxInt32 + 1, 10_000, day, 0, at(0), true},
		{"offset below the base", withTs, 10, 99, 10_000, day, 0, at(0), true},
		{"empty segment, overflow", empty, 10, 900 + math.MaxInt32 + 1, 5, day, 0, at(0), true},
		{"age = segment.ms", withTs, 10, 101, 11_000, 1000, 0, at(0), false},
		{"age > segment.ms", withTs, 10, 101, 11_001, 1000, 0, at(0), true},
		{"timestamps win over the clock", withTs, 10, 101, 10_500, 1000, 0, at(10 * day), false},
		{"older timestamp", withTs, 10, 101, 5, 1000, 0, at(10 * day), false},
		{"jitter subtracts", withTs, 10, 101, 10_801, 1000, 200, at(0), true},
		{"jitter, not yet", withTs, 10, 101, 10_800, 1000, 200, at(0), false},
		{"time rule off", withTs, 10, 101, 1 << 50, -1, 0, at(10 * day), false},
		{"incoming without timestamp: clock", withTs, 10, 101, batch.NoTimestamp, 1000, 0, at(1001), true},
		{"incoming without timestamp: clock, not yet", withTs, 10, 101, batch.NoTimestamp, 1000, 0, at(1000), false},
		{"segment without timestamps: clock", noTs, 10, 501, 50_000, 1000, 0, at(1001), true},
		{"segment without timestamps: not yet", noTs, 10, 501, 50_000, 1000, 0, at(999), false},
		{"empty segment never ages", empty, 10, 900, 1 << 50, 1000, 0, at(10 * day), false},
	}
	for _, tc := range cases {
		if got := tc.s.ShouldRoll(tc.size, tc.last, tc.maxTs, tc.segmentMs, tc.jitterMs, func() time.Time { return tc.now }); got != tc.want {
			t.Errorf("%s: ShouldRoll = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Full indexes roll (interval 0: every append but the first is
	// indexed). 36 bytes: 4 offset entries; 3 time slots, 2 usable.
	for _, ic := range []struct {
		name      string
		tsStep    int64
		wantAfter int
	}{
		{"offset index full (constant timestamps: one time entry)", 0, 5},
		{"time index full (growing timestamps)", 1, 3},
	} {
		small := Config{SegmentBytes: 1 << 20, MaxIndexBytes: 36, IndexIntervalBytes: 0}
		base := int64(2000 + 1000*ic.tsStep)
		full, err := Create(dir, base, small, created)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for ; n < 10; n++ {
			if full.ShouldRoll(100, full.NextOffset(), 1, -1, 0, func() time.Time { return created }) {
				break
			}
			src := segMakeBatch(t, 1, 1, 100+int64(n)*ic.tsStep)
			if err := appendChecked(full, src, Stamp{Assign: true, NextOffset: full.NextOffset()}, &a); err != nil {
				t.Fatalf("%s: append %d: %v", ic.name, n, err)
			}
		}
		if n != ic.wantAfter {
			t.Errorf("%s: rolls after %d appends, want %d", ic.name, n, ic.wantAfter)
		}
		_ = full.Close()
	}
}

func TestSegmentAppendAllocs(t *testing.T) {
	for _, write := range []bool{false, true} {
		t.Run(fmt.Sprint("write=", write), func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{SegmentBytes: 1 << 20, MaxIndexBytes: 64 << 10, IndexIntervalBytes: 300, Prefault: 64 << 10}
			s, err := Create(dir, 0, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			src := segMakeBatch(t, 3, 50, 1000)
			hdrs, err := batch.CheckAll(src, nil) // the log's validation, once
			if err != nil {
				t.Fatal(err)
			}
			var out Appended
			next := int64(0)
			// 500 appends of ~200 bytes cross the first reservation
			// step, so the growth path is measured too.
			allocs := testing.AllocsPerRun(1500, func() {
				if err := s.Append(src, hdrs, Stamp{Assign: true, NextOffset: next, LeaderEpoch: 2, Write: write}, &out); err != nil {
					panic(err)
				}
				next = out.LastOffset + 1
			})
			if allocs != 0 {
				t.Fatalf("Append allocates %.1f times per call", allocs)
			}
			if s.offsetIndex.Entries() == 0 {
				t.Fatal("no index entry was written: the guard missed the index path")
			}
			if s.log.Size() <= ReserveMinBytes {
				t.Fatalf("reservation %d never grew", s.log.Size())
			}
			r, err := s.Read(next-3, 1, math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			if v, err := batch.Check(r.Bytes); err != nil || v.BaseOffset() != next-3 || v.PartitionLeaderEpoch() != 2 {
				t.Fatalf("last batch: %v", err)
			}
		})
	}
}

// TestSegmentWriteMatchesStore appends the same batches through the
// mapping and with WriteAt (alternating): the file holds the same bytes
// as an all-stores segment, read back through the mapping.
func TestSegmentWriteMatchesStore(t *testing.T) {
	cfg := Config{SegmentBytes: 1 << 20, MaxIndexBytes: 64 << 10, IndexIntervalBytes: 300}
	var files [2][]byte
	for mode := range 2 {
		dir := t.TempDir()
		s, err := Create(dir, 100, cfg, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			src := segMakeBatch(t, 1+i%4, 30+i*13, 1000+int64(i))
			var out Appended
			st := Stamp{Assign: true, NextOffset: s.NextOffset(), LeaderEpoch: 3, Write: mode == 1 && i%2 == 0}
			if err := appendChecked(s, src, st, &out); err != nil {
				t.Fatal(err)
			}
			r, err := s.Read(out.FirstOffset, 1, math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			if v, err := batch.Check(r.Bytes); err != nil || v.BaseOffset() != out.FirstOffset || v.PartitionLeaderEpoch() != 3 {
				t.Fatalf("mode %d batch %d reads back: %v", mode, i, err)
			}
			r.Release()
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if files[mode], err = os.ReadFile(filenames.Path(dir, 100, filenames.Log)); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Fatalf("written and stored segments differ (%d and %d bytes)", len(files[0]), len(files[1]))
	}
}

// TestSegmentReserveSteps checks the disk reservation policy: a new
// segment reserves ReserveMinBytes, the step doubles while appends use it
// up fast and halves when they are slow, never exceeds ReserveMaxBytes,
// the file never exceeds SegmentBytes, a reopened clean segment reserves
// nothing beyond its data, and a negative ReserveMaxBytes reserves the
// whole segment at once.
func TestSegmentReserveSteps(t *testing.T) {
	clock := time.Unix(1000, 0)
	monotonic = func() time.Time { return clock }
	t.Cleanup(func() { monotonic = time.Now })
	dir := t.TempDir()
	cfg := Config{SegmentBytes: 64 << 20, MaxIndexBytes: 1 << 20, IndexIntervalBytes: 4096, ReserveMaxBytes: 2 << 20}
	s, err := Create(dir, 0, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// fileSize is the disk a file takes (its allocated blocks).
	fileSize := func(kind string) int64 {
		if _, err := os.Lstat(s.Path(kind)); errors.Is(err, fs.ErrNotExist) && kind != filenames.Log {
			return 0 // an index is made by its first entry
		}
		return allocatedBytes(t, s.Path(kind))
	}
	if got := fileSize(filenames.Log) + fileSize(filenames.Index) + fileSize(filenames.TimeIndex); got > 1<<20 {
		t.Fatalf("an empty segment reserves %d bytes", got)
	}
	if got := fileSize(filenames.Log); got != ReserveMinBytes {
		t.Fatalf("new .log reserves %d, want %d", got, ReserveMinBytes)
	}
	if st, err := os.Stat(s.Path(filenames.Log)); err != nil || st.Size() != cfg.SegmentBytes {
		t.Fatalf("new .log is not SegmentBytes long (a hole past the reservation): %v", err)
	}
	src := segMakeBatch(t, 10, 6000, 1000) // ~60 KiB
	var out Appended
	var steps, reserved []int64
	appendUntilGrow := func() {
		before := s.log.Size()
		for s.log.Size() == before {
			if err := appendChecked(s, src, Stamp{Assign: true, NextOffset: s.NextOffset(), LeaderEpoch: 1}, &out); err != nil {
				t.Fatal(err)
			}
		}
		steps = append(steps, s.log.Size()-s.Size())
		reserved = append(reserved, s.log.Size())
	}
	for range 6 { // fast: 256 KiB (the first step), 512 KiB, 1, 2, 2, 2 MiB
		appendUntilGrow()
	}
	clock = clock.Add(5 * time.Second) // slow: halves
	appendUntilGrow()
	// The second step (512 KiB) would end just past the MapMinBytes
	// mapping: it ends at the mapping's end instead.
	want := []int64{256 << 10, 0, 1 << 20, 2 << 20, 2 << 20, 2 << 20, 1 << 20}
	if reserved[1] == MapMinBytes {
		want[1] = steps[1]
	}
	if !slices.Equal(steps, want) || steps[1] > 512<<10 {
		t.Fatalf("steps %v (reserved %v), want %v with the second ending at %d", steps, reserved, want, MapMinBytes)
	}
	if got := fileSize(filenames.Log); got < s.log.Size() || got > s.log.Size()+64<<10 { // block rounding, extent blocks
		t.Fatalf("file takes %d, reserved %d", fileSize(filenames.Log), s.log.Size())
	}
	size := s.Size()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenActive(dir, 0, cfg, time.Now(), Opened{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fileSize(filenames.Log); got > size+64<<10 { // block rounding, extent blocks
		t.Fatalf("reopened .log takes %d bytes, data %d", got, size)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	whole := cfg
	whole.ReserveMaxBytes = -1
	w, err := Create(t.TempDir(), 0, whole, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.log.Size() != whole.SegmentBytes {
		t.Fatalf("ReserveMaxBytes < 0 reserved %d", w.log.Size())
	}
}

// TestSegmentMappingReturnsTheFileItAcquired: Segment.mapping returns
// the *mmapfile.File it took its reference on, read under s.mu,
// whatever Unmap, Seal or a truncation writes to s.log afterwards.
func TestSegmentMappingReturnsTheFileItAcquired(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir, 0, segTestCfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	segFill(t, s, 5)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenSealed(dir, 0, segTestCfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const readers = 2
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					errs <- fmt.Errorf("reader panicked: %v", p)
				}
			}()
			for !stop.Load() {
				r, err := s.Read(0, 1<<20, math.MaxInt64)
				if err != nil {
					errs <- err
					return
				}
				if _, err := batch.Check(r.Bytes); err != nil {
					errs <- err
					return
				}
				r.Release()
			}
		}()
	}
	for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline); {
		s.Unmap()
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestSegmentCreateReplacesLeftovers: Create over files left under the
// segment's names (a .log, or only indexes, or only a .txnindex) starts an
// empty segment without adopting any of them.
func TestSegmentCreateReplacesLeftovers(t *testing.T) {
	for _, kinds := range [][]string{{filenames.Log, filenames.Index, filenames.TimeIndex, filenames.TxnIndex}, {filenames.Index}, {filenames.TimeIndex}, {filenames.TxnIndex}} {
		t.Run(strings.Join(kinds, ","), func(t *testing.T) {
			dir := t.TempDir()
			for _, k := range kinds {
				if err := os.WriteFile(filenames.Path(dir, 50, k), bytes.Repeat([]byte{7}, 4096), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s, err := Create(dir, 50, segTestCfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !s.IsEmpty() || s.offsetIndex.Entries() != 0 || s.timeIndex.Entries() != 0 || s.txnIndex.FileSize() != 0 {
				t.Fatalf("adopted leftovers: size %d entries %d/%d txn %d", s.Size(), s.offsetIndex.Entries(), s.timeIndex.Entries(), s.txnIndex.FileSize())
			}
			if data := s.log.Bytes(); slices.ContainsFunc(data, func(c byte) bool { return c != 0 }) {
				t.Fatal("the new .log holds old bytes")
			}
			segCheckReads(t, s, segFill(t, s, 3))
		})
	}
}

// smapsEntry returns the lines of /proc/self/smaps that describe the
// mapping starting at data's first byte: its range line, then its fields.
// Found by address, not by file name: a segment's old mapping of the
// same file may still be there (Retire unmaps it off the owner's path).
func smapsEntry(t *testing.T, data []byte) []string {
	t.Helper()
	start := fmt.Sprintf("%p", &data[0])[2:] + "-"
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	lines := strings.Split(string(smaps), "\n")
	for i, line := range lines {
		if !strings.HasPrefix(line, start) {
			continue
		}
		end := i + 1
		for end < len(lines) && !smapsRange(lines[end]) {
			end++
		}
		return lines[i:end]
	}
	t.Fatalf("mapping at %s not found in smaps", start)
	return nil
}

// smapsRange reports whether an smaps line opens a mapping's entry (its
// first field is an address range, not a "Name:" field).
func smapsRange(line string) bool {
	f, _, _ := strings.Cut(line, " ")
	return strings.Contains(f, "-") && !strings.HasSuffix(f, ":")
}

// mappingRss returns the resident size of the mapping that starts at
// data's first byte, from /proc/self/smaps.
func mappingRss(t *testing.T, data []byte) int64 {
	t.Helper()
	for _, l := range smapsEntry(t, data)[1:] {
		if rest, ok := strings.CutPrefix(l, "Rss:"); ok {
			var kb int64
			if _, err := fmt.Sscan(rest, &kb); err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no Rss in the mapping's smaps entry")
	return 0
}

// newPrefaulted is a new 16 MiB active segment with a 1 MiB prefault
// window, closed at the test's end.
func newPrefaulted(t *testing.T) *Segment {
	t.Helper()
	cfg := Config{SegmentBytes: 16 << 20, MaxIndexBytes: 64 << 10, IndexIntervalBytes: 4096, Prefault: 1 << 20}
	s, err := Create(t.TempDir(), 0, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestSegmentIdleHoldsNoPages: a new active segment with a prefault window
// populates nothing while nobody appends (no resident pages in its .log
// mapping), and its window is populated once it is appended to.
func TestSegmentIdleHoldsNoPages(t *testing.T) {
	s := newPrefaulted(t)
	time.Sleep(50 * time.Millisecond)
	if rss := mappingRss(t, s.log.Bytes()); rss != 0 {
		t.Fatalf("an idle segment has %d resident bytes in its mapping", rss)
	}
	segFill(t, s, 1)
	deadline := time.Now().Add(settleTimeout)
	for mappingRss(t, s.log.Bytes()) < 64<<10 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if rss := mappingRss(t, s.log.Bytes()); rss < 64<<10 {
		t.Fatalf("after an append only %d bytes are resident: the window was not populated", rss)
	}
}

// TestSegmentSyncedPopulatesNothing: stores of a synced log
// (Stamp.Synced, AppendLeader's synced) never move the prefaulter, so no
// page past the data is populated: each would be a dirty zero page for
// the next flush. The first unsynced store moves it again.
func TestSegmentSyncedPopulatesNothing(t *testing.T) {
	s := newPrefaulted(t)
	src := segMakeBatch(t, 1, 4000, 1000)
	var h batch.BatchHeader
	if _, err := batch.CheckAt(src, 0, &h); err != nil {
		t.Fatal(err)
	}
	var out Appended
	for i := 0; s.Size() < 4*s.prefaultStride(); i++ {
		if i%2 == 0 {
			if pos, err := s.AppendLeader(src, &h, s.NextOffset(), 1, 0, 0, true); err != nil || pos < 0 {
				t.Fatalf("AppendLeader: %d, %v", pos, err)
			}
		} else if err := appendChecked(s, src, Stamp{Assign: true, NextOffset: s.NextOffset(), LeaderEpoch: 1, Synced: true}, &out); err != nil {
			t.Fatal(err)
		}
	}
	if s.prefaultAt != 0 {
		t.Fatalf("synced stores told the prefaulter of position %d", s.prefaultAt)
	}
	time.Sleep(50 * time.Millisecond)
	if rss, data := mappingRss(t, s.log.Bytes()), (s.Size()+4095)&^4095; rss > data {
		t.Fatalf("%d bytes resident in the mapping for %d bytes of data", rss, data)
	}
	if err := appendChecked(s, src, Stamp{Assign: true, NextOffset: s.NextOffset(), LeaderEpoch: 1}, &out); err != nil {
		t.Fatal(err)
	}
	if s.prefaultAt == 0 {
		t.Fatal("an unsynced store did not move the prefaulter")
	}
}

// TestSegmentFirstStepAhead: with a prefault window, a new segment takes
// its first reservation step while the appends are still inside the first
// reservation, and the pages after it are populated before the writer
// reaches them. (The first step used to be taken by the append that
// crossed ReserveMinBytes, which then stored into pages nobody could have
// populated: past the reserved end. Each such fault read around itself,
// megabytes of zeroed pages under the append; with 1 000 partitions
// appended round robin, most of the append time.)
func TestSegmentFirstStepAhead(t *testing.T) {
	s := newPrefaulted(t)
	src := segMakeBatch(t, 1, 4000, 1000)
	var out Appended
	for s.log.Size() <= ReserveMinBytes {
		if s.Size()+int64(len(src)) > ReserveMinBytes {
			t.Fatalf("the append ending at %d would pass the first reservation (%d) before it grew", s.Size()+int64(len(src)), s.log.Size())
		}
		if err := appendChecked(s, src, Stamp{Assign: true, NextOffset: s.NextOffset(), LeaderEpoch: 1}, &out); err != nil {
			t.Fatal(err)
		}
	}
	if s.Size() > ReserveMinBytes*3/4 {
		t.Fatalf("first step taken at %d, want by %d", s.Size(), ReserveMinBytes*3/4)
	}
	deadline := time.Now().Add(settleTimeout)
	for mappingRss(t, s.log.Bytes()) <= ReserveMinBytes && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if rss := mappingRss(t, s.log.Bytes()); rss <= ReserveMinBytes {
		t.Fatalf("only %d bytes populated: nothing past the first reservation", rss)
	}
	// The appends after the step go through the refreshed mapping.
	for range 100 {
		if err := appendChecked(s, src, Stamp{Assign: true, NextOffset: s.NextOffset(), LeaderEpoch: 1}, &out); err != nil {
			t.Fatal(err)
		}
	}
	r, err := s.Read(out.FirstOffset, 1, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if v, err := batch.Check(r.Bytes); err != nil || v.BaseOffset() != out.FirstOffset {
		t.Fatalf("last batch: %v", err)
	}
}

// TestSegmentAppendLines: the Segment fields an append through the
// mapping reads or writes lie on its first two cache lines (a Segment's
// size class is a multiple of 64 bytes, so objects start on a line).
func TestSegmentAppendLines(t *testing.T) {
	st := reflect.TypeFor[Segment]()
	ct := reflect.TypeFor[Config]()
	cfg, _ := st.FieldByName("cfg")
	for _, name := range []string{"size", "base", "active", "indexesFull", "nextOffset", "mapped", "room",
		"bytesSinceIndex", "maxTimestamp", "offsetOfMaxTimestamp", "rollingTimestamp", "prefaultAt"} {
		f, ok := st.FieldByName(name)
		if !ok {
			t.Fatalf("Segment has no field %s", name)
		}
		if end := f.Offset + f.Type.Size(); end > 128 {
			t.Errorf("%s ends at byte %d, past the first two lines", name, end)
		}
	}
	for _, name := range []string{"SegmentBytes", "IndexIntervalBytes"} {
		f, _ := ct.FieldByName(name)
		if end := cfg.Offset + f.Offset + f.Type.Size(); end > 128 {
			t.Errorf("cfg.%s ends at byte %d, past the first two lines", name, end)
		}
	}
}

// TestCopyHeader: copyHeader (the header's inline moves in Append)
// copies exactly the 61 header bytes, whatever the alignment, and
// nothing past them.
func TestCopyHeader(t *testing.T) {
	src := make([]byte, 128)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	for off := 0; off < 8; off++ {
		dst := make([]byte, 128)
		for i := range dst {
			dst[i] = 0xee
		}
		copyHeader(dst[off:], src[off:])
		for i := range dst {
			want := byte(0xee)
			if i >= off && i < off+batch.HeaderSize {
				want = src[i]
			}
			if dst[i] != want {
				t.Fatalf("offset %d: byte %d is %#x, want %#x", off, i, dst[i], want)
			}
		}
	}
}

// logMappings counts the mappings of the segment's .log in /proc/self/maps.
func logMappings(t *testing.T, s *Segment) int {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(maps), " "+s.Path(filenames.Log)+"\n")
}

// settledMappings is logMappings once it is want or after settleTimeout: old
// mappings are retired off the owner's path, so they go a little later.
func settledMappings(t *testing.T, s *Segment, want int) int {
	t.Helper()
	deadline := time.Now().Add(settleTimeout)
	for logMappings(t, s) != want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	return logMappings(t, s)
}

// TestSegmentMappingGrows: the active .log is mapped over its reservation,
// not at SegmentBytes, and mapped again (at MapMinBytes, then at its
// capacity) as the reservation grows; a reader holding a range of the old mapping keeps reading it
// after the owner moved on, the old mapping goes with its release (one
// mapping of the .log at rest), and readers racing with appends that remap
// always see whole batches (run with -race). Reopened, the .log is mapped
// over its data.
func TestSegmentMappingGrows(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SegmentBytes: 64 << 20, MaxIndexBytes: 1 << 20, IndexIntervalBytes: 4096, Prefault: 1 << 20}
	s, err := Create(dir, 0, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// A new segment is mapped at MapMinBytes at once (address space
	// only): its first reservation steps need no remap. Its blocks are
	// still reserved for ReserveMinBytes only.
	if m := s.log.MapLen(); m != MapMinBytes {
		t.Fatalf("a new segment maps %d bytes, want %d", m, MapMinBytes)
	}
	if got := allocatedBytes(t, s.Path(filenames.Log)); got > ReserveMinBytes+64<<10 {
		t.Fatalf("a new segment allocates %d bytes, want about %d", got, ReserveMinBytes)
	}
	if n := int64(len(s.mapped)); n != ReserveMinBytes {
		t.Fatalf("stores may reach %d bytes, want the reservation %d", n, ReserveMinBytes)
	}
	written := segFill(t, s, 1)
	held, err := s.Read(0, 1, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	first := s.log
	stop := make(chan struct{})
	readErr := make(chan error, 1)
	go func() {
		defer close(readErr)
		for {
			select {
			case <-stop:
				return
			default:
			}
			r, err := s.Read(0, 1, math.MaxInt64)
			if err != nil {
				readErr <- err
				return
			}
			if _, err := batch.Check(r.Bytes); err != nil {
				r.Release()
				readErr <- err
				return
			}
			r.Release()
		}
	}()
	maps := []int64{s.log.MapLen()}
	for s.log.Size() < 4<<20 {
		written = append(written, segFill(t, s, 20)...)
		if m := s.log.MapLen(); m != maps[len(maps)-1] {
			maps = append(maps, m)
		}
	}
	close(stop)
	if err := <-readErr; err != nil {
		t.Fatalf("reader during remaps: %v", err)
	}
	// Mapped at MapMinBytes while the segment fits in it, then at its
	// whole capacity: one remap in a segment's life.
	if s.log == first || len(maps) != 2 || maps[0] != MapMinBytes || maps[1] != cfg.SegmentBytes {
		t.Fatalf("mapping lengths %v, want [%d %d]", maps, MapMinBytes, cfg.SegmentBytes)
	}
	if n := settledMappings(t, s, 2); n != 2 {
		t.Fatalf("%d mappings of the .log while a reader holds the first", n)
	}
	if !bytes.Equal(held.Bytes[:len(written[0].bytes)], written[0].bytes) {
		t.Fatal("a reader's range of the old mapping changed")
	}
	held.Release()
	if n := settledMappings(t, s, 1); n != 1 {
		t.Fatalf("%d mappings of the .log at rest", n)
	}
	segCheckReads(t, s, written)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenActive(dir, 0, cfg, time.Now(), Opened{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if m := s.log.MapLen(); m != s.Size() {
		t.Fatalf("reopened: mapped %d for %d bytes of data", m, s.Size())
	}
	more := segFill(t, s, 5)
	segCheckReads(t, s, append(written, more...))
}

// TestSegmentPreallocatesNextStep checks that a fast writer's steps of
// preallocMinStep and more get the blocks of the next step allocated
// ahead (by a prefault worker, past the reserved size), and that sealing
// trims the file back to its data, those blocks included.
func TestSegmentPreallocatesNextStep(t *testing.T) {
	const sealSlack = 64 << 10 // data rounded to blocks, extent-tree blocks
	dir := t.TempDir()
	cfg := Config{SegmentBytes: 128 << 20, MaxIndexBytes: 1 << 20, IndexIntervalBytes: 4096, Prefault: 1 << 20}
	s, err := Create(dir, 0, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	allocated := func() int64 { return allocatedBytes(t, s.Path(filenames.Log)) }
	src := segMakeBatch(t, 4, 16<<10, 1000) // ~64 KiB
	for s.reserveStep < preallocMinStep {
		var a Appended
		if err := appendChecked(s, src, Stamp{Assign: true, NextOffset: s.NextOffset(), LeaderEpoch: 1}, &a); err != nil {
			t.Fatal(err)
		}
	}
	want := s.log.Size() + min(2*s.reserveStep, DefaultReserveMaxBytes)
	deadline := time.Now().Add(settleTimeout)
	for allocated() < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if a := allocated(); a < want {
		t.Fatalf("allocated %d bytes, want the next step's too: %d (reserved %d)", a, want, s.log.Size())
	}
	size := s.Size()
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	// st_blocks also counts the extent tree's own blocks (ext4 takes one
	// once the file has more extents than its inode holds, which a file
	// grown in steps beside other writers often has), so the bound is the
	// data plus a few blocks: what it tells apart is the megabytes of the
	// preallocated step.
	if a := allocated(); a > size+sealSlack {
		t.Fatalf("sealed at %d bytes, %d still allocated", size, a)
	}
}

// TestSegmentPreallocatesFirstStep checks that once a new prefaulted
// segment holds preallocFirstAt bytes, a prefault worker allocates the
// blocks of its first reservation step, so that the append that takes
// the step makes no fallocate call for it (with 1 000 partitions appended
// round robin the steps fall due in the same round), and that a segment
// nobody appends to, or with a few batches only, gets nothing allocated
// beyond its first reservation.
func TestSegmentPreallocatesFirstStep(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SegmentBytes: 64 << 20, MaxIndexBytes: 1 << 20, IndexIntervalBytes: 4096, Prefault: 1 << 20}
	idle, err := Create(dir, 0, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	s, err := Create(dir, 1000, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	var at []int64 // offsets of the fallocate calls
	hook := func(fd int, off, n int64) error {
		mu.Lock()
		at = append(at, off)
		mu.Unlock()
		return nil
	}
	if !testhook.Fallocate.CompareAndSwap(nil, &hook) {
		t.Fatal("testhook.Fallocate is already set")
	}
	defer testhook.Fallocate.Store(nil)
	src := segMakeBatch(t, 2, 1000, 1000) // ~2 KiB
	appendOne := func() {
		t.Helper()
		var a Appended
		if err := appendChecked(s, src, Stamp{Assign: true, NextOffset: s.NextOffset(), LeaderEpoch: 1}, &a); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		appendOne()
	}
	time.Sleep(20 * time.Millisecond) // a worker's turn, were one asked for
	if a := allocatedBytes(t, s.Path(filenames.Log)); a > ReserveMinBytes+64<<10 {
		t.Fatalf("a segment with three batches has %d bytes allocated", a)
	}
	for s.Size() < preallocFirstAt+s.prefaultStride() {
		appendOne()
	}
	if s.reserveStep != 0 {
		t.Fatal("the first step was taken before preallocFirstAt")
	}
	want := int64(2*ReserveMinBytes + preallocMargin)
	deadline := time.Now().Add(settleTimeout)
	for allocatedBytes(t, s.Path(filenames.Log)) < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if a := allocatedBytes(t, s.Path(filenames.Log)); a < want {
		t.Fatalf("past preallocFirstAt: %d bytes allocated, want the first step's too: %d", a, want)
	}
	mu.Lock()
	at = nil // the worker's call, at ReserveMinBytes too
	mu.Unlock()
	for s.reserveStep == 0 {
		appendOne()
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(at, ReserveMinBytes) {
		t.Fatalf("the first step allocated its blocks itself: fallocate calls at %v", at)
	}
	if a := allocatedBytes(t, idle.Path(filenames.Log)); a > ReserveMinBytes+64<<10 {
		t.Fatalf("a segment never appended to has %d bytes allocated", a)
	}
}

// allocatedBytes returns the disk allocated to the file at path
// (st_blocks).
func allocatedBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestSegmentStepsStayInFirstMapping: a fast writer of 1 KiB appends
// keeps its new segment's MapMinBytes mapping (no remap) while its data
// is below half of it (three quarters without a prefault window): a reservation
// step that would carry the reservation just past the mapping stops at
// its end, as long as that leaves ReserveMinBytes. Without the cut, the
// second step (512 KiB, after the first was used up fast) reached past
// MapMinBytes at about 260 KiB of data and mapped the whole capacity.
func TestSegmentStepsStayInFirstMapping(t *testing.T) {
	clock := time.Unix(1000, 0)
	monotonic = func() time.Time { return clock }
	t.Cleanup(func() { monotonic = time.Now })
	for _, tc := range []struct {
		name     string
		prefault int64
		upTo     int64 // data written: stores keep a step reserved ahead with a prefault window
	}{
		{"no prefault", 0, MapMinBytes * 3 / 4},
		{"prefault 1 MiB", 1 << 20, MapMinBytes / 2},
		{"prefault 8 MiB", 8 << 20, MapMinBytes / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{SegmentBytes: 64 << 20, MaxIndexBytes: 1 << 20, IndexIntervalBytes: 4096, Prefault: tc.prefault}
			s, err := Create(t.TempDir(), 0, cfg, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			src := segMakeBatch(t, 1, 900, 1000) // ~1 KiB
			var out Appended
			var steps int
			for s.Size() < tc.upTo-int64(len(src)) {
				before := s.log.Size()
				if err := appendChecked(s, src, Stamp{Assign: true, NextOffset: s.NextOffset(), LeaderEpoch: 1}, &out); err != nil {
					t.Fatal(err)
				}
				if s.log.Size() != before {
					steps++
				}
				if m := s.log.MapLen(); m != MapMinBytes {
					t.Fatalf("at %d bytes of data (step %d, reserved %d) mapped %d, want %d", s.Size(), steps, s.log.Size(), m, MapMinBytes)
				}
				if s.log.Size() > MapMinBytes {
					t.Fatalf("reserved %d past the mapping", s.log.Size())
				}
			}
			if steps < 2 {
				t.Fatalf("%d reservation steps", steps)
			}
		})
	}
}

// settleTimeout bounds the waits for work done off the caller's path (a
// prefault worker populating or preallocating, a retired mapping going).
// The waits end as soon as the condition holds; the bound is for a 2-core
// CI machine running other test packages beside this one under -race,
// where such work can be seconds late without anything being wrong.
const settleTimeout = 30 * time.Second
