package bench

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"golang.org/x/sys/unix"
)

// BenchmarkRead reads 1 MB of whole batches at a random offset of a
// 256 MiB log (16 KiB batches, several segments), beside a pread(2) of
// 1 MB at a random position of a file holding the same bytes. The log
// returns a view of its mapping (no copy), so it should beat pread.
func BenchmarkRead(b *testing.B) {
	const total = 256 << 20
	src := batchOfSize(b, 16<<10)
	c, err := partlog.NewMappingCache(1 << 30)
	if err != nil {
		b.Fatal(err)
	}
	l, err := partlog.Open(b.TempDir(), &partlog.Options{MappingCache: c, SegmentBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for n := 0; n < total; n += len(src) {
		if _, err := l.AppendAsLeader(src, 0); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		b.Fatal(err)
	}
	end := l.LogEndOffset()
	rng := rand.New(rand.NewPCG(1, 2))
	b.Run("log-1MB-random", func(b *testing.B) {
		b.SetBytes(1 << 20)
		b.ReportAllocs()
		for b.Loop() {
			v, err := l.Read(rng.Int64N(end), 1<<20, end)
			if err != nil || len(v.Records) == 0 {
				b.Fatal(err)
			}
			v.Release()
		}
	})
	b.Run("log-1MB-sequential-tail", func(b *testing.B) {
		b.SetBytes(1 << 20)
		b.ReportAllocs()
		next := int64(0)
		for b.Loop() {
			v, err := l.Read(next, 1<<20, end)
			if err != nil || len(v.Records) == 0 {
				b.Fatal(err)
			}
			it := batch.NewIterator(v.Records, 0)
			for bv, ok := it.Next(); ok; bv, ok = it.Next() {
				next = bv.NextOffset()
			}
			v.Release()
			if next >= end {
				next = 0
			}
		}
	})
	b.Run("pread-1MB-random", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "pread.log")
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		for n := 0; n < total; n += len(src) {
			if _, err := f.Write(src); err != nil {
				b.Fatal(err)
			}
		}
		buf := make([]byte, 1<<20)
		b.SetBytes(1 << 20)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := unix.Pread(int(f.Fd()), buf, rng.Int64N(total-(1<<20))); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkIndexLookup is the floor lookup of a full 10 MiB offset index
// (1,310,720 entries): 0 allocs/op.
func BenchmarkIndexLookup(b *testing.B) {
	x, err := index.CreateOffsetIndex(filepath.Join(b.TempDir(), "00000000000000000000.index"), 0, 10<<20)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	for i := int64(0); !x.IsFull(); i++ {
		if err := x.Append(i*4, int32(i*4096%(1<<31-4096))); err != nil {
			b.Fatal(err)
		}
	}
	last := x.LastEntry().Offset
	rng := rand.New(rand.NewPCG(3, 4))
	b.ReportAllocs()
	for b.Loop() {
		x.Lookup(rng.Int64N(last))
	}
}
