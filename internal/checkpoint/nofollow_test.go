package checkpoint

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/internal/filenames"
)

// TestWritesNeverFollowLinks: a link at a checkpoint's temporary name or
// at the clean-shutdown marker is not written through; a link at the
// checkpoint's own name is replaced, its target untouched.
func TestWritesNeverFollowLinks(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "target")
	if err := os.WriteFile(target, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	rp := filepath.Join(dir, RecoveryPointFile)
	if err := os.Symlink(target, rp+filenames.Temp); err != nil {
		t.Fatal(err)
	}
	if err := WriteOffsets(rp, map[TopicPartition]int64{{Topic: "t", Partition: 0}: 5}); err == nil {
		t.Fatal("write through a linked temporary file succeeded")
	}
	if err := os.Remove(rp + filenames.Temp); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, rp); err != nil {
		t.Fatal(err)
	}
	if err := WriteOffsets(rp, map[TopicPartition]int64{{Topic: "t", Partition: 0}: 5}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(rp); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("checkpoint is not a regular file: %v %v", st, err)
	}
	marker := filepath.Join(dir, CleanShutdownFile)
	if err := os.Symlink(target, marker); err != nil {
		t.Fatal(err)
	}
	if err := WriteCleanShutdown(marker, 7); err == nil {
		t.Fatal("clean-shutdown marker written through a link")
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "precious" {
		t.Fatalf("target changed: %q %v", b, err)
	}
}
