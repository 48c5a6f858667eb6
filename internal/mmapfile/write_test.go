package mmapfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/partlog/partlog/internal/testutil"
	"golang.org/x/sys/unix"
)

func TestWholePages(t *testing.T) {
	ps := pageSize
	for _, tc := range []struct {
		off, end, limit   int64
		wantStart, wantTo int64
	}{
		{0, 4 * ps, 8 * ps, 0, 4 * ps},
		{1, 4 * ps, 8 * ps, ps, 4 * ps},          // a partial first page is left alone
		{0, 4*ps - 1, 8 * ps, 0, 3 * ps},         // and a partial last page
		{ps + 1, 2*ps - 1, 8 * ps, 2 * ps, ps},   // inside one page: none
		{-5, 2 * ps, 8 * ps, 0, 2 * ps},          // clamped to 0
		{0, 8 * ps, 3*ps + 7, 0, 3 * ps},         // and to the limit
		{2 * ps, 2 * ps, 8 * ps, 2 * ps, 2 * ps}, // empty
	} {
		start, stop := wholePages(tc.off, tc.end, tc.limit)
		if start != tc.wantStart || stop != tc.wantTo {
			t.Errorf("wholePages(%d, %d, %d) = %d, %d, want %d, %d", tc.off, tc.end, tc.limit, start, stop, tc.wantStart, tc.wantTo)
		}
	}
}

// threadFaults returns the calling thread's minor page faults.
func threadFaults(t *testing.T) int64 {
	t.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}

// TestStartWriteback: StartWriteback starts the writeout of the dirty
// pages it covers (the kernel write-protects a page it writes out, so the
// next store into it faults, which counts the pages started) and of no
// other, leaves the bytes as they are, and is a no-op for a closed File.
func TestStartWriteback(t *testing.T) {
	const pages = 64
	f, err := Open(testutil.TempPath(t, "w"), Options{Create: true, Reserve: 2 * pages * pageSize})
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	data := f.Bytes()
	fill := func(from int64, b byte) {
		for p := range int64(pages) {
			data[from+p*pageSize] = b
		}
	}
	// storesFault returns the faults of one store into each of the pages
	// from from.
	storesFault := func(from int64) int64 {
		before := threadFaults(t)
		fill(from, 'b')
		return threadFaults(t) - before
	}
	started, left := int64(0), int64(pages*pageSize)
	fill(started, 'a') // dirty, mapped writable
	fill(left, 'a')
	if err := f.StartWriteback(started+1, started+pages*pageSize); err != nil {
		t.Fatal(err)
	}
	// The first page was partial: left alone, like the other range.
	if n := storesFault(started); n < pages/2 {
		t.Fatalf("%d faults storing into %d pages whose writeout started, want most of them", n, pages)
	}
	if n := storesFault(left); n > pages/4 {
		t.Fatalf("%d faults storing into %d dirty pages nothing wrote out", n, pages)
	}
	want := bytes.Repeat([]byte{'b'}, pages)
	got := make([]byte, pages)
	for p := range int64(pages) {
		got[p] = data[p*pageSize]
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("bytes changed: %q", got)
	}
	if err := f.SyncFile(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.StartWriteback(0, pages*pageSize); err != nil {
		t.Fatalf("closed File: %v", err)
	}
	if _, err := os.Stat(f.Path()); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkSync compares the two ways of making stores into the mapping
// durable: msync(MS_SYNC) of the page-aligned range just written, and
// fdatasync of the descriptor. Each iteration writes n fresh bytes after the
// previous ones, then flushes them. The result decides File.Sync.
func BenchmarkSync(b *testing.B) {
	const size = 64 << 20
	for _, n := range []int{4 << 10, 64 << 10} {
		for _, how := range []string{"msync", "fdatasync"} {
			b.Run(fmt.Sprintf("%s/%dKiB", how, n>>10), func(b *testing.B) {
				f, err := Open(filepath.Join(b.TempDir(), "s"), Options{Create: true, Reserve: size})
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				if err := f.Prefault(0, size); err != nil {
					b.Fatal(err)
				}
				if err := f.SyncFile(); err != nil {
					b.Fatal(err)
				}
				data := f.Bytes()
				b.SetBytes(int64(n))
				b.ResetTimer()
				pos := 0
				for i := 0; i < b.N; i++ {
					if pos+n > size {
						pos = 0
					}
					for j := pos; j < pos+n; j += 512 {
						data[j] = byte(i)
					}
					if how == "msync" {
						err = f.syncMsync(int64(pos), int64(n))
					} else {
						err = f.syncFdatasync()
					}
					if err != nil {
						b.Fatal(err)
					}
					pos += n
				}
			})
		}
	}
}
