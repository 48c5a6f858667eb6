package index

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

func newOffsetIndex(t testing.TB, base, maxBytes int64) *OffsetIndex {
	t.Helper()
	x, err := CreateOffsetIndex(filepath.Join(t.TempDir(), "00000000000000000000.index"), base, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x
}

// TestIndexReserveSteps checks the reservation policy of an active index:
// no file until the first entry, then one page, then the file doubles (at most indexReserveMax at a time)
// as entries are appended, never past the capacity, and every entry stays
// readable across the growth.
func TestIndexReserveSteps(t *testing.T) {
	x := newOffsetIndex(t, 0, 4<<20)
	sizes := []int64{x.FileSize()}
	for i := int64(0); i < 4<<20/OffsetEntrySize; i++ {
		if err := x.Append(i+1, int32(i*10)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if s := x.FileSize(); s != sizes[len(sizes)-1] {
			sizes = append(sizes, s)
		}
	}
	// No file until the first entry (size 0), then one page.
	want := []int64{0, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 3 << 20, 4 << 20}
	if !slices.Equal(sizes, want) {
		t.Fatalf("file sizes %v, want %v", sizes, want)
	}
	if !x.IsFull() {
		t.Fatal("not full at capacity")
	}
	if err := x.Append(1<<30, 1<<30); !errors.Is(err, ErrFull) {
		t.Fatalf("append past capacity: %v", err)
	}
	if off, pos := x.Lookup(300_000); off != 300_000 || pos != 2_999_990 {
		t.Fatalf("lookup after growth: %d %d", off, pos)
	}
}

func TestOffsetIndexCreate(t *testing.T) {
	x := newOffsetIndex(t, 0, DefaultMaxIndexBytes)
	// No file until the first entry, then one page reserved, not the
	// capacity.
	if _, err := os.Lstat(x.Path()); !errors.Is(err, fs.ErrNotExist) || x.FileSize() != 0 || x.MaxEntries() != 1310720 || x.Entries() != 0 || x.IsFull() {
		t.Fatalf("new index: file %v, size %d max %d entries %d", err, x.FileSize(), x.MaxEntries(), x.Entries())
	}
	if err := x.Append(5, 0); err != nil {
		t.Fatal(err)
	}
	if x.FileSize() != indexReserveMin || x.Entries() != 1 {
		t.Fatalf("after the first entry: size %d entries %d", x.FileSize(), x.Entries())
	}
	y := newOffsetIndex(t, 0, 8*3+5)
	if err := y.Append(1, 0); err != nil {
		t.Fatal(err)
	}
	if y.FileSize() != 24 || y.MaxEntries() != 3 {
		t.Fatalf("rounding: size %d max %d", y.FileSize(), y.MaxEntries())
	}
	if _, err := CreateOffsetIndex(filepath.Join(t.TempDir(), "i"), 0, 7); !errors.Is(err, ErrSize) {
		t.Fatalf("tiny index: %v", err)
	}
}

// TestIndexCreateReplacesLeftover: a new index created over a leftover
// regular file replaces it with its first entry (or its trim), and one
// created over a symbolic link fails then and leaves the link and its
// target alone.
func TestIndexCreateReplacesLeftover(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "00000000000000000000.index")
	if err := os.WriteFile(stale, []byte("stale entries..."), 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := CreateOffsetIndex(stale, 0, 80)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Append(3, 7); err != nil {
		t.Fatal(err)
	}
	if err := x.Trim(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(stale); err != nil || len(data) != OffsetEntrySize {
		t.Fatalf("replaced file: %d bytes, %v", len(data), err)
	}
	trimmed := filepath.Join(dir, "00000000000000000001.index")
	if err := os.WriteFile(trimmed, []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	z, err := CreateOffsetIndex(trimmed, 1, 80)
	if err != nil {
		t.Fatal(err)
	}
	if err := z.Trim(); err != nil {
		t.Fatal(err)
	}
	_ = z.Close()
	if st, err := os.Stat(trimmed); err != nil || st.Size() != 0 {
		t.Fatalf("trimmed empty index over a leftover: %v", err)
	}
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("not ours"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "00000000000000000002.index")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	w, err := CreateOffsetIndex(link, 2, 80)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(2, 0); err == nil {
		t.Fatal("append over a symbolic link succeeded")
	}
	_ = w.Close()
	if data, err := os.ReadFile(target); err != nil || string(data) != "not ours" {
		t.Fatalf("link target changed: %q %v", data, err)
	}
}

func TestOffsetIndexLookup(t *testing.T) {
	const base = 1000
	empty := newOffsetIndex(t, base, 1024)
	x := newOffsetIndex(t, base, 1024)
	for _, e := range []OffsetEntry{{1010, 4100}, {1020, 8300}, {1035, 12500}} {
		if err := x.Append(e.Offset, e.Position); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		x       *OffsetIndex
		target  int64
		wantOff int64
		wantPos int32
	}{
		{"empty", empty, 1005, base, 0},
		{"empty below base", empty, 0, base, 0},
		{"before first", x, 1009, base, 0},
		{"below base", x, 5, base, 0},
		{"exact first", x, 1010, 1010, 4100},
		{"between", x, 1019, 1010, 4100},
		{"exact middle", x, 1020, 1020, 8300},
		{"exact last", x, 1035, 1035, 12500},
		{"after last", x, 1036, 1035, 12500},
		{"far after last", x, math.MaxInt64, 1035, 12500},
		{"min target", x, math.MinInt64 + base, base, 0},
	}
	for _, tc := range tests {
		off, pos := tc.x.Lookup(tc.target)
		if off != tc.wantOff || pos != tc.wantPos {
			t.Errorf("%s: Lookup(%d) = (%d, %d), want (%d, %d)", tc.name, tc.target, off, pos, tc.wantOff, tc.wantPos)
		}
	}
	posTests := []struct {
		pos  int64
		want OffsetEntry
		ok   bool
	}{
		{0, OffsetEntry{1010, 4100}, true},
		{4100, OffsetEntry{1010, 4100}, true},
		{4101, OffsetEntry{1020, 8300}, true},
		{12500, OffsetEntry{1035, 12500}, true},
		{12501, OffsetEntry{}, false},
	}
	for _, tc := range posTests {
		e, ok := x.LookupPosition(tc.pos)
		if e != tc.want || ok != tc.ok {
			t.Errorf("LookupPosition(%d) = %+v, %v", tc.pos, e, ok)
		}
	}
	if e := x.LastEntry(); e != (OffsetEntry{1035, 12500}) {
		t.Errorf("LastEntry = %+v", e)
	}
	if e := empty.LastEntry(); e != (OffsetEntry{Offset: base}) {
		t.Errorf("LastEntry of empty = %+v", e)
	}
	if _, ok := x.Entry(3); ok {
		t.Error("Entry past the end")
	}
	var got []OffsetEntry
	for i, e := range x.All() {
		if int64(len(got)) != i {
			t.Fatal("All skipped an index")
		}
		got = append(got, e)
	}
	if len(got) != 3 || got[1] != (OffsetEntry{1020, 8300}) {
		t.Errorf("All = %+v", got)
	}
}

func TestOffsetIndexAppendErrors(t *testing.T) {
	x := newOffsetIndex(t, 100, 8*2)
	if err := x.Append(99, 0); !errors.Is(err, ErrOffsetOverflow) {
		t.Errorf("below base: %v", err)
	}
	if err := x.Append(100+math.MaxInt32+1, 0); !errors.Is(err, ErrOffsetOverflow) {
		t.Errorf("overflow: %v", err)
	}
	if err := x.Append(101, -1); !errors.Is(err, ErrBadPosition) {
		t.Errorf("negative position: %v", err)
	}
	if err := x.Append(100, 0); err != nil {
		t.Errorf("entry at the base offset: %v", err)
	}
	if err := x.Append(100, 10); !errors.Is(err, ErrOffsetOrder) {
		t.Errorf("repeated offset: %v", err)
	}
	if err := x.Append(100+math.MaxInt32, 10); err != nil {
		t.Errorf("largest relative offset: %v", err)
	}
	if !x.IsFull() {
		t.Error("not full at capacity")
	}
	if err := x.Append(100+math.MaxInt32, 20); !errors.Is(err, ErrFull) {
		t.Errorf("append to full index: %v", err)
	}
	if err := x.Sanity(); err != nil {
		t.Error(err)
	}
}

func TestOffsetIndexTruncate(t *testing.T) {
	x := newOffsetIndex(t, 0, 1024)
	for i := int64(1); i <= 10; i++ {
		if err := x.Append(i*10, int32(i*1000)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		to   int64
		want int64
	}{
		{200, 10}, // past the end: nothing to drop
		{100, 9},  // exact match drops that entry
		{75, 7},   // between keeps entries below
		{10, 0},   // first entry
		{0, 0},
	}
	for _, tc := range tests {
		if err := x.TruncateTo(tc.to); err != nil {
			t.Fatal(err)
		}
		if x.Entries() != tc.want {
			t.Fatalf("TruncateTo(%d): %d entries, want %d", tc.to, x.Entries(), tc.want)
		}
		if err := x.Sanity(); err != nil {
			t.Fatal(err)
		}
	}
	// After truncation the index accepts offsets above the new last entry
	// again, and the dropped slots were zeroed.
	if err := x.Append(5, 50); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(x.Path())
	if err != nil {
		t.Fatal(err)
	}
	for i := OffsetEntrySize; i < len(raw); i++ {
		if raw[i] != 0 {
			t.Fatalf("byte %d of a dropped slot is %#x", i, raw[i])
		}
	}
}

func TestOffsetIndexTrimReopen(t *testing.T) {
	const base = 500
	x := newOffsetIndex(t, base, DefaultMaxIndexBytes)
	var want []OffsetEntry
	for i := int64(0); i < 1000; i++ {
		e := OffsetEntry{Offset: base + 3*i + 1, Position: int32(i * 4200)}
		if err := x.Append(e.Offset, e.Position); err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
	}
	if err := x.Trim(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(x.Path())
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 1000*OffsetEntrySize || x.FileSize() != st.Size() || !x.IsFull() {
		t.Fatalf("after Trim: file %d, FileSize %d, full %v", st.Size(), x.FileSize(), x.IsFull())
	}
	if off, pos := x.Lookup(base + 3*999 + 1); off != want[999].Offset || pos != want[999].Position {
		t.Fatalf("Lookup after Trim = (%d, %d)", off, pos)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if off, _ := x.Lookup(base + 100); off != base {
		t.Fatalf("Lookup after Close = %d", off)
	}

	for _, readOnly := range []bool{true, false} {
		y, err := OpenOffsetIndex(x.Path(), base, readOnly)
		if err != nil {
			t.Fatal(err)
		}
		if y.Entries() != 1000 || !y.IsFull() {
			t.Fatalf("reopened: %d entries, full %v", y.Entries(), y.IsFull())
		}
		if err := y.Sanity(); err != nil {
			t.Fatal(err)
		}
		i := 0
		for _, e := range y.All() {
			if e != want[i] {
				t.Fatalf("entry %d = %+v, want %+v", i, e, want[i])
			}
			i++
		}
		if readOnly {
			if err := y.Append(1e6, 1); !errors.Is(err, ErrReadOnly) {
				t.Fatalf("append read-only: %v", err)
			}
			if err := y.Resize(1 << 20); !errors.Is(err, ErrReadOnly) {
				t.Fatalf("resize read-only: %v", err)
			}
		} else {
			// Active again: give it room, append, trim, reopen.
			if err := y.Resize(DefaultMaxIndexBytes); err != nil {
				t.Fatal(err)
			}
			if y.IsFull() || y.FileSize() != 1000*OffsetEntrySize || y.MaxEntries() != DefaultMaxIndexBytes/OffsetEntrySize {
				t.Fatalf("after Resize: full %v size %d", y.IsFull(), y.FileSize())
			}
			if err := y.Append(base+5000, 5_000_000); err != nil {
				t.Fatal(err)
			}
			if err := y.Resize(8); !errors.Is(err, ErrSize) {
				t.Fatalf("Resize below the entries: %v", err)
			}
			if err := y.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := y.Trim(); err != nil {
				t.Fatal(err)
			}
			if y.FileSize() != 1001*OffsetEntrySize {
				t.Fatalf("size %d", y.FileSize())
			}
		}
		if err := y.Close(); err != nil {
			t.Fatal(err)
		}
	}
	z, err := OpenOffsetIndex(x.Path(), base, true)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if e := z.LastEntry(); z.Entries() != 1001 || e != (OffsetEntry{base + 5000, 5_000_000}) {
		t.Fatalf("after second session: %d entries, last %+v", z.Entries(), e)
	}
}

// TestOffsetIndexUntrimmed models a crash before the trim: the reopened file
// counts its zero slots as entries, as Kafka does, and Sanity reports
// padding.
func TestOffsetIndexUntrimmed(t *testing.T) {
	x := newOffsetIndex(t, 0, 8*100)
	for i := int64(1); i <= 3; i++ {
		if err := x.Append(i, int32(i*100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	y, err := OpenOffsetIndex(x.Path(), 0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if y.Entries() != 100 {
		t.Fatalf("entries %d, want 100 (file length / 8)", y.Entries())
	}
	var ce *CorruptionError
	if err := y.Sanity(); !errors.As(err, &ce) || ce.Pos != 3*OffsetEntrySize {
		t.Fatalf("Sanity = %v, want padding at byte 24", err)
	}
}

func TestOffsetIndexSanity(t *testing.T) {
	entry := func(rel, pos int32) []byte {
		var b [8]byte
		binary.BigEndian.PutUint32(b[:], uint32(rel))
		binary.BigEndian.PutUint32(b[4:], uint32(pos))
		return b[:]
	}
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name string
		file []byte
		pos  int64 // expected Pos, or -2 for "no error"
	}{
		{"empty", nil, -2},
		{"one zero entry", entry(0, 0), -2},
		{"good", cat(entry(0, 0), entry(5, 100), entry(9, 300)), -2},
		{"wrong size", cat(entry(1, 1), []byte{1, 2, 3}), -1},
		{"negative relative offset", cat(entry(1, 1), entry(-4, 10)), 8},
		{"negative position", entry(1, -1), 0},
		{"offsets repeat", cat(entry(1, 1), entry(1, 10)), 8},
		{"offsets decrease", cat(entry(5, 1), entry(2, 10)), 8},
		{"positions decrease", cat(entry(1, 100), entry(2, 50)), 8},
		{"zero padding", cat(entry(1, 100), entry(2, 200), entry(0, 0), entry(0, 0)), 16},
		{"garbage", []byte("this is not an index file at all"), 8},
	}
	for _, tc := range tests {
		path := filepath.Join(t.TempDir(), "x.index")
		if err := os.WriteFile(path, tc.file, 0o644); err != nil {
			t.Fatal(err)
		}
		x, err := OpenOffsetIndex(path, 0, true)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err = x.Sanity()
		_ = x.Close()
		if tc.pos == -2 {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var ce *CorruptionError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want a CorruptionError", tc.name, err)
			continue
		}
		if ce.Pos != tc.pos || ce.Path != path {
			t.Errorf("%s: %v: position %d, want %d", tc.name, err, ce.Pos, tc.pos)
		}
	}
}

func TestOffsetIndexLookupAllocs(t *testing.T) {
	x := newOffsetIndex(t, 0, 8*1000)
	for i := int64(0); i < 1000; i++ {
		if err := x.Append(i*2, int32(i)); err != nil {
			t.Fatal(err)
		}
	}
	var sink int64
	allocs := testing.AllocsPerRun(1000, func() {
		off, pos := x.Lookup(777)
		sink += off + int64(pos)
		e, _ := x.LookupPosition(500)
		sink += e.Offset
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per lookup", allocs)
	}
	_ = sink
}

// TestOffsetIndexConcurrentReaders runs lookups while the writer appends,
// truncates, resizes and trims; run with -race.
func TestOffsetIndexConcurrentReaders(t *testing.T) {
	x := newOffsetIndex(t, 0, 8*4096)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for target := int64(0); target < 8000; target += 97 {
					off, pos := x.Lookup(target)
					// Entries are (2i, 10i): a lookup must return a real
					// entry or the empty answer.
					if off > target || int64(pos) != off*5 {
						t.Errorf("Lookup(%d) = (%d, %d)", target, off, pos)
						return
					}
				}
			}
		}()
	}
	for round := 0; round < 5; round++ {
		for i := x.Entries(); i < 4000; i++ {
			if err := x.Append(2*i, int32(10*i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := x.TruncateTo(int64(1000 * round)); err != nil {
			t.Fatal(err)
		}
		if err := x.Trim(); err != nil {
			t.Fatal(err)
		}
		if err := x.Resize(8 * 8192); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}
