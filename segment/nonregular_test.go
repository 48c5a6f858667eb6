package segment

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/filenames"
)

// TestNonRegularSegmentFiles: OpenActive never creates a missing index
// through a dangling link nor opens a linked one (ErrNeedsRecovery), and
// Create leaves a directory or link under its names alone.
func TestNonRegularSegmentFiles(t *testing.T) {
	cfg := Config{SegmentBytes: 1 << 16, MaxIndexBytes: 4096, IndexIntervalBytes: 512}
	now := time.Unix(0, 0)
	dir := t.TempDir()
	outside := t.TempDir()
	s, err := Create(dir, 0, cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	idx := filenames.Path(dir, 0, filenames.Index)
	if err := os.Remove(idx); err != nil {
		t.Fatal(err)
	}
	absent := filepath.Join(outside, "absent")
	if err := os.Symlink(absent, idx); err != nil {
		t.Fatal(err)
	}
	if s, err := OpenActive(dir, 0, cfg, now, Opened{}); !errors.Is(err, ErrNeedsRecovery) {
		if err == nil {
			_ = s.Close()
		}
		t.Fatalf("OpenActive with a dangling index link: %v, want ErrNeedsRecovery", err)
	}
	if _, err := os.Lstat(absent); err == nil {
		t.Fatal("OpenActive created the link's target")
	}
	if err := os.WriteFile(absent, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := OpenActive(dir, 0, cfg, now, Opened{}); !errors.Is(err, ErrNeedsRecovery) {
		if err == nil {
			_ = s.Close()
		}
		t.Fatalf("OpenActive with a linked index: %v, want ErrNeedsRecovery", err)
	}
	if st, err := os.Stat(absent); err != nil || st.Size() != 0 {
		t.Fatalf("link target resized: %v %v", st, err)
	}

	d2 := t.TempDir()
	if err := os.Mkdir(filenames.Path(d2, 5, filenames.Log), 0o755); err != nil {
		t.Fatal(err)
	}
	if s, err := Create(d2, 5, cfg, now); err == nil {
		_ = s.Close()
		t.Fatal("Create over a directory succeeded")
	}
	if st, err := os.Lstat(filenames.Path(d2, 5, filenames.Log)); err != nil || !st.IsDir() {
		t.Fatalf("directory removed by Create: %v %v", st, err)
	}
}

// TestTruncateLeavesNonRegularTempAlone: a directory at the name of the
// truncation's temporary copy is not removed (the truncation fails).
func TestTruncateLeavesNonRegularTempAlone(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir, 0, segTestCfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	written := segFill(t, s, 6)
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	held, err := s.Read(0, 1<<20, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	tmp := s.Path(filenames.Log) + ".tmp"
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TruncateTo(written[3].base, time.Now()); err == nil {
		t.Fatal("truncation over a directory at its temporary name succeeded")
	}
	if st, err := os.Lstat(tmp); err != nil || !st.IsDir() {
		t.Fatalf("directory removed: %v %v", st, err)
	}
}
