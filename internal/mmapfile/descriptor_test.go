package mmapfile

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/partlog/partlog/internal/testutil"
)

// TestReleaseDescriptor: a File without its descriptor keeps its mapping
// (stores and reads work), and Grow, Truncate and Sync open the file for
// the call; WriteAt, which needs the descriptor, refuses.
func TestReleaseDescriptor(t *testing.T) {
	path := testutil.TempPath(t, "d")
	f, err := Open(path, Options{Create: true, Reserve: 4096, Capacity: 1 << 20})
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

// TestParkDescriptor: a parked File holds no descriptor until a call needs
// one, then keeps it until Close; a Sync beside the owner's first WriteAt
// opens at most one that stays (run with -race).
func TestParkDescriptor(t *testing.T) {
	path := testutil.TempPath(t, "p")
	f, err := Open(path, Options{Create: true, Ahead: true, Reserve: 64 << 10, Capacity: 1 << 20})
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

// TestRename checks that a File built under a temporary name goes by the
// name it is renamed to: a parked descriptor is opened again by the new
// name, a remapped File keeps it, and errors name it.
func TestRename(t *testing.T) {
	tmp := testutil.TempPath(t, "r.tmp")
	final := testutil.TempPath(t, "r")
	f, err := Open(tmp, Options{Create: true, Ahead: true, Reserve: 64 << 10, Capacity: 1 << 20})
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
