package sim

import (
	"errors"
	"testing"

	"github.com/partlog/partlog/batch"
)

// T50, T51.
func TestNegation(t *testing.T) {
	for _, c := range [][2]int64{{5, -7}, {0, -2}, {-1, -1}, {-7, 5}} {
		if got := Negate(c[0]); got != c[1] {
			t.Errorf("Negate(%d) = %d, want %d", c[0], got, c[1])
		}
	}
	if Negate(Negate(5)) != 5 {
		t.Error("D1 applied twice must restore the id")
	}
	for _, c := range [][2]int64{{5, -7}, {-7, -7}, {-1, -1}} {
		if got := NegateIdempotent(c[0]); got != c[1] {
			t.Errorf("NegateIdempotent(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}

// T52 and the worked values of mirror.md §1.3.
func TestBitField(t *testing.T) {
	if r := Region(0x1111111122222222, 0x3333333344444444); r != 0x66666666 {
		t.Errorf("region %#x", r)
	}
	for _, c := range []struct {
		region uint32
		pid    int64
		want   uint64
	}{{42, 5, 0x8000001500000005}, {99, 5, 0x8000003180000005}, {17, 5, 0x8000000880000005}, {0, 0, 0x8000000000000000}} {
		if got := BitFieldPID(c.region, c.pid); uint64(got) != c.want {
			t.Errorf("map(%d, %d) = %#x, want %#x", c.region, c.pid, uint64(got), c.want)
		}
	}
	m, err := LoadPIDMap(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Map("x", 0, 0, -7, 0); got != -7 {
		t.Errorf("negative ids must pass through, got %d", got)
	}
	if _, err := m.Map("x", 0xFFFFFFFF, 0, 0x7FFFFFFF, 0); !errors.Is(err, ErrMapsToNoProducer) {
		t.Errorf("mapping to -1 must be refused, got %v", err)
	}
	if _, err := m.Map("x", 0, 0, 1<<31, 0); !errors.Is(err, ErrPIDTooLarge) {
		t.Errorf("pid >= 2^31 must be refused, got %v", err)
	}
}

// Two source clusters in one region with the same pid: the second gets a
// salt, the salt is persisted, and a reloaded map gives the same id.
func TestBitFieldCollision(t *testing.T) {
	dir := t.TempDir()
	m, _ := LoadPIDMap(dir)
	a, _ := m.Map("A", 42, 0, 5, 1)
	b, err := m.Map("B", 0, 42, 5, 2)
	if err != nil {
		t.Fatal(err)
	}
	if a == b || uint64(b) != uint64(BitFieldPID(43, 5)) {
		t.Fatalf("collision not resolved: %#x %#x", uint64(a), uint64(b))
	}
	m2, err := LoadPIDMap(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cs := m2.Collisions(); len(cs) != 1 || cs[0].SourceClusterID != "B" || cs[0].Salt != 1 || cs[0].CollidingClusterID != "A" {
		t.Fatalf("persisted %+v", cs)
	}
	if b2, _ := m2.Map("B", 0, 42, 5, 3); b2 != b {
		t.Errorf("reloaded map gives %#x, want %#x", uint64(b2), uint64(b))
	}
}

// The rewrite changes the id at byte 43 and leaves a valid CRC (T52:
// stored bytes differ from the source, the CRC is recomputed).
func TestRewritePIDs(t *testing.T) {
	spec := batch.NewBatchSpec(0)
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = 5, 0, 0
	var b batch.Builder
	records, err := b.AppendBatch(nil, &spec, []batch.RecordSpec{{Timestamp: 1, Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	orig := batch.View(records).CRC()
	if err := RewritePIDs(records, func(p int64) (int64, error) { return Negate(p), nil }); err != nil {
		t.Fatal(err)
	}
	v := batch.View(records)
	if v.ProducerID() != -7 || v.CRC() == orig || v.CRC() != v.ComputeCRC() {
		t.Fatalf("pid %d crc %08x (was %08x, computed %08x)", v.ProducerID(), v.CRC(), orig, v.ComputeCRC())
	}
}
