package index

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/partlog/partlog/internal/testhook"
	"golang.org/x/sys/unix"
)

// TestActiveIndexRemapThenFullDisk: when a step outgrows the mapping, the
// index is mapped again and the step's fallocate then fails (a full disk).
// The append fails cleanly, and the index must go on reading its entries
// through the new mapping: before the fix its cached view still pointed
// into the old mapping, unmapped by the remap, and the next lookup or
// append faulted (SIGSEGV).
func TestActiveIndexRemapThenFullDisk(t *testing.T) {
	x, err := CreateOffsetIndex(filepath.Join(t.TempDir(), "00000000000000000000.index"), 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	n := int64(0)
	for ; n < indexMapMin/OffsetEntrySize; n++ {
		if err := x.Append(n*2, int32(n*100)); err != nil {
			t.Fatalf("entry %d: %v", n, err)
		}
	}
	if x.m.file.Cap() != indexMapMin || x.m.file.Size() != indexMapMin {
		t.Fatalf("mapping %d, file %d: the next step does not remap", x.m.file.Cap(), x.m.file.Size())
	}
	hook := func(fd int, off, n int64) error { return unix.ENOSPC }
	if !testhook.Fallocate.CompareAndSwap(nil, &hook) {
		t.Fatal("testhook.Fallocate is already set")
	}
	err = x.Append(n*2, int32(n*100))
	testhook.Fallocate.Store(nil)
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("append on a full disk: %v", err)
	}
	for i := int64(0); i < n; i += 1001 {
		if o, p := x.Lookup(i*2 + 1); o != i*2 || p != int32(i*100) {
			t.Fatalf("lookup %d: %d at %d", i*2+1, o, p)
		}
	}
	// Room again: the index goes on from where it was.
	for m := n + 1000; n < m; n++ {
		if err := x.Append(n*2, int32(n*100)); err != nil {
			t.Fatalf("entry %d after the full disk: %v", n, err)
		}
	}
	if o, p := x.Lookup(n*2 - 1); o != (n-1)*2 || p != int32((n-1)*100) {
		t.Fatalf("last lookup: %d at %d", o, p)
	}
}
