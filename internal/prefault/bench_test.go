package prefault

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/internal/mmapfile"
)

// BenchmarkStoreFresh measures copying into pages of a newly created,
// fallocated file, 64 KiB per store, one 32 MiB file per iteration:
//
//   - fault: no help, every first store to a page takes a page fault;
//   - prefaulter: a Writer keeps an 8 MiB window ahead of the writer on
//     its own goroutine (the way a segment would use it);
//   - populated: the whole file was populated before the timer started (the
//     floor a perfect prefaulter could reach).
//
// (Results: bench/RESULTS.md, prefault.Writer.)
func BenchmarkStoreFresh(b *testing.B) {
	const size = 32 << 20
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for _, mode := range []string{"fault", "prefaulter", "populated"} {
		b.Run(mode, func(b *testing.B) {
			dir := b.TempDir()
			b.SetBytes(size)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				path := filepath.Join(dir, fmt.Sprint(i))
				f, err := mmapfile.Open(path, mmapfile.Options{Create: true, Reserve: size})
				if err != nil {
					b.Fatal(err)
				}
				var p *Writer
				switch mode {
				case "prefaulter":
					p = Default().NewWriter(f, 8<<20)
				case "populated":
					if err := f.Prefault(0, size); err != nil {
						b.Fatal(err)
					}
				}
				data := f.Bytes()
				b.StartTimer()
				for pos := 0; pos < size; pos += len(chunk) {
					copy(data[pos:], chunk)
					if p != nil {
						p.Advance(int64(pos + len(chunk)))
					}
				}
				b.StopTimer()
				if p != nil {
					if err := p.Stop(); err != nil {
						b.Fatal(err)
					}
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
				if err := os.Remove(path); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
