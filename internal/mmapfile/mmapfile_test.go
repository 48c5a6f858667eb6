package mmapfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/partlog/partlog/internal/testutil"
	"golang.org/x/sys/unix"
)

func TestCreateWriteReopen(t *testing.T) {
	path := testutil.TempPath(t, "a")
	f, err := Create(path, 1<<20)
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

	r, err := Open(path, 1<<30, false)
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
	_, err := Create(path, 4096)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("got %v, want ErrExist", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "keep" {
		t.Fatal("existing file was modified")
	}
}

func TestZeroLength(t *testing.T) {
	path := testutil.TempPath(t, "empty")
	f, err := Create(path, 0)
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
		g, err := Open(path, 0, writable)
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
	f, err := Open(path, 64<<10, true)
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
	g, err := Open(path, 10, true)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Size() != 64<<10 {
		t.Fatalf("size %d", g.Size())
	}
}

func TestOpenMissing(t *testing.T) {
	_, err := Open(testutil.TempPath(t, "nope"), 0, false)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v", err)
	}
}

// TestFallocateFailure checks that a full disk is an error at preallocation
// time, carries the path, and leaves no half-created file behind.
func TestFallocateFailure(t *testing.T) {
	orig := fallocate
	t.Cleanup(func() { fallocate = orig })
	fail := false
	fallocate = func(fd int, mode uint32, off, n int64) error {
		if fail {
			return unix.ENOSPC
		}
		return orig(fd, mode, off, n)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "seg")
	fail = true
	_, err := Create(path, 1<<20)
	if !errors.Is(err, unix.ENOSPC) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Create: got %v, want ENOSPC naming %s", err, path)
	}
	if _, statErr := os.Stat(path); !errors.Is(statErr, fs.ErrNotExist) {
		t.Fatalf("failed Create left a file behind: %v", statErr)
	}

	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, 1<<20, true); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("Open: got %v, want ENOSPC", err)
	}

	fail = false
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	f, err := Create(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(4096); err != nil {
		t.Fatal(err)
	}
	fail = true
	if err := f.Grow(1 << 20); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("Grow: got %v, want ENOSPC", err)
	}
	if f.Size() != 4096 {
		t.Fatalf("failed Grow changed the size to %d", f.Size())
	}
}

func TestTruncateGrow(t *testing.T) {
	path := testutil.TempPath(t, "a")
	f, err := Create(path, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	copy(f.Bytes(), "abc")
	if err := f.Truncate(3); err != nil {
		t.Fatal(err)
	}
	if f.Size() != 3 || string(f.Bytes()) != "abc" {
		t.Fatalf("after truncate: %q", f.Bytes())
	}
	if err := f.Truncate(4); !errors.Is(err, ErrCapacity) {
		t.Fatalf("lengthening Truncate: %v", err)
	}
	if err := f.Grow(f.Cap() + 1); !errors.Is(err, ErrCapacity) {
		t.Fatalf("Grow past the mapping: %v", err)
	}
	if err := f.Grow(32 << 10); err != nil {
		t.Fatal(err)
	}
	b := f.Bytes()
	if len(b) != 32<<10 || string(b[:3]) != "abc" || b[3] != 0 || b[20000] != 0 {
		t.Fatal("grown region not zero or prefix lost")
	}
	b[20000] = 7 // the re-grown pages must be writable without a fault
	if err := f.Sync(0, 32<<10); err != nil {
		t.Fatal(err)
	}
	if err := f.syncMsync(0, 32<<10); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(0, f.Cap()+1); !errors.Is(err, ErrCapacity) {
		t.Fatalf("Sync outside the mapping: %v", err)
	}
	st, _ := os.Stat(path)
	if st.Size() != 32<<10 {
		t.Fatalf("file size %d", st.Size())
	}
}

func TestRefCount(t *testing.T) {
	f, err := Create(testutil.TempPath(t, "a"), 4096)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Acquire() {
		t.Fatal("Acquire on open file failed")
	}
	view := f.Bytes()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if !f.Mapped() {
		t.Fatal("unmapped while a reader holds a reference")
	}
	view[0] = 1 // still mapped: must not fault
	if f.Acquire() {
		t.Fatal("Acquire succeeded after Close")
	}
	if err := f.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if err := f.Sync(0, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
	f.Release()
	if f.Mapped() {
		t.Fatal("still mapped after the last Release")
	}
	if err := f.Prefault(0, 4096); !errors.Is(err, ErrClosed) {
		t.Fatalf("Prefault after unmap: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("unbalanced Release did not panic")
		}
	}()
	f.Release()
}

// TestReadersRaceClose has readers take references and read the mapping while
// the owner closes it; run with -race. A reader that got a reference must be
// able to read the whole mapping; the unmap must happen exactly once, after
// the last reader.
func TestReadersRaceClose(t *testing.T) {
	for round := 0; round < 20; round++ {
		f, err := Create(testutil.TempPath(t, "r"), 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		for i := range f.Bytes() {
			f.Bytes()[i] = 1
		}
		var wg sync.WaitGroup
		var reads atomic.Int64
		start := make(chan struct{})
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for {
					if !f.Acquire() {
						return
					}
					sum := 0
					for _, c := range f.Bytes() {
						sum += int(c)
					}
					f.Release()
					if sum != 64<<10 {
						t.Errorf("read %d, want %d", sum, 64<<10)
						return
					}
					reads.Add(1)
				}
			}()
		}
		close(start)
		time.Sleep(time.Millisecond)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if f.Mapped() {
			t.Fatal("mapping survived Close and the last Release")
		}
	}
}

func TestPrefault(t *testing.T) {
	f, err := Create(testutil.TempPath(t, "p"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	copy(f.Bytes()[4097:], "data")
	if err := f.Prefault(4000, 1<<30); err != nil {
		t.Fatal(err)
	}
	if err := f.Prefault(-5, 10); err != nil {
		t.Fatal(err)
	}
	if string(f.Bytes()[4097:4101]) != "data" {
		t.Fatal("Prefault changed the contents")
	}
}

func TestPrefaultFallback(t *testing.T) {
	orig := madvise
	t.Cleanup(func() { madvise = orig })
	var advices []int
	madvise = func(b []byte, advice int) error {
		advices = append(advices, advice)
		if advice == unix.MADV_POPULATE_WRITE {
			return unix.EINVAL
		}
		return orig(b, advice)
	}
	f, err := Create(testutil.TempPath(t, "p"), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := 0; i < 2; i++ {
		if err := f.Prefault(0, 64<<10); err != nil {
			t.Fatal(err)
		}
	}
	// The new mapping is advised MADV_RANDOM; Prefault reads ahead and
	// populates, then, the populate refused, only reads ahead.
	want := []int{unix.MADV_RANDOM, unix.MADV_WILLNEED, unix.MADV_POPULATE_WRITE, unix.MADV_WILLNEED}
	if len(advices) != len(want) {
		t.Fatalf("advices %v, want %v", advices, want)
	}
	for i := range want {
		if advices[i] != want[i] {
			t.Fatalf("advices %v, want %v", advices, want)
		}
	}
	madvise = func([]byte, int) error { return unix.EIO }
	if err := f.Prefault(0, 4096); !errors.Is(err, unix.EIO) {
		t.Fatalf("got %v, want EIO", err)
	}
}

// TestReserved covers a growable file: mapped at its capacity, backed only
// up to the reservation, grown in place, written with WriteAt and read
// through the same mapping, and reopened with a reservation.
func TestReserved(t *testing.T) {
	path := testutil.TempPath(t, "r")
	f, err := CreateReserved(path, 1<<20, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	if f.Size() != 64<<10 || f.Cap() != 1<<20 || len(f.Bytes()) != 64<<10 {
		t.Fatalf("size %d cap %d bytes %d", f.Size(), f.Cap(), len(f.Bytes()))
	}
	if err := f.WriteAt([]byte("head"), []byte("body"), 64<<10-4); !errors.Is(err, ErrCapacity) {
		t.Fatalf("WriteAt past the reservation: %v, want ErrCapacity", err)
	}
	if err := f.Grow(128 << 10); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteAt([]byte("head"), []byte("body"), 64<<10-4); err != nil {
		t.Fatal(err)
	}
	if got := string(f.Bytes()[64<<10-4 : 64<<10+4]); got != "headbody" {
		t.Fatalf("mapping reads %q after WriteAt", got)
	}
	copy(f.Bytes()[10:], "store")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 128<<10 {
		t.Fatalf("file is %d bytes, want 128 KiB", st.Size())
	}
	if err := f.Grow(2 << 20); !errors.Is(err, ErrCapacity) {
		t.Fatalf("Grow past the mapping: %v, want ErrCapacity", err)
	}
	if err := f.Truncate(20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := OpenReserved(path, 1<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Size() != 4096 || g.Cap() != 1<<20 || string(g.Bytes()[10:15]) != "store" {
		t.Fatalf("reopened: size %d cap %d data %q", g.Size(), g.Cap(), g.Bytes()[10:15])
	}
	if _, err := CreateReserved(testutil.TempPath(t, "bad"), 10, 20); err == nil {
		t.Fatal("reserve above capacity accepted")
	}
}

func TestAlignRange(t *testing.T) {
	ps := pageSize
	tests := []struct {
		off, n, limit int64
		start, end    int64
	}{
		{0, 0, 10 * ps, 0, 0},
		{0, 1, 10 * ps, 0, ps},
		{1, ps, 10 * ps, 0, 2 * ps},
		{ps, ps, 10 * ps, ps, 2 * ps},
		{5 * ps, 100 * ps, 10 * ps, 5 * ps, 10 * ps},
		{10 * ps, 1, 10 * ps, 0, 0},
		{-3, 5, 10 * ps, 0, ps},
		{1, 1 << 62, 10*ps + 7, 0, 10*ps + 7},
	}
	for _, tc := range tests {
		s, e := alignRange(tc.off, tc.n, tc.limit)
		if s < e && (s != tc.start || e != tc.end) || s >= e && tc.start < tc.end {
			t.Errorf("alignRange(%d, %d, %d) = [%d, %d), want [%d, %d)", tc.off, tc.n, tc.limit, s, e, tc.start, tc.end)
		}
	}
}

// TestReleaseDescriptor: a File without its descriptor keeps its mapping
// (stores and reads work), and Grow, Truncate and Sync open the file for
// the call; WriteAt, which needs the descriptor, refuses.
func TestReleaseDescriptor(t *testing.T) {
	path := testutil.TempPath(t, "d")
	f, err := CreateReserved(path, 1<<20, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ReleaseDescriptor(); err != nil {
		t.Fatal(err)
	}
	copy(f.Bytes(), "entry")
	if err := f.Grow(8192); err != nil {
		t.Fatal(err)
	}
	copy(f.Bytes()[8000:], "late")
	if err := f.SyncFile(); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteAt(nil, []byte("x"), 0); err == nil {
		t.Fatal("WriteAt without a descriptor succeeded")
	}
	if err := f.Truncate(8004); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 8004 || string(data[:5]) != "entry" || string(data[8000:]) != "late" {
		t.Fatalf("file after release: %d bytes", len(data))
	}
}

// TestAhead: a file created or opened "ahead" is as long as its capacity
// from the start, but only its reserved prefix has blocks; Grow reserves
// more without changing the length, nothing is handed out or written past
// the reservation, and Truncate cuts the file to its data.
func TestAhead(t *testing.T) {
	path := testutil.TempPath(t, "a")
	f, err := CreateAhead(path, 8<<20, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	if n, a := testutil.LengthAndBlocks(t, path); n != 8<<20 || a < 64<<10 || a > 64<<10+4096 || f.Size() != 64<<10 || len(f.Bytes()) != 64<<10 || f.MapLen() != 64<<10 || f.Cap() != 8<<20 {
		t.Fatalf("length %d allocated %d size %d mapped %d", n, a, f.Size(), f.MapLen())
	}
	if err := f.WriteAt(nil, make([]byte, 10), 64<<10-5); !errors.Is(err, ErrCapacity) {
		t.Fatalf("WriteAt past the reservation: %v", err)
	}
	if err := f.Grow(1 << 20); !errors.Is(err, ErrCapacity) {
		t.Fatalf("Grow past the mapping: %v", err)
	}
	f = remap(t, f, 1<<20)
	if err := f.Grow(1 << 20); err != nil {
		t.Fatal(err)
	}
	if n, a := testutil.LengthAndBlocks(t, path); n != 8<<20 || a < 1<<20 || a > 1<<20+4096 {
		t.Fatalf("after Grow: length %d allocated %d", n, a)
	}
	copy(f.Bytes()[1<<20-4:], "tail")
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened with nothing to reserve: the file keeps its length until
	// the first Grow sets it to the capacity.
	g, err := OpenAhead(path, 8<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := testutil.LengthAndBlocks(t, path); n != 1<<20 || g.Size() != 1<<20 || g.Cap() != 8<<20 || g.MapLen() != 1<<20 || string(g.Bytes()[1<<20-4:]) != "tail" {
		t.Fatalf("reopened: length %d size %d cap %d mapped %d", n, g.Size(), g.Cap(), g.MapLen())
	}
	if err := g.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	g = remap(t, g, 4<<20)
	defer g.Close()
	if n, _ := testutil.LengthAndBlocks(t, path); n != 1<<20 {
		t.Fatalf("a Remap changed the deferred length: %d", n)
	}
	if err := g.Grow(2 << 20); err != nil {
		t.Fatal(err)
	}
	if n, a := testutil.LengthAndBlocks(t, path); n != 8<<20 || a < 2<<20 || a > 2<<20+4096 || g.Size() != 2<<20 {
		t.Fatalf("after the first Grow: length %d allocated %d size %d", n, a, g.Size())
	}
	copy(g.Bytes()[2<<20-4:], "more")
	if err := g.Grow(3 << 20); err != nil {
		t.Fatal(err)
	}
	if n, _ := testutil.LengthAndBlocks(t, path); n != 8<<20 || string(g.Bytes()[1<<20-4:1<<20]) != "tail" || string(g.Bytes()[2<<20-4:2<<20]) != "more" {
		t.Fatalf("after the second Grow: length %d", n)
	}
}

// TestParkDescriptor: a parked File holds no descriptor until a call needs
// one, then keeps it until Close; a Sync beside the owner's first WriteAt
// opens at most one that stays (run with -race).
func TestParkDescriptor(t *testing.T) {
	path := testutil.TempPath(t, "p")
	f, err := CreateAhead(path, 1<<20, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ParkDescriptor(); err != nil {
		t.Fatal(err)
	}
	if f.Descriptors() {
		t.Fatal("parked File holds a descriptor")
	}
	copy(f.Bytes(), "stored")
	if f.Descriptors() {
		t.Fatal("a store into the mapping opened a descriptor")
	}
	done := make(chan error, 1)
	go func() { done <- f.SyncFile() }()
	if err := f.WriteAt([]byte("he"), []byte("ad"), 8); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !f.Descriptors() {
		t.Fatal("no descriptor kept after WriteAt and Sync")
	}
	f = remap(t, f, 128<<10)
	if !f.Descriptors() {
		t.Fatal("Remap lost the descriptor")
	}
	if err := f.Grow(128 << 10); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(12); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f.Descriptors() {
		t.Fatal("descriptor kept after Close")
	}
	if err := f.SyncFile(); err == nil {
		t.Fatal("Sync after Close succeeded")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "stored\x00\x00head" {
		t.Fatalf("file holds %q", data)
	}
}

// remap maps f again at n bytes and closes the old File, as its owner does.
func remap(t *testing.T, f *File, n int64) *File {
	t.Helper()
	g, err := f.Remap(n)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if g.MapLen() != n || g.Size() != f.Size() || g.Cap() != f.Cap() {
		t.Fatalf("remapped: mapped %d size %d cap %d", g.MapLen(), g.Size(), g.Cap())
	}
	return g
}

// mappingsOf counts the mappings of path in /proc/self/maps.
func mappingsOf(t *testing.T, path string) int {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(maps), " "+path+"\n")
}

// TestRemap: a file made ahead is mapped over its reservation only; Remap
// maps it longer as a new File that keeps the descriptor's state, stores
// through either mapping are seen through the other, a reader of the old
// mapping keeps its slice after the owner has moved on and closed it, and
// the old mapping goes with the reader's Release. Out-of-range lengths are
// refused and leave the File as it was.
func TestRemap(t *testing.T) {
	path := testutil.TempPath(t, "r")
	f, err := CreateAhead(path, 4<<20, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ParkDescriptor(); err != nil {
		t.Fatal(err)
	}
	copy(f.Bytes(), "old mapping")
	if !f.Acquire() {
		t.Fatal("Acquire failed")
	}
	held := f.Bytes()
	for _, n := range []int64{32 << 10, 4<<20 + 1} {
		if _, err := f.Remap(n); !errors.Is(err, ErrCapacity) {
			t.Fatalf("Remap(%d): %v", n, err)
		}
	}
	if mappingsOf(t, path) != 1 {
		t.Fatalf("%d mappings before Remap", mappingsOf(t, path))
	}
	g := remap(t, f, 1<<20)
	if g.Descriptors() {
		t.Fatal("a parked File holds a descriptor after Remap")
	}
	if f.Acquire() {
		t.Fatal("Acquire on the replaced File succeeded")
	}
	if n := mappingsOf(t, path); n != 2 {
		t.Fatalf("%d mappings while a reader holds the old one", n)
	}
	if string(g.Bytes()[:11]) != "old mapping" {
		t.Fatalf("new mapping reads %q", g.Bytes()[:11])
	}
	copy(g.Bytes()[20:], "new")
	if string(held[:11]) != "old mapping" || string(held[20:23]) != "new" {
		t.Fatalf("old mapping reads %q", held[:23])
	}
	f.Release()
	if n := mappingsOf(t, path); n != 1 {
		t.Fatalf("%d mappings after the reader released the old one", n)
	}
	if err := g.Grow(1 << 20); err != nil {
		t.Fatal(err)
	}
	copy(g.Bytes()[1<<20-3:], "end")
	if err := g.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 1<<20 || string(data[:11]) != "old mapping" || string(data[20:23]) != "new" || string(data[1<<20-3:]) != "end" {
		t.Fatalf("file: %d bytes", len(data))
	}
}

// TestRetire: a retired File refuses Acquire at once; its mapping stays
// while a reader holds a reference and goes after the reader's Release,
// and without readers it goes on its own, off the caller's goroutine.
func TestRetire(t *testing.T) {
	waitMappings := func(path string, want int) {
		t.Helper()
		deadline := time.Now().Add(testutil.SettleTimeout)
		for mappingsOf(t, path) != want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if n := mappingsOf(t, path); n != want {
			t.Fatalf("%d mappings of %s, want %d", n, path, want)
		}
	}
	for _, reader := range []bool{false, true} {
		path := testutil.TempPath(t, fmt.Sprint("retire", reader))
		f, err := CreateAhead(path, 1<<20, 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		copy(f.Bytes(), "kept")
		if reader && !f.Acquire() {
			t.Fatal("Acquire failed")
		}
		held := f.Bytes()
		f.Retire()
		if f.Acquire() {
			t.Fatal("Acquire after Retire succeeded")
		}
		f.Retire() // a second one does nothing
		if !reader {
			waitMappings(path, 0)
			continue
		}
		time.Sleep(20 * time.Millisecond)
		if n := mappingsOf(t, path); n != 1 || string(held[:4]) != "kept" {
			t.Fatalf("%d mappings while a reader holds the retired File", n)
		}
		f.Release()
		waitMappings(path, 0)
	}
}

// TestRename checks that a File built under a temporary name goes by the
// name it is renamed to: a parked descriptor is opened again by the new
// name, a remapped File keeps it, and errors name it.
func TestRename(t *testing.T) {
	tmp := testutil.TempPath(t, "r.tmp")
	final := testutil.TempPath(t, "r")
	f, err := CreateAhead(tmp, 1<<20, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Rename(final); err != nil {
		t.Fatal(err)
	}
	if f.Path() != final {
		t.Fatalf("Path() = %q after Rename, want %q", f.Path(), final)
	}
	if _, err := os.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary name still there: %v", err)
	}
	if err := f.ParkDescriptor(); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteAt([]byte("he"), []byte("ad"), 0); err != nil {
		t.Fatalf("write through a descriptor opened again after Rename: %v", err)
	}
	f = remap(t, f, 128<<10)
	if f.Path() != final {
		t.Fatalf("Path() = %q after Remap, want %q", f.Path(), final)
	}
	err = f.Grow(f.Cap() + 1)
	if err == nil || !strings.Contains(err.Error(), final) || strings.Contains(err.Error(), ".tmp") {
		t.Fatalf("Grow past capacity: error %v does not name %s", err, final)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(final)
	if err != nil {
		t.Fatal(err)
	}
	if string(got[:4]) != "head" {
		t.Fatalf("file starts %q, want head", got[:4])
	}
}

// TestPreallocate checks that File.Preallocate allocates blocks past the
// reservation without changing Size, the length or the bytes, that a
// Grow then takes the range (a prefault worker's, internal/prefault), and that
// truncating to the data frees the blocks again.
func TestPreallocate(t *testing.T) {
	path := testutil.TempPath(t, "p")
	f, err := CreateAhead(path, 8<<20, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() }) // the last mapping's
	if err := f.Preallocate(64<<10, 1<<20); err != nil {
		t.Fatal(err)
	}
	if n, a := testutil.LengthAndBlocks(t, path); n != 8<<20 || a < 1<<20+64<<10 || f.Size() != 64<<10 {
		t.Fatalf("after Preallocate: length %d allocated %d size %d", n, a, f.Size())
	}
	// Clamped to the capacity, never lengthening the file.
	if err := f.Preallocate(7<<20, 4<<20); err != nil {
		t.Fatal(err)
	}
	if n, a := testutil.LengthAndBlocks(t, path); n != 8<<20 || a < 2<<20+64<<10 || f.Size() != 64<<10 {
		t.Fatalf("after a Preallocate past the capacity: length %d allocated %d size %d", n, a, f.Size())
	}
	// Ahead of a Grow of the same range (as a prefault worker does it).
	f = remap(t, f, 8<<20)
	if err := f.Preallocate(2<<20, 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, a := testutil.LengthAndBlocks(t, path); a < 3<<20+64<<10 {
		t.Fatalf("Preallocate ahead of the data allocated only %d bytes", a)
	}
	if err := f.Grow(3 << 20); err != nil {
		t.Fatal(err)
	}
	for i, c := range f.Bytes()[:3<<20] {
		if c != 0 {
			t.Fatalf("byte %d = %#x", i, c)
		}
	}
	copy(f.Bytes(), "data")
	if err := f.Truncate(4096); err != nil {
		t.Fatal(err)
	}
	if n, a := testutil.LengthAndBlocks(t, path); n != 4096 || a > 8192 {
		t.Fatalf("after Truncate: length %d allocated %d", n, a)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Preallocate(0, 4096); !errors.Is(err, ErrClosed) {
		t.Fatalf("Preallocate after Close: %v", err)
	}
}

// TestGrowWithinPreallocated checks that a Grow into blocks Preallocate
// allocated makes no fallocate call, that a Grow past them allocates only
// the rest, and that neither a Preallocate leaving a gap after the
// reservation nor one overtaken by a Truncate counts.
func TestGrowWithinPreallocated(t *testing.T) {
	var calls [][2]int64
	orig := fallocate
	fallocate = func(fd int, mode uint32, off, n int64) error {
		if mode == 0 { // Grow's (Preallocate keeps the size)
			calls = append(calls, [2]int64{off, n})
		}
		return orig(fd, mode, off, n)
	}
	t.Cleanup(func() { fallocate = orig })
	path := testutil.TempPath(t, "g")
	f, err := CreateAheadMapped(path, 8<<20, 64<<10, 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	calls = nil
	if err := f.Preallocate(64<<10, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Grow(512 << 10); err != nil {
		t.Fatal(err)
	}
	if err := f.Grow(1<<20 + 64<<10); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 0 || f.Size() != 1<<20+64<<10 {
		t.Fatalf("Grow within preallocated blocks: fallocate calls %v, size %d", calls, f.Size())
	}
	if err := f.Grow(2 << 20); err != nil {
		t.Fatal(err)
	}
	if want := [][2]int64{{1<<20 + 64<<10, 2<<20 - (1<<20 + 64<<10)}}; !slices.Equal(calls, want) {
		t.Fatalf("Grow past preallocated blocks: fallocate calls %v, want %v", calls, want)
	}
	// A gap between the reservation and the preallocated range.
	calls = nil
	if err := f.Preallocate(3<<20, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Grow(3<<20 + 4096); err != nil {
		t.Fatal(err)
	}
	if want := [][2]int64{{2 << 20, 1<<20 + 4096}}; !slices.Equal(calls, want) {
		t.Fatalf("Grow after a Preallocate with a gap: fallocate calls %v, want %v", calls, want)
	}
	// A Truncate forgets what it cut off.
	if err := f.Preallocate(f.Size(), 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(4096); err != nil {
		t.Fatal(err)
	}
	calls = nil
	if err := f.Grow(64 << 10); err != nil {
		t.Fatal(err)
	}
	if want := [][2]int64{{4096, 60 << 10}}; !slices.Equal(calls, want) {
		t.Fatalf("Grow after Truncate: fallocate calls %v, want %v", calls, want)
	}
	// A Remap keeps what was preallocated.
	if err := f.Preallocate(64<<10, 1<<20); err != nil {
		t.Fatal(err)
	}
	f = remap(t, f, 8<<20)
	calls = nil
	if err := f.Grow(1 << 20); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 0 {
		t.Fatalf("Grow after Remap within preallocated blocks: fallocate calls %v", calls)
	}
}

// lengthAndBlocks returns the length of the file at path and the bytes
// of disk allocated to it (st_blocks).

// cached counts the pages of the file at path in [off, off+n) that are in
// the page cache (cachestat(2), Linux 6.5; the test is skipped before).
func cached(t *testing.T, path string, off, n int64) int64 {
	t.Helper()
	fd, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	var st unix.Cachestat_t
	r := unix.CachestatRange{Off: uint64(off), Len: uint64(n)}
	if err := unix.Cachestat(uint(fd.Fd()), &r, &st, 0); errors.Is(err, unix.ENOSYS) {
		t.Skip("no cachestat(2)")
	} else if err != nil {
		t.Fatal(err)
	}
	return int64(st.Cache)
}

// TestWritableMappingReadsNoAhead: a store into a writable mapping brings
// that page into the page cache, not the read-ahead window around it
// (the device's read_ahead_kb, megabytes of zeros past an active
// segment's write position), in a new mapping and in a remapped one;
// Prefault brings in its range and no more.
func TestWritableMappingReadsNoAhead(t *testing.T) {
	const capacity, reserve = 64 << 20, 16 << 20
	path := testutil.TempPath(t, "ra")
	f, err := CreateAhead(path, capacity, reserve)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	f.Bytes()[5*pageSize] = 1
	if n := cached(t, path, 0, capacity); n > 1 {
		t.Fatalf("a store brought %d pages into the page cache, want 1", n)
	}
	g, err := f.Remap(2 * reserve)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f = g
	if err := f.Grow(2 * reserve); err != nil {
		t.Fatal(err)
	}
	f.Bytes()[reserve+reserve/2] = 1
	if n := cached(t, path, 0, capacity); n > 2 {
		t.Fatalf("two stores brought %d pages into the page cache, want 2", n)
	}
	const at, n = 4 << 20, 1 << 20
	if err := f.Prefault(at, n); err != nil {
		t.Fatal(err)
	}
	if got := cached(t, path, at, n); got != n/pageSize {
		t.Fatalf("Prefault brought %d of its %d pages in", got, n/pageSize)
	}
	if got := cached(t, path, 0, capacity); got > n/pageSize+2 {
		t.Fatalf("%d pages in the page cache after Prefault of %d and two stores", got, n/pageSize)
	}
}

// TestCreateAheadMapped: the mapping may reach past the reservation (over
// the file's hole) so that Grow needs no Remap up to it, while Bytes,
// WriteAt and the blocks stay within the reservation; a mapping shorter
// than the reservation or longer than the capacity is refused.
func TestCreateAheadMapped(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		capacity, reserve, mapTo int64
		ok                       bool
	}{
		{"past the reservation", 8 << 20, 64 << 10, 1 << 20, true},
		{"the reservation", 8 << 20, 64 << 10, 64 << 10, true},
		{"the capacity", 8 << 20, 64 << 10, 8 << 20, true},
		{"short of the reservation", 8 << 20, 64 << 10, 32 << 10, false},
		{"past the capacity", 8 << 20, 64 << 10, 16 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := testutil.TempPath(t, "m")
			f, err := CreateAheadMapped(path, tc.capacity, tc.reserve, tc.mapTo)
			if !tc.ok {
				if err == nil {
					_ = f.Close()
					t.Fatal("accepted")
				}
				if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
					t.Fatalf("refused (%v) but left a file: %v", err, serr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if n, a := testutil.LengthAndBlocks(t, path); n != tc.capacity || a > tc.reserve+4096 || f.Size() != tc.reserve || len(f.Bytes()) != int(tc.reserve) || f.MapLen() != tc.mapTo || f.Cap() != tc.capacity {
				t.Fatalf("length %d allocated %d size %d bytes %d mapped %d cap %d", n, a, f.Size(), len(f.Bytes()), f.MapLen(), f.Cap())
			}
			if err := f.WriteAt(nil, make([]byte, 10), tc.reserve-5); !errors.Is(err, ErrCapacity) {
				t.Fatalf("WriteAt past the reservation: %v", err)
			}
			if err := f.Prefault(0, tc.mapTo); err != nil {
				t.Fatal(err)
			}
			if _, a := testutil.LengthAndBlocks(t, path); a > tc.reserve+4096 {
				t.Fatalf("Prefault allocated %d bytes past the reservation %d", a, tc.reserve)
			}
			if err := f.Grow(tc.mapTo); err != nil {
				t.Fatal(err)
			}
			if _, a := testutil.LengthAndBlocks(t, path); a < tc.mapTo || len(f.Bytes()) != int(tc.mapTo) {
				t.Fatalf("after Grow to the mapping: allocated %d, %d bytes", a, len(f.Bytes()))
			}
			copy(f.Bytes()[tc.mapTo-4:], "tail")
			if err := f.Grow(tc.mapTo + 1); tc.mapTo < tc.capacity && !errors.Is(err, ErrCapacity) {
				t.Fatalf("Grow past the mapping: %v", err)
			}
		})
	}
}

// TestCached: Cached tells a page in the page cache from one that is not,
// and is false outside Size.
func TestCached(t *testing.T) {
	const capacity, reserve = 4 << 20, 1 << 20
	f, err := CreateAhead(testutil.TempPath(t, "cached"), capacity, reserve)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	f.Bytes()[3*pageSize+5] = 1
	for _, c := range []struct {
		off  int64
		want bool
	}{
		{3 * pageSize, true}, {3*pageSize + 100, true}, {4*pageSize - 1, true},
		{0, false}, {4 * pageSize, false}, {-1, false}, {reserve, false}, {capacity, false},
	} {
		if got := f.Cached(c.off); got != c.want {
			t.Errorf("Cached(%d) = %v, want %v", c.off, got, c.want)
		}
	}
}
