package snapshot

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/partlog/partlog/internal/filenames"
)

// offsetsOf returns the offsets of files.
func offsetsOf(files []File) []int64 {
	out := make([]int64, 0, len(files))
	for _, f := range files {
		out = append(out, f.Offset)
	}
	return out
}

// dirNames returns the sorted names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestWriteReadVector(t *testing.T) {
	raw, want, _ := loadVector(t)
	dir := t.TempDir()
	if err := Write(dir, 18, want); err != nil {
		t.Fatal(err)
	}
	// Atomic write leaves exactly the final file, no temporary.
	if names := dirNames(t, dir); !slices.Equal(names, []string{vectorName}) {
		t.Fatalf("directory holds %q, want only %q", names, vectorName)
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, vectorName))
	if err != nil {
		t.Fatal(err)
	}
	if string(onDisk) != string(raw) {
		t.Fatalf("written file differs from the vector")
	}
	got, err := Read(filepath.Join(dir, vectorName))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Read = %+v, want %+v", got, want)
	}
}

func TestWriteReplacesAndRejects(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, 5, []Entry{{ProducerID: 1}, {ProducerID: 2}}); err != nil {
		t.Fatal(err)
	}
	// A stale temporary file from a crash is overwritten, not appended to.
	stale := filepath.Join(dir, filenames.Make(5, filenames.Snapshot)+filenames.Temp)
	if err := os.WriteFile(stale, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, 5, []Entry{{ProducerID: 3}}); err != nil {
		t.Fatal(err)
	}
	got, err := Read(filepath.Join(dir, filenames.Make(5, filenames.Snapshot)))
	if err != nil || len(got) != 1 || got[0].ProducerID != 3 {
		t.Fatalf("after replace: %+v, %v", got, err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary file left behind: %v", err)
	}
	if err := Write(dir, -1, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative offset: %v", err)
	}
	if err := Write(filepath.Join(dir, "missing"), 1, nil); err == nil {
		t.Fatalf("write into a missing directory succeeded")
	}
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, filenames.Make(7, filenames.Snapshot))
	// Missing file: an I/O error, not corruption.
	_, err := Read(p)
	if err == nil || IsCorrupt(err) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	// A torn file (what Kafka's in-place write can leave): corruption, with the path.
	raw, _, _ := loadVector(t)
	if err := os.WriteFile(p, raw[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Read(p)
	var ce *CorruptionError
	if !errors.As(err, &ce) || !IsCorrupt(err) || ce.Path != p {
		t.Fatalf("torn file: %v", err)
	}
	// Empty file: corruption too (producer-state.md §5.4 item 5).
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(p); !IsCorrupt(err) {
		t.Fatalf("empty file: %v", err)
	}
}

// populate creates snapshots at offsets plus foreign files, and returns dir.
func populate(t *testing.T, offsets ...int64) string {
	t.Helper()
	dir := t.TempDir()
	for _, o := range offsets {
		if err := Write(dir, o, []Entry{{ProducerID: o}}); err != nil {
			t.Fatal(err)
		}
	}
	foreign := []string{
		"00000000000000000000.log",
		"00000000000000000000.index",
		"00000000000000000007.snapshot.deleted",
		"00000000000000000009.snapshot.tmp",
		"00000000000000000011.snapshot.swap",
		"12.snapshot",
		"leader-epoch-checkpoint",
		"partition.metadata",
		"notes.snapshot",
	}
	for _, name := range foreign {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A directory with a snapshot-like name is not a snapshot.
	if err := os.Mkdir(filepath.Join(dir, filenames.Make(99, filenames.Snapshot)), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestListIgnoresForeignNames(t *testing.T) {
	dir := populate(t, 30, 0, 18, 5)
	files, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := offsetsOf(files); !slices.Equal(got, []int64{0, 5, 18, 30}) {
		t.Fatalf("List offsets = %v", got)
	}
	for _, f := range files {
		if f.Path != filepath.Join(dir, filenames.Make(f.Offset, filenames.Snapshot)) {
			t.Errorf("path %q for offset %d", f.Path, f.Offset)
		}
	}
	empty := t.TempDir()
	files, err = List(empty)
	if err != nil || len(files) != 0 {
		t.Fatalf("empty dir: %v, %v", files, err)
	}
	if _, err := List(filepath.Join(empty, "missing")); err == nil {
		t.Fatalf("List of a missing directory succeeded")
	}
}

func TestLatestAndNewestAtOrBelow(t *testing.T) {
	dir := populate(t, 0, 5, 18, 30)
	f, ok, err := Latest(dir)
	if err != nil || !ok || f.Offset != 30 {
		t.Fatalf("Latest = %+v, %v, %v", f, ok, err)
	}
	for _, tc := range []struct {
		at   int64
		want int64
		ok   bool
	}{
		{-1, 0, false}, {0, 0, true}, {4, 0, true}, {5, 5, true}, {17, 5, true},
		{18, 18, true}, {29, 18, true}, {30, 30, true}, {1 << 62, 30, true},
	} {
		f, ok, err := NewestAtOrBelow(dir, tc.at)
		if err != nil || ok != tc.ok || (ok && f.Offset != tc.want) {
			t.Errorf("NewestAtOrBelow(%d) = %+v, %v, %v; want %d, %v", tc.at, f, ok, err, tc.want, tc.ok)
		}
	}
	_, ok, err = Latest(t.TempDir())
	if ok || err != nil {
		t.Fatalf("Latest of an empty dir: %v, %v", ok, err)
	}
}

func TestDelete(t *testing.T) {
	tests := []struct {
		name    string
		del     func(dir string) ([]File, error)
		deleted []int64
		left    []int64
	}{
		{"above 18", func(d string) ([]File, error) { return DeleteAbove(d, 18) }, []int64{30}, []int64{0, 5, 18}},
		{"above 17", func(d string) ([]File, error) { return DeleteAbove(d, 17) }, []int64{18, 30}, []int64{0, 5}},
		{"above 30", func(d string) ([]File, error) { return DeleteAbove(d, 30) }, nil, []int64{0, 5, 18, 30}},
		{"above -1", func(d string) ([]File, error) { return DeleteAbove(d, -1) }, []int64{0, 5, 18, 30}, nil},
		{"below 5", func(d string) ([]File, error) { return DeleteBelow(d, 5) }, []int64{0}, []int64{5, 18, 30}},
		{"below 6", func(d string) ([]File, error) { return DeleteBelow(d, 6) }, []int64{0, 5}, []int64{18, 30}},
		{"below 0", func(d string) ([]File, error) { return DeleteBelow(d, 0) }, nil, []int64{0, 5, 18, 30}},
		{"at or below 5", func(d string) ([]File, error) { return DeleteAtOrBelow(d, 5) }, []int64{0, 5}, []int64{18, 30}},
		{"at or below 4", func(d string) ([]File, error) { return DeleteAtOrBelow(d, 4) }, []int64{0}, []int64{5, 18, 30}},
		{"at or below max", func(d string) ([]File, error) { return DeleteAtOrBelow(d, 1<<63-1) }, []int64{0, 5, 18, 30}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := populate(t, 0, 5, 18, 30)
			before := len(dirNames(t, dir))
			deleted, err := tc.del(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := offsetsOf(deleted); !slices.Equal(got, tc.deleted) && !(len(got) == 0 && len(tc.deleted) == 0) {
				t.Errorf("deleted %v, want %v", got, tc.deleted)
			}
			files, err := List(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := offsetsOf(files); !slices.Equal(got, tc.left) && !(len(got) == 0 && len(tc.left) == 0) {
				t.Errorf("left %v, want %v", got, tc.left)
			}
			// Foreign files are never touched.
			if after := len(dirNames(t, dir)); after != before-len(tc.deleted) {
				t.Errorf("directory went from %d to %d names, deleted %d", before, after, len(tc.deleted))
			}
		})
	}
}

func TestRemoveTempFiles(t *testing.T) {
	dir := populate(t, 5)
	removed, err := RemoveTempFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "00000000000000000009.snapshot.tmp")}
	if !slices.Equal(removed, want) {
		t.Fatalf("removed %q, want %q", removed, want)
	}
	names := dirNames(t, dir)
	if slices.Contains(names, "00000000000000000009.snapshot.tmp") || !slices.Contains(names, filenames.Make(5, filenames.Snapshot)) {
		t.Fatalf("directory after cleanup: %q", names)
	}
	removed, err = RemoveTempFiles(dir)
	if err != nil || len(removed) != 0 {
		t.Fatalf("second cleanup: %q, %v", removed, err)
	}
}

// TestWriteReadManyChunks crosses the streaming chunk size several times and
// checks that Write produces exactly Encode's bytes and Read gives them back,
// and that damage in a late chunk is still caught.
func TestWriteReadManyChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{chunkEntries - 1, chunkEntries, chunkEntries + 1, 3*chunkEntries + 17} {
		entries := randomEntries(r, n)
		dir := t.TempDir()
		if err := Write(dir, 42, entries); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filenames.Make(42, filenames.Snapshot))
		onDisk, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(onDisk, Encode(nil, entries)) {
			t.Fatalf("n=%d: Write bytes differ from Encode", n)
		}
		got, err := Read(p)
		if err != nil || !slices.Equal(got, entries) {
			t.Fatalf("n=%d: Read mismatch (%v)", n, err)
		}
		onDisk[len(onDisk)-3] ^= 0x80
		if err := os.WriteFile(p, onDisk, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(p); !IsCorrupt(err) {
			t.Fatalf("n=%d: flipped bit in the last chunk not detected: %v", n, err)
		}
	}
}
