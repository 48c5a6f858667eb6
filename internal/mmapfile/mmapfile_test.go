package mmapfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/partlog/partlog/internal/testutil"
	"golang.org/x/sys/unix"
)

func TestCreateWriteReopen(t *testing.T) {
	path := testutil.TempPath(t, "a")
	f, err := Open(path, Options{Create: true, Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if f.Size() != 1<<20 || f.Cap() != 1<<20 || len(f.Bytes()) != 1<<20 {
		t.Fatalf("size %d cap %d len %d", f.Size(), f.Cap(), len(f.Bytes()))
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 1<<20 {
		t.Fatalf("file size %d", st.Size())
	}
	if blocks := st.Sys().(*syscall.Stat_t).Blocks * 512; blocks < 1<<20 {
		t.Fatalf("only %d bytes allocated; fallocate did not reserve the file", blocks)
	}
	payload := []byte("kafka-compatible bytes")
	copy(f.Bytes()[5000:], payload)
	if err := f.Sync(5000, int64(len(payload))); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8192); err != nil {
		t.Fatal(err)
	}
	if err := f.SyncFile(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f.Mapped() || f.Bytes() != nil {
		t.Fatal("mapping still present after Close")
	}

	r, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Size() != 8192 || r.Writable() {
		t.Fatalf("read-only reopen: size %d writable %v", r.Size(), r.Writable())
	}
	if !bytes.Equal(r.Bytes()[5000:5000+len(payload)], payload) {
		t.Fatal("payload lost")
	}
	for _, err := range []error{r.Grow(9000), r.Truncate(10), r.Sync(0, 10), r.SyncFile()} {
		if !errors.Is(err, ErrReadOnly) {
			t.Fatalf("mutating a read-only file: got %v, want ErrReadOnly", err)
		}
	}
}

func TestCreateExisting(t *testing.T) {
	path := testutil.TempPath(t, "a")
	if err := os.WriteFile(path, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, Options{Create: true, Reserve: 4096})
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("got %v, want ErrExist", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "keep" {
		t.Fatal("existing file was modified")
	}
}

func TestZeroLength(t *testing.T) {
	path := testutil.TempPath(t, "empty")
	f, err := Open(path, Options{Create: true, Reserve: 0})
	if err != nil {
		t.Fatal(err)
	}
	if f.Size() != 0 || len(f.Bytes()) != 0 {
		t.Fatal("non-empty zero-length file")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, writable := range []bool{false, true} {
		g, err := Open(path, Options{ReadOnly: !writable})
		if err != nil {
			t.Fatalf("writable=%v: %v", writable, err)
		}
		if g.Size() != 0 || len(g.Bytes()) != 0 {
			t.Fatalf("writable=%v: size %d", writable, g.Size())
		}
		if err := g.Prefault(0, 4096); err != nil {
			t.Fatal(err)
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenWritablePreallocates(t *testing.T) {
	path := testutil.TempPath(t, "idx")
	if err := os.WriteFile(path, []byte{1, 2, 3, 4, 5, 6, 7, 8}, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path, Options{Reserve: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Size() != 64<<10 {
		t.Fatalf("size %d", f.Size())
	}
	if !bytes.Equal(f.Bytes()[:8], []byte{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Fatal("existing content lost")
	}
	st, _ := os.Stat(path)
	if st.Size() != 64<<10 {
		t.Fatalf("file not extended: %d", st.Size())
	}
	// A map size below the file length keeps the file length.
	g, err := Open(path, Options{Reserve: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Size() != 64<<10 {
		t.Fatalf("size %d", g.Size())
	}
}

func TestOpenMissing(t *testing.T) {
	_, err := Open(testutil.TempPath(t, "nope"), Options{ReadOnly: true})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v", err)
	}
}

// TestOpenNeverFollowsLinks: Open refuses a symbolic link (a writable
// open would preallocate its target, which may lie anywhere) and a path
// that is not a regular file (mapping a directory fails later with
// ENODEV).
func TestOpenNeverFollowsLinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, writable := range []bool{true, false} {
		if f, err := Open(link, Options{ReadOnly: !writable, Reserve: 1 << 20}); err == nil {
			_ = f.Close()
			t.Fatalf("Open(link, writable %v) succeeded", writable)
		}
		if f, err := Open(dir, Options{ReadOnly: !writable, Reserve: 1 << 20}); err == nil {
			_ = f.Close()
			t.Fatalf("Open(directory, writable %v) succeeded", writable)
		} else if !writable && !errors.Is(err, ErrNotRegular) {
			t.Fatalf("Open(directory): %v, want ErrNotRegular", err)
		}
	}
	if st, err := os.Stat(target); err != nil || st.Size() != 3 {
		t.Fatalf("target changed: %v %v", st, err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "absent"), dangling); err != nil {
		t.Fatal(err)
	}
	if f, err := Open(dangling, Options{Create: true, Reserve: 4096}); err == nil {
		_ = f.Close()
		t.Fatal("Create through a dangling link succeeded")
	}
	if _, err := os.Lstat(filepath.Join(dir, "absent")); err == nil {
		t.Fatal("Create made the link's target")
	}
}

// TestGrowAllocatesWholePage: a Grow to a length inside a page also
// allocates the rest of that page (the file's length kept): a store
// into the mapping reserves blocks for its whole page, so on a file
// system of blocks smaller than a page (ext4 under 512 MiB) a full disk
// faulted (SIGBUS) an append that its Grow had reserved, for blocks past
// its end no call had allocated; and a failure to allocate them is the
// Grow's.
func TestGrowAllocatesWholePage(t *testing.T) {
	orig := fallocate
	t.Cleanup(func() { fallocate = orig })
	type call struct {
		mode   uint32
		off, n int64
	}
	var calls []call
	failKeepSize := false
	fallocate = func(fd int, mode uint32, off, n int64) error {
		calls = append(calls, call{mode, off, n})
		if failKeepSize && mode == unix.FALLOC_FL_KEEP_SIZE {
			return unix.ENOSPC
		}
		return orig(fd, mode, off, n)
	}
	path := filepath.Join(t.TempDir(), "seg")
	f, err := Open(path, Options{Create: true, Reserve: 4096, Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	calls = nil
	pg := int64(os.Getpagesize())
	n := 3*pg + 100
	if err := f.Grow(n); err != nil {
		t.Fatal(err)
	}
	last := calls[len(calls)-1]
	if last.mode != unix.FALLOC_FL_KEEP_SIZE || last.off != n || last.off+last.n != 4*pg {
		t.Fatalf("fallocate calls %+v: want the rest of the page [%d, %d) kept past the length", calls, n, 4*pg)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != n || f.Size() != n {
		t.Fatalf("length %d, Size %d, want %d (%v)", fi.Size(), f.Size(), n, err)
	}
	failKeepSize = true
	if err := f.Grow(5*pg + 1); !errors.Is(err, unix.ENOSPC) || f.Size() != n {
		t.Fatalf("Grow whose page cannot be allocated: %v, Size %d", err, f.Size())
	}
}
