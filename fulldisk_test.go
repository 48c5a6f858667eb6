package partlog

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/partlog/partlog/internal/testhook"
	"golang.org/x/sys/unix"
)

// fullMountTmpfs mounts a tmpfs of size bytes on a fresh directory and
// unmounts it at cleanup; it skips the test when mounting is not allowed.
func fullMountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs (needs root / CAP_SYS_ADMIN): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// TestFullDisk fills a 2 MiB file system with a log of 512 KiB segments:
// the roll that cannot preallocate its segment fails with ENOSPC (an
// error, not a SIGBUS), the data appended before reads back, and the log
// is poisoned (ErrFailed) until reopened; Close still works.
func TestFullDisk(t *testing.T) {
	checkFullDisk(t, fullMountTmpfs(t, "2m"))
}

// TestFullDiskInjected is TestFullDisk without root: every fallocate of
// the process draws from a 2 MiB budget (testhook.Fallocate), and the one
// that would exceed it fails with ENOSPC as a full file system's does.
func TestFullDiskInjected(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var used int64
	const budget = 2 << 20
	hook := func(fd int, off, n int64) error {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		grow := max(0, off+n-st.Size)
		if used+grow > budget {
			return syscall.ENOSPC
		}
		used += grow
		return nil
	}
	if !testhook.Fallocate.CompareAndSwap(nil, &hook) {
		t.Fatal("testhook.Fallocate is already set")
	}
	t.Cleanup(func() { testhook.Fallocate.Store(nil) })
	checkFullDisk(t, dir)
	mu.Lock()
	defer mu.Unlock()
	if used == 0 {
		t.Fatal("the fallocate hook never ran")
	}
}

// checkFullDisk runs the full-disk scenario in mnt, a directory on which
// about 2 MiB can be allocated.
func checkFullDisk(t *testing.T, mnt string) {
	opts := smallOpts(t)
	opts.SegmentBytes = 512 << 10
	opts.MaxIndexBytes = 4096
	opts.IndexIntervalBytes = 4096
	l, err := Open(mnt, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	big := makeBatch(t, 4, 16<<10, 1000) // ~64 KiB
	var appendErr error
	for i := 0; i < 100; i++ {
		before := ltCapture(t, l)
		_, err := l.AppendAsLeader(big, 1)
		if err == nil {
			continue
		}
		appendErr = err
		// Nothing of the failed append is visible; the rest reads back.
		after := ltCapture(t, l)
		ltSameState(t, "after the failed append", after, before)
		ltCheckReads(t, l, after.Batches)
		if len(after.Batches) < 8 {
			t.Fatalf("only %d batches before the disk filled", len(after.Batches))
		}
		break
	}
	if appendErr == nil {
		t.Fatal("2 MiB never filled up")
	}
	if !errors.Is(appendErr, syscall.ENOSPC) {
		t.Fatalf("failed append: %v, want ENOSPC", appendErr)
	}
	if errors.Is(appendErr, ErrFailed) {
		t.Fatalf("the failing append itself should report the cause, got %v", appendErr)
	}
	t.Logf("disk full after %d segments: %v", len(l.Segments()), appendErr)

	// Poisoned: writes refuse with ErrFailed; reads go on.
	small := makeBatch(t, 1, 10, 1)
	if _, err := l.AppendAsLeader(small, 1); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after the failure: %v, want ErrFailed", err)
	}
	if _, err := l.AppendAsFollower(makeFollowerBatch(t, l.LogEndOffset(), 1, 1, 10, 1)); !errors.Is(err, ErrFailed) {
		t.Fatalf("follower append after the failure: %v, want ErrFailed", err)
	}
	for name, call := range map[string]func() error{"Roll": l.Roll, "Flush": l.Flush,
		"TruncateTo": func() error { return l.TruncateTo(0) }} {
		if err := call(); !errors.Is(err, ErrFailed) {
			t.Fatalf("%s after the failure: %v, want ErrFailed", name, err)
		}
	}
	state := ltCapture(t, l)
	ltCheckReads(t, l, state.Batches)
	if err := l.Close(); err != nil {
		t.Fatalf("Close of a failed log: %v", err)
	}
	// The failed roll left no file behind, and every segment's data is
	// in place on the full disk.
	ltCheckFiles(t, mnt, state.Segs)
}

// TestFullDiskReserve fills a file system while an active segment's
// reservation grows (the segment is larger than the file system): the
// append that cannot reserve its room fails with ENOSPC, as an error and
// not a SIGBUS, with nothing of it visible; the log is not poisoned, since
// nothing was written, so once space is freed appends go on, and the log
// reopens with every batch. Both write paths.
func TestFullDiskReserve(t *testing.T) {
	for _, path := range []WritePath{WriteMapped, WritePwrite} {
		t.Run(fmt.Sprint("path=", path), func(t *testing.T) {
			mnt := fullMountTmpfs(t, "4m")
			ballast := filepath.Join(mnt, "ballast")
			if err := os.WriteFile(ballast, make([]byte, 1<<20), 0o644); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(mnt, "t-0")
			opts := smallOpts(t)
			opts.SegmentBytes = 64 << 20
			opts.WritePath = path
			l, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			big := makeBatch(t, 4, 16<<10, 1000) // ~64 KiB
			var appendErr error
			for range 200 {
				before := ltCapture(t, l)
				if _, err := l.AppendAsLeader(big, 1); err != nil {
					appendErr = err
					ltSameState(t, "after the failed append", ltCapture(t, l), before)
					break
				}
			}
			if !errors.Is(appendErr, syscall.ENOSPC) {
				t.Fatalf("append on a full disk: %v, want ENOSPC", appendErr)
			}
			if len(l.Segments()) != 1 {
				t.Fatalf("%d segments: the disk should fill inside the first", len(l.Segments()))
			}
			if err := os.Remove(ballast); err != nil {
				t.Fatal(err)
			}
			for range 4 {
				if _, err := l.AppendAsLeader(big, 1); err != nil {
					t.Fatalf("append after space was freed: %v", err)
				}
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			state := ltCapture(t, l)
			ltCheckReads(t, l, state.Batches)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l, err = Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ltSameState(t, "reopened", ltCapture(t, l), state)
		})
	}
}
