package segment

import (
	"math"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
)

// TestReadAcrossRemap: a reader takes the active .log's mapping, and
// before it reads the published size the owner outgrows that mapping
// (Remap) and publishes appends past its end. The reader must still get
// whole, published batches from the mapping it holds. Before the fix the
// size was loaded after the mapping was taken, so it could exceed the old
// mapping and the read failed with "mapping went away" (a fetch beside a
// fast producer, at every remap).
func TestReadAcrossRemap(t *testing.T) {
	cfg := Config{SegmentBytes: 64 << 20, MaxIndexBytes: 1 << 20, IndexIntervalBytes: 4096}
	s, err := Create(t.TempDir(), 0, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	written := segFill(t, s, 1)
	ran := false
	afterMapping = func() {
		if ran {
			return
		}
		ran = true
		old := s.log
		for s.log == old || s.Size() <= old.Size() {
			written = append(written, segFill(t, s, 20)...)
		}
	}
	defer func() { afterMapping = nil }()
	r, err := s.Read(0, math.MaxInt64, math.MaxInt64)
	if err != nil {
		t.Fatalf("read while the owner remapped: %v", err)
	}
	defer r.Release()
	if !ran {
		t.Fatal("the hook did not run")
	}
	n := 0
	it := batch.NewIterator(r.Bytes, 0)
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		if _, err := batch.Check(v); err != nil {
			t.Fatalf("batch %d: %v", n, err)
		}
		n++
	}
	if n == 0 || n > len(written) {
		t.Fatalf("%d batches read, %d written", n, len(written))
	}
	segCheckReads(t, s, written)
}
