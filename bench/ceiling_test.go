package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/batch"
	"golang.org/x/sys/unix"
)

// regionOf returns about total bytes of back-to-back copies of one batch
// of size bytes, with increasing base offsets (at least one batch).
func regionOf(tb testing.TB, size, total int) []byte {
	tb.Helper()
	one := batchOfSize(tb, size)
	n := max(1, total/size)
	region := make([]byte, 0, n*size)
	next := int64(0)
	for i := 0; i < n; i++ {
		region = append(region, one...)
		v := batch.View(region[len(region)-size:])
		v.SetBaseOffset(next)
		next = v.NextOffset()
	}
	return region
}

// ceilingRegion is the size of the regions of BenchmarkCeiling: 64 MiB
// (8 MiB under -short), larger than the caches, as a segment is.
func ceilingRegion() int {
	if testing.Short() {
		return 8 << 20
	}
	return 64 << 20
}

// walkMapped maps path read-only and walks every batch with
// batch.NewIterator (framing, header rules, CRC-32C): the least work a
// recovery or a cold read must do over a file. It returns the bytes
// walked.
func walkMapped(tb testing.TB, path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		tb.Fatal(err)
	}
	if st.Size() == 0 {
		return 0
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = unix.Munmap(data) }()
	it := batch.NewIterator(data, 0)
	for _, ok := it.Next(); ok; _, ok = it.Next() {
	}
	if it.Err() != nil {
		tb.Fatalf("%s: %v", path, it.Err())
	}
	return st.Size()
}

// BenchmarkCeiling measures, over the same region of batches of each
// size, the ceilings the engine's own paths are compared with:
//
//   - crc32c-only: CRC-32C of every batch's covered bytes, nothing else;
//   - validate: batch.NewIterator over the region in memory (framing,
//     header rules, CRC-32C): the validation AppendAsLeader does, whose
//     goal is ≥ 90% of crc32c-only at 16 KiB and above, ≥ 60% at 256 B;
//   - mmap-walk: the same walk over a read-only mapping of a file holding
//     the region (page cache hot): the floor of a recovery scan.
func BenchmarkCeiling(b *testing.B) {
	for _, size := range sizes {
		region := regionOf(b, size, ceilingRegion())
		b.Run("size="+sizeName(size)+"/crc32c-only", func(b *testing.B) {
			b.SetBytes(int64(len(region)))
			b.ReportAllocs()
			var sink uint32
			for b.Loop() {
				for p := 0; p < len(region); p += size {
					sink += batch.Checksum(region[p+batch.OffAttributes : p+size])
				}
			}
			_ = sink
		})
		b.Run("size="+sizeName(size)+"/validate", func(b *testing.B) {
			b.SetBytes(int64(len(region)))
			b.ReportAllocs()
			for b.Loop() {
				it := batch.NewIterator(region, 0)
				for _, ok := it.Next(); ok; _, ok = it.Next() {
				}
				if it.Err() != nil {
					b.Fatal(it.Err())
				}
			}
		})
		b.Run("size="+sizeName(size)+"/mmap-walk", func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "00000000000000000000.log")
			if err := os.WriteFile(path, region, 0o644); err != nil {
				b.Fatal(err)
			}
			walkMapped(b, path) // fault the page cache in once
			b.SetBytes(int64(len(region)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				walkMapped(b, path)
			}
		})
	}
}

// BenchmarkDurableCeiling is the floor of a durable append of one 16 KiB
// batch: write(2) of it to a plain file, then fdatasync, each time. Group
// commit (BenchmarkDurableAppend) must beat it by sharing flushes;
// fsync-per-append can at best equal it.
func BenchmarkDurableCeiling(b *testing.B) {
	src := batchOfSize(b, 16<<10)
	b.Run("size=16KiB/write+fdatasync", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "durable.log"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		fd := int(f.Fd())
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if batch.Checksum(src[batch.OffAttributes:]) != batch.View(src).CRC() {
				b.Fatal("crc")
			}
			if _, err := unix.Write(fd, src); err != nil {
				b.Fatal(err)
			}
			if err := unix.Fdatasync(fd); err != nil {
				b.Fatal(err)
			}
		}
	})
}
