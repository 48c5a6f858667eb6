package index

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func newTimeIndex(t testing.TB, base, maxBytes int64) *TimeIndex {
	t.Helper()
	x, err := CreateTimeIndex(filepath.Join(t.TempDir(), "00000000000000000000.timeindex"), base, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x
}

func TestTimeIndexCreate(t *testing.T) {
	x := newTimeIndex(t, 0, DefaultMaxIndexBytes)
	if x.FileSize() != 0 || x.MaxEntries() != 873813 {
		t.Fatalf("size %d max %d", x.FileSize(), x.MaxEntries())
	}
	if _, err := x.MaybeAppend(10, 1, false); err != nil {
		t.Fatal(err)
	}
	if x.FileSize() != indexReserveMin/TimeEntrySize*TimeEntrySize {
		t.Fatalf("size %d max %d", x.FileSize(), x.MaxEntries())
	}
	if _, err := CreateTimeIndex(filepath.Join(t.TempDir(), "t"), 0, 11); !errors.Is(err, ErrSize) {
		t.Fatalf("tiny index: %v", err)
	}
}

func TestTimeIndexMaybeAppend(t *testing.T) {
	x := newTimeIndex(t, 100, 12*4)
	steps := []struct {
		name      string
		ts, off   int64
		skipFull  bool
		appended  bool
		err       error
		entries   int64
		lastTs    int64
		lastOffst int64
	}{
		{"no timestamp on empty index", NoTimestamp, 100, false, false, nil, 0, NoTimestamp, 100},
		{"first", 1000, 105, false, true, nil, 1, 1000, 105},
		{"same timestamp is skipped", 1000, 107, false, false, nil, 1, 1000, 105},
		{"smaller timestamp", 999, 108, false, false, ErrTimestampOrder, 1, 1000, 105},
		{"smaller offset", 2000, 104, false, false, ErrOffsetOrder, 1, 1000, 105},
		{"offset overflow", 2000, 100 + math.MaxInt32 + 1, false, false, ErrOffsetOverflow, 1, 1000, 105},
		{"second", 2000, 110, false, true, nil, 2, 2000, 110},
		{"same offset, larger timestamp", 2500, 110, false, true, nil, 3, 2500, 110},
		{"full at max-1", 3000, 120, false, false, ErrFull, 3, 2500, 110},
		{"roll entry bypasses the full check", 3000, 120, true, true, nil, 4, 3000, 120},
		{"no slot at all", 4000, 130, true, false, ErrFull, 4, 3000, 120},
	}
	for _, s := range steps {
		appended, err := x.MaybeAppend(s.ts, s.off, s.skipFull)
		if appended != s.appended || !errors.Is(err, s.err) || (s.err == nil) != (err == nil) {
			t.Fatalf("%s: appended %v err %v", s.name, appended, err)
		}
		last := x.LastEntry()
		if x.Entries() != s.entries || last.Timestamp != s.lastTs || last.Offset != s.lastOffst {
			t.Fatalf("%s: entries %d last %+v", s.name, x.Entries(), last)
		}
	}
	if err := x.Sanity(); err != nil {
		t.Fatal(err)
	}
}

func TestTimeIndexLookup(t *testing.T) {
	const base = 50
	empty := newTimeIndex(t, base, 1200)
	x := newTimeIndex(t, base, 1200)
	for _, e := range []TimeEntry{{1000, 60}, {2000, 70}, {3000, 70}, {4000, 95}} {
		if _, err := x.MaybeAppend(e.Timestamp, e.Offset, false); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		x      *TimeIndex
		target int64
		ts     int64
		off    int64
	}{
		{"empty", empty, 5000, NoTimestamp, base},
		{"before first", x, 999, NoTimestamp, base},
		{"negative target", x, -10, NoTimestamp, base},
		{"exact first", x, 1000, 1000, 60},
		{"between", x, 2500, 2000, 70},
		{"exact", x, 3000, 3000, 70},
		{"after last", x, 4001, 4000, 95},
		{"max", x, math.MaxInt64, 4000, 95},
	}
	for _, tc := range tests {
		ts, off := tc.x.Lookup(tc.target)
		if ts != tc.ts || off != tc.off {
			t.Errorf("%s: Lookup(%d) = (%d, %d), want (%d, %d)", tc.name, tc.target, ts, off, tc.ts, tc.off)
		}
	}
	allocs := testing.AllocsPerRun(1000, func() { x.Lookup(2500) })
	if allocs != 0 {
		t.Fatalf("%v allocations per lookup", allocs)
	}
}

func TestTimeIndexTruncateTrimReopen(t *testing.T) {
	x := newTimeIndex(t, 0, DefaultMaxIndexBytes)
	for i := int64(1); i <= 10; i++ {
		if _, err := x.MaybeAppend(1000*i, 10*i, false); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct{ to, want int64 }{{1000, 10}, {100, 9}, {55, 5}, {10, 0}}
	for _, tc := range tests {
		if err := x.TruncateTo(tc.to); err != nil {
			t.Fatal(err)
		}
		if x.Entries() != tc.want {
			t.Fatalf("TruncateTo(%d): %d entries, want %d", tc.to, x.Entries(), tc.want)
		}
	}
	// Truncating to empty resets the last entry, so small timestamps are
	// accepted again.
	if ok, err := x.MaybeAppend(5, 3, false); !ok || err != nil {
		t.Fatalf("append after truncation: %v %v", ok, err)
	}
	if ok, err := x.MaybeAppend(7, 4, true); !ok || err != nil {
		t.Fatalf("roll entry: %v %v", ok, err)
	}
	if err := x.Trim(); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(x.Path())
	if st.Size() != 2*TimeEntrySize || !x.IsFull() {
		t.Fatalf("trimmed size %d", st.Size())
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	y, err := OpenTimeIndex(x.Path(), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	var got []TimeEntry
	for _, e := range y.All() {
		got = append(got, e)
	}
	if len(got) != 2 || got[0] != (TimeEntry{5, 3}) || got[1] != (TimeEntry{7, 4}) {
		t.Fatalf("reopened entries %+v", got)
	}
	if _, err := y.MaybeAppend(8, 5, true); !errors.Is(err, ErrFull) {
		t.Fatalf("append to trimmed index: %v", err)
	}
	if err := y.Resize(12 * 10); err != nil {
		t.Fatal(err)
	}
	if ok, err := y.MaybeAppend(8, 5, false); !ok || err != nil {
		t.Fatalf("append after Resize: %v %v", ok, err)
	}
	if err := y.Sanity(); err != nil {
		t.Fatal(err)
	}
}

func TestTimeIndexSanity(t *testing.T) {
	entry := func(ts int64, rel int32) []byte {
		var b [12]byte
		binary.BigEndian.PutUint64(b[:], uint64(ts))
		binary.BigEndian.PutUint32(b[8:], uint32(rel))
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
		pos  int64 // -2: valid
	}{
		{"empty", nil, -2},
		{"good", cat(entry(10, 0), entry(20, 0), entry(30, 7)), -2},
		{"wrong size", make([]byte, 13), -1},
		{"negative offset", entry(10, -1), 0},
		{"negative timestamp", entry(-5, 1), 0},
		{"timestamp repeats", cat(entry(10, 1), entry(10, 2)), 12},
		{"timestamp decreases", cat(entry(10, 1), entry(9, 2)), 12},
		{"offset decreases", cat(entry(10, 5), entry(11, 2)), 12},
		{"padding", cat(entry(10, 5), entry(0, 0)), 12},
		{"garbage", []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"), 0},
	}
	for _, tc := range tests {
		path := filepath.Join(t.TempDir(), "x.timeindex")
		if err := os.WriteFile(path, tc.file, 0o644); err != nil {
			t.Fatal(err)
		}
		x, err := OpenTimeIndex(path, 0, true)
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
		if !errors.As(err, &ce) || ce.Pos != tc.pos {
			t.Errorf("%s: got %v, want a CorruptionError at %d", tc.name, err, tc.pos)
		}
	}
}
