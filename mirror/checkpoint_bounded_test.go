package mirror

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestReadCheckpointBounded: a zero-filled mirror.checkpoint far above the
// small-file limit is refused unread as corrupt, and one below it is
// corrupt with a short message.
func TestReadCheckpointBounded(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int64{3 << 30, 8 << 20} {
		f, err := os.Create(filepath.Join(dir, CheckpointFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, found, err := ReadCheckpoint(dir)
		runtime.ReadMemStats(&after)
		if !found || !errors.Is(err, ErrCorruptCheckpoint) {
			t.Fatalf("%d bytes: found %v, %v; want corruption", size, found, err)
		}
		if n := len(err.Error()); n > 600 {
			t.Fatalf("%d bytes: error of %d bytes: %.300s", size, n, err)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > uint64(min(size, 16<<20))*8+1<<20 {
			t.Fatalf("%d bytes: %d bytes allocated", size, d)
		}
	}
}
