package index

import (
	"path/filepath"
	"testing"
)

// BenchmarkOffsetLookup looks up offsets in a full 10 MiB offset index
// (1,310,720 entries); it must report 0 allocs/op.
func BenchmarkOffsetLookup(b *testing.B) {
	x, err := CreateOffsetIndex(filepath.Join(b.TempDir(), "i"), 0, DefaultMaxIndexBytes)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	for i := int64(0); !x.IsFull(); i++ {
		if err := x.Append(3*i, int32(i*16)); err != nil {
			b.Fatal(err)
		}
	}
	n := x.Entries() * 3
	b.ReportAllocs()
	b.ResetTimer()
	var sink int64
	for i := 0; i < b.N; i++ {
		off, pos := x.Lookup(int64(i*7919) % n)
		sink += off + int64(pos)
	}
	_ = sink
}

// BenchmarkTimeLookup is BenchmarkOffsetLookup for a full time index.
func BenchmarkTimeLookup(b *testing.B) {
	x, err := CreateTimeIndex(filepath.Join(b.TempDir(), "t"), 0, DefaultMaxIndexBytes)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	for i := int64(0); !x.IsFull(); i++ {
		if _, err := x.MaybeAppend(1000+2*i, i, false); err != nil {
			b.Fatal(err)
		}
	}
	n := x.Entries() * 2
	b.ReportAllocs()
	b.ResetTimer()
	var sink int64
	for i := 0; i < b.N; i++ {
		ts, off := x.Lookup(1000 + int64(i*7919)%n)
		sink += ts + off
	}
	_ = sink
}

// BenchmarkOffsetAppend appends to a preallocated offset index, starting a
// new index whenever one fills up (outside the timer).
func BenchmarkOffsetAppend(b *testing.B) {
	dir := b.TempDir()
	b.ReportAllocs()
	var x *OffsetIndex
	var next int64
	files := 0
	for i := 0; i < b.N; i++ {
		if x == nil || x.IsFull() {
			b.StopTimer()
			if x != nil {
				_ = x.Close()
			}
			var err error
			x, err = CreateOffsetIndex(filepath.Join(dir, string(rune('a'+files%26))+string(rune('a'+files/26))), 0, DefaultMaxIndexBytes)
			if err != nil {
				b.Fatal(err)
			}
			files++
			next = 0
			b.StartTimer()
		}
		if err := x.Append(next, int32(next)); err != nil {
			b.Fatal(err)
		}
		next++
	}
	b.StopTimer()
	_ = x.Close()
}
