package index

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// writeOffsetEntries writes a trimmed offset index of n entries at path
// (offsets base+10i+1, positions 100i) and returns them.
func writeOffsetEntries(t *testing.T, path string, base int64, n int) []OffsetEntry {
	t.Helper()
	x, err := CreateOffsetIndex(path, base, DefaultMaxIndexBytes)
	if err != nil {
		t.Fatal(err)
	}
	var want []OffsetEntry
	for i := range n {
		e := OffsetEntry{Offset: base + 10*int64(i) + 1, Position: int32(100 * i)}
		if err := x.Append(e.Offset, e.Position); err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
	}
	if err := x.Trim(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	return want
}

// TestActiveIndexReadUntilChanged checks a small active index reopened by
// OpenActiveOffsetIndex: it is read, not mapped (no mapping until its first
// change), serves lookups, its Sync does nothing and its Trim only syncs
// the file (no mapping); its first change (an append or a truncation) maps it at its
// capacity, and everything written is there after a reopen.
func TestActiveIndexReadUntilChanged(t *testing.T) {
	const base = 1000
	for _, change := range []string{"none", "append", "truncate"} {
		t.Run(change, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "00000000000000001000.index")
			want := writeOffsetEntries(t, path, base, 20)
			x, err := OpenActiveOffsetIndex(path, base, DefaultMaxIndexBytes, true)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			if !x.m.read || x.m.file != nil {
				t.Fatalf("a %d-byte active index is mapped at open", len(want)*OffsetEntrySize)
			}
			if err := x.Sanity(); err != nil {
				t.Fatal(err)
			}
			if x.Entries() != 20 || x.MaxEntries() != DefaultMaxIndexBytes/OffsetEntrySize || x.FileSize() != 20*OffsetEntrySize {
				t.Fatalf("entries %d, max %d, file %d", x.Entries(), x.MaxEntries(), x.FileSize())
			}
			if off, pos := x.Lookup(want[7].Offset + 3); off != want[7].Offset || pos != want[7].Position {
				t.Fatalf("Lookup = (%d, %d), want %v", off, pos, want[7])
			}
			if err := x.Sync(); err != nil {
				t.Fatal(err)
			}
			if !x.m.read {
				t.Fatal("Sync mapped the index")
			}
			switch change {
			case "append":
				e := OffsetEntry{Offset: base + 500, Position: 5000}
				if err := x.Append(e.Offset, e.Position); err != nil {
					t.Fatal(err)
				}
				want = append(want, e)
			case "truncate":
				if err := x.TruncateTo(want[12].Offset); err != nil {
					t.Fatal(err)
				}
				want = want[:12]
				if err := x.Append(base+400, 4000); err != nil {
					t.Fatal(err)
				}
				want = append(want, OffsetEntry{Offset: base + 400, Position: 4000})
			}
			if mappedNow := x.m.file != nil; mappedNow != (change != "none") {
				t.Fatalf("after %s: mapped %v", change, mappedNow)
			}
			if err := x.Trim(); err != nil {
				t.Fatal(err)
			}
			if change == "none" && !x.m.read {
				t.Fatal("Trim of an unchanged index mapped it")
			}
			if off, pos := x.Lookup(want[len(want)-1].Offset); off != want[len(want)-1].Offset || pos != want[len(want)-1].Position {
				t.Fatalf("Lookup of the last entry = (%d, %d)", off, pos)
			}
			if err := x.Close(); err != nil {
				t.Fatal(err)
			}
			if err := x.Append(base+900, 9000); err == nil {
				t.Fatal("Append after Close succeeded")
			}
			st, err := os.Stat(path)
			if err != nil || st.Size() != int64(len(want))*OffsetEntrySize {
				t.Fatalf("file after Close: %v, %v", st, err)
			}
			y, err := OpenOffsetIndex(path, base, true)
			if err != nil {
				t.Fatal(err)
			}
			defer y.Close()
			var got []OffsetEntry
			for _, e := range y.All() {
				got = append(got, e)
			}
			if len(got) != len(want) {
				t.Fatalf("reopened: %v, want %v", got, want)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("reopened entry %d = %v, want %v", i, got[i], want[i])
				}
			}
		})
	}
}

// TestActiveIndexLargeIsMapped checks that an active index above a page is
// mapped at open, as before, over its first indexMapMin bytes rather than
// its capacity.
func TestActiveIndexLargeIsMapped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000000.index")
	writeOffsetEntries(t, path, 0, readSmallBytes/OffsetEntrySize+1)
	x, err := OpenActiveOffsetIndex(path, 0, DefaultMaxIndexBytes, true)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.m.read || x.m.file == nil || x.m.file.Cap() != indexMapMin || x.MaxEntries() != DefaultMaxIndexBytes/OffsetEntrySize {
		t.Fatalf("read %v, mapped %v", x.m.read, x.m.file != nil)
	}
}

// TestActiveIndexMappingGrows: a new active index is mapped over
// indexMapMin bytes, not its capacity, and mapped again (doubling, up to
// the capacity) as its entries outgrow the mapping; every entry stays
// readable, and the index fills to its capacity.
func TestActiveIndexMappingGrows(t *testing.T) {
	const capacity = 1 << 20
	x, err := CreateOffsetIndex(filepath.Join(t.TempDir(), "00000000000000000000.index"), 0, capacity)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	var maps []int64
	for i := int64(0); i < capacity/OffsetEntrySize; i++ {
		if err := x.Append(i*2, int32(i*100)); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if c := x.m.file.Cap(); len(maps) == 0 || c != maps[len(maps)-1] {
			maps = append(maps, c)
		}
	}
	want := []int64{indexMapMin, 2 * indexMapMin, 4 * indexMapMin, 8 * indexMapMin, capacity}
	if !slices.Equal(maps, want) {
		t.Fatalf("mapping lengths %v, want %v", maps, want)
	}
	if !x.IsFull() || x.Append(capacity, 0) == nil {
		t.Fatal("a full index took another entry")
	}
	for i := int64(0); i < x.Entries(); i += 977 {
		if o, p := x.Lookup(i*2 + 1); o != i*2 || p != int32(i*100) {
			t.Fatalf("lookup %d: %d at %d", i*2+1, o, p)
		}
	}
}
