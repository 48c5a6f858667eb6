package mmapfile

import (
	"bytes"
	"testing"

	"github.com/partlog/partlog/internal/testutil"
)

// TestDropPagesKeepsContents: DropPages unmaps whole pages inside its
// range (the start rounded up, the end down), and the bytes stored into
// them are read back unchanged afterwards; ranges outside the file or
// empty do nothing.
func TestDropPagesKeepsContents(t *testing.T) {
	f, err := Create(testutil.TempPath(t, "d"), 1<<20)
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
