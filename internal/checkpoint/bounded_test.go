package checkpoint

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// sparseFile makes a zero-filled file of n bytes without writing them.
func sparseFile(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(n); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReadersBounded: every small-file reader refuses a zero-filled file
// far above the limit (what a crashed file system leaves) as corrupt,
// without reading it, and a zero-filled file below the limit is corrupt
// with a short message: no error quotes more than ~100 bytes of input.
func TestReadersBounded(t *testing.T) {
	readers := map[string]func(string) error{
		LeaderEpochFile:      func(p string) error { _, err := ReadLeaderEpochs(p); return err },
		RecoveryPointFile:    func(p string) error { _, err := ReadOffsets(p); return err },
		CleanShutdownFile:    func(p string) error { _, err := ReadCleanShutdown(p); return err },
		"partition.metadata": func(p string) error { _, err := ReadPartitionMetadata(p); return err },
	}
	dir := t.TempDir()
	for name, read := range readers {
		for _, size := range []int64{3 << 30, 8 << 20} {
			path := filepath.Join(dir, name)
			sparseFile(t, path, size)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := read(path)
			runtime.ReadMemStats(&after)
			if !IsCorrupt(err) {
				t.Fatalf("%s of %d bytes: %v, want corruption", name, size, err)
			}
			if n := len(err.Error()); n > 600 {
				t.Fatalf("%s of %d bytes: error of %d bytes: %.300s", name, size, n, err)
			}
			limit := uint64(1 << 20)
			if size < 1<<30 {
				limit = uint64(8*size) + 1<<20 // read and parsed, within a few copies
			}
			if d := after.TotalAlloc - before.TotalAlloc; d > limit {
				t.Fatalf("%s of %d bytes: %d bytes allocated", name, size, d)
			}
		}
	}
}
