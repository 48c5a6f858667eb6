package mmapfile

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkSync compares the two ways of making stores into the mapping
// durable: msync(MS_SYNC) of the page-aligned range just written, and
// fdatasync of the descriptor. Each iteration writes n fresh bytes after the
// previous ones, then flushes them. The result decides File.Sync.
func BenchmarkSync(b *testing.B) {
	const size = 64 << 20
	for _, n := range []int{4 << 10, 64 << 10} {
		for _, how := range []string{"msync", "fdatasync"} {
			b.Run(fmt.Sprintf("%s/%dKiB", how, n>>10), func(b *testing.B) {
				f, err := Create(filepath.Join(b.TempDir(), "s"), size)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				if err := f.Prefault(0, size); err != nil {
					b.Fatal(err)
				}
				if err := f.SyncFile(); err != nil {
					b.Fatal(err)
				}
				data := f.Bytes()
				b.SetBytes(int64(n))
				b.ResetTimer()
				pos := 0
				for i := 0; i < b.N; i++ {
					if pos+n > size {
						pos = 0
					}
					for j := pos; j < pos+n; j += 512 {
						data[j] = byte(i)
					}
					if how == "msync" {
						err = f.syncMsync(int64(pos), int64(n))
					} else {
						err = f.syncFdatasync()
					}
					if err != nil {
						b.Fatal(err)
					}
					pos += n
				}
			})
		}
	}
}
