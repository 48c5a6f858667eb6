package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

func TestUsable(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "file"), "x")
	if err := os.Mkdir(filepath.Join(dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "file"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nonexistent", filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"file": "", "dir": "directory", "link": "symbolic link",
		"dangling": "symbolic link", "fifo": "not a regular file"}
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		ok, why := Usable(de)
		if ok != (want[de.Name()] == "") || why != want[de.Name()] {
			t.Errorf("Usable(%s) = %v, %q; want %q", de.Name(), ok, why, want[de.Name()])
		}
	}
}

func mustWrite(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadSmallRefusesLargeFile: a sparse zero-filled file far above the
// limit is refused from its size, without being read (memory stays small
// and the error is short).
func TestReadSmallRefusesLargeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader-epoch-checkpoint")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(3 << 30); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b, err := ReadSmall(path)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) || b != nil {
		t.Fatalf("ReadSmall = %d bytes, %v; want ErrTooLarge", len(b), err)
	}
	if len(err.Error()) > 300 {
		t.Fatalf("error of %d bytes", len(err.Error()))
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Fatalf("ReadSmall allocated %d bytes for a refused file", d)
	}
	// At the limit it is read; one byte above it is not.
	if err := os.Truncate(path, SmallFileLimit); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadSmall(path); err != nil || len(b) != SmallFileLimit {
		t.Fatalf("at the limit: %d bytes, %v", len(b), err)
	}
	if err := os.Truncate(path, SmallFileLimit+1); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSmall(path); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("one byte above the limit: %v", err)
	}
}

func TestReadSmallOthers(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadSmall(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	mustWrite(t, filepath.Join(dir, "f"), "abc")
	if b, err := ReadSmall(filepath.Join(dir, "f")); err != nil || string(b) != "abc" {
		t.Fatalf("small: %q %v", b, err)
	}
	if _, err := ReadSmall(dir); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("directory: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSmall(fifo); !errors.Is(err, ErrNotRegular) { // must not block
		t.Fatalf("fifo: %v", err)
	}
	// A file over the limit read through a lower limit: the read itself
	// stops at the limit.
	mustWrite(t, filepath.Join(dir, "g"), strings.Repeat("x", 50))
	if _, err := readLimit(filepath.Join(dir, "g"), 10); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("limit 10: %v", err)
	}
}

func TestClip(t *testing.T) {
	long := strings.Repeat("\x00", 1<<20)
	args := []any{long, []byte(long), errors.New(long), 7, "short", []byte("b")}
	msg := fmt.Sprintf("%q %q %v %d %s %s", Clip(args)...)
	if len(msg) > 3*(4*ExcerptLen+40)+20 {
		t.Fatalf("clipped message is %d bytes", len(msg))
	}
	if !strings.Contains(msg, fmt.Sprintf("(%d more bytes)", len(long)-ExcerptLen)) || !strings.HasSuffix(msg, " 7 short b") {
		t.Fatalf("message %q", msg)
	}
	if args[0] != long {
		t.Fatal("Clip modified its argument")
	}
	if got := Excerpt("abc"); got != "abc" {
		t.Fatalf("Excerpt(short) = %q", got)
	}
	if got := Excerpt(strings.Repeat("y", 150)); got != strings.Repeat("y", 100)+"...(50 more bytes)" {
		t.Fatalf("Excerpt(long) = %q", got)
	}
}
