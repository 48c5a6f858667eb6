package mmapfile

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/partlog/partlog/internal/testutil"
	"golang.org/x/sys/unix"
)

func TestPrefault(t *testing.T) {
	f, err := Open(testutil.TempPath(t, "p"), Options{Create: true, Reserve: 1 << 20})
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
	f, err := Open(testutil.TempPath(t, "p"), Options{Create: true, Reserve: 64 << 10})
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
	f, err := Open(path, Options{Create: true, Ahead: true, Reserve: reserve, Capacity: capacity})
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

// TestCached: Cached tells a page in the page cache from one that is not,
// and is false outside Size.
func TestCached(t *testing.T) {
	const capacity, reserve = 4 << 20, 1 << 20
	f, err := Open(testutil.TempPath(t, "cached"), Options{Create: true, Ahead: true, Reserve: reserve, Capacity: capacity})
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

// TestDropPagesKeepsContents: DropPages unmaps whole pages inside its
// range (the start rounded up, the end down), and the bytes stored into
// them are read back unchanged afterwards; ranges outside the file or
// empty do nothing.
func TestDropPagesKeepsContents(t *testing.T) {
	f, err := Open(testutil.TempPath(t, "d"), Options{Create: true, Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := f.Bytes()
	want := make([]byte, 256<<10)
	for i := range want {
		want[i] = byte(i*7 + 1)
	}
	copy(data, want)
	if err := f.Prefault(0, 1<<20); err != nil {
		t.Fatal(err)
	}
	all := int(1<<20) / int(pageSize)
	if n := testutil.PresentPages(t, data); n != all {
		t.Skipf("%d of %d pages mapped after Prefault (no populate here?)", n, all)
	}
	// From the second byte of page 1 to the middle of page 38 (0-based):
	// the whole pages 2 to 37 go, 36 of them.
	if err := f.DropPages(pageSize+1, 38*pageSize+pageSize/2-(pageSize+1)); err != nil {
		t.Fatal(err)
	}
	if n := testutil.PresentPages(t, data); n != all-36 {
		t.Fatalf("%d pages mapped after dropping 36 of %d", n, all)
	}
	for _, r := range [][2]int64{{0, 0}, {-pageSize, pageSize / 2}, {2 << 20, pageSize}, {1<<20 - 10, 1 << 30}} {
		if err := f.DropPages(r[0], r[1]); err != nil {
			t.Fatalf("DropPages(%d, %d): %v", r[0], r[1], err)
		}
	}
	if !bytes.Equal(data[:len(want)], want) {
		t.Fatal("contents changed by DropPages")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.DropPages(0, pageSize); err == nil {
		t.Fatal("DropPages of a closed File succeeded")
	}
}
