package unsafeutil

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPrefetchWriteNeverFaults gives PrefetchWrite every range a caller
// could: empty, shorter than a line, unaligned, crossing pages, and
// pages it may not touch (PROT_NONE, and a file mapping past the end of
// its file, where a load or store would raise SIGBUS). A hint must
// return from all of them and change no byte.
func TestPrefetchWriteNeverFaults(t *testing.T) {
	page := os.Getpagesize()
	none, err := unix.Mmap(-1, 0, 4*page, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(none)

	f, err := os.CreateTemp(t.TempDir(), "short")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(page)); err != nil {
		t.Fatal(err)
	}
	// Four pages mapped over a file of one: the last three are past its
	// end.
	m, err := unix.Mmap(int(f.Fd()), 0, 4*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)

	heap := make([]byte, 3*page+17)
	for i := range heap {
		heap[i] = byte(i)
	}
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"nil", nil},
		{"empty", heap[:0]},
		{"one byte", heap[5:6]},
		{"unaligned across pages", heap[page-3 : 2*page+100]},
		{"whole", heap},
		{"PROT_NONE", none},
		{"PROT_NONE unaligned", none[page+1 : 3*page-1]},
		{"past the file's end", m[page:]},
		{"file and past its end", m},
	} {
		PrefetchWrite(c.b)
		t.Logf("%s: returned", c.name)
	}
	for i := range heap {
		if heap[i] != byte(i) {
			t.Fatalf("byte %d changed to %d", i, heap[i])
		}
	}
	if n := testing.AllocsPerRun(100, func() { PrefetchWrite(heap) }); n != 0 {
		t.Fatalf("PrefetchWrite allocates %v times", n)
	}
}
