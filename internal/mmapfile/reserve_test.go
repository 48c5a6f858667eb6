package mmapfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/partlog/partlog/internal/testutil"
	"golang.org/x/sys/unix"
)

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
	_, err := Open(path, Options{Create: true, Reserve: 1 << 20})
	if !errors.Is(err, unix.ENOSPC) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Create: got %v, want ENOSPC naming %s", err, path)
	}
	if _, statErr := os.Stat(path); !errors.Is(statErr, fs.ErrNotExist) {
		t.Fatalf("failed Create left a file behind: %v", statErr)
	}

	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{Reserve: 1 << 20}); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("Open: got %v, want ENOSPC", err)
	}

	fail = false
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path, Options{Create: true, Reserve: 1 << 20})
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
	f, err := Open(path, Options{Create: true, Reserve: 64 << 10})
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

// TestReserved covers a growable file: mapped at its capacity, backed only
// up to the reservation, grown in place, written with WriteAt and read
// through the same mapping, and reopened with a reservation.
func TestReserved(t *testing.T) {
	path := testutil.TempPath(t, "r")
	f, err := Open(path, Options{Create: true, Reserve: 64 << 10, Capacity: 1 << 20})
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
	g, err := Open(path, Options{Reserve: 4096, Capacity: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Size() != 4096 || g.Cap() != 1<<20 || string(g.Bytes()[10:15]) != "store" {
		t.Fatalf("reopened: size %d cap %d data %q", g.Size(), g.Cap(), g.Bytes()[10:15])
	}
	if _, err := Open(testutil.TempPath(t, "bad"), Options{Create: true, Reserve: 20, Capacity: 10}); err == nil {
		t.Fatal("reserve above capacity accepted")
	}
}

// TestAhead: a file created or opened "ahead" is as long as its capacity
// from the start, but only its reserved prefix has blocks; Grow reserves
// more without changing the length, nothing is handed out or written past
// the reservation, and Truncate cuts the file to its data.
func TestAhead(t *testing.T) {
	path := testutil.TempPath(t, "a")
	f, err := Open(path, Options{Create: true, Ahead: true, Reserve: 64 << 10, Capacity: 8 << 20})
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
	g, err := Open(path, Options{Ahead: true, Capacity: 8 << 20})
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
	f, err := Open(path, Options{Create: true, Ahead: true, Reserve: 64 << 10, Capacity: 4 << 20})
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

// TestPreallocate checks that File.Preallocate allocates blocks past the
// reservation without changing Size, the length or the bytes, that a
// Grow then takes the range (a prefault worker's, internal/prefault), and that
// truncating to the data frees the blocks again.
func TestPreallocate(t *testing.T) {
	path := testutil.TempPath(t, "p")
	f, err := Open(path, Options{Create: true, Ahead: true, Reserve: 64 << 10, Capacity: 8 << 20})
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
	f, err := Open(path, Options{Create: true, Ahead: true, Reserve: 64 << 10, Capacity: 8 << 20, MapLen: 8 << 20})
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

// TestCreateAheadMapped (Options.Ahead with MapLen): the mapping may reach past the reservation (over
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
			f, err := Open(path, Options{Create: true, Ahead: true, Reserve: tc.reserve, Capacity: tc.capacity, MapLen: tc.mapTo})
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
