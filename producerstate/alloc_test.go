package producerstate

import (
	"testing"

	"github.com/partlog/partlog/internal/testutil"
)

// TestZeroAllocSteadyState guards the 0-allocation claim for
// Begin+Validate+Commit of a non-transactional idempotent batch from an
// existing producer, once the Append has warmed up.
func TestZeroAllocSteadyState(t *testing.T) {
	if testutil.Race {
		t.Skip("allocation counts are not meaningful under -race")
	}
	m := New(Config{})
	v := build(t, data(0, 0, 0, 1))
	var a Append
	const producers = 100
	seqs := make([]int32, producers)
	off := int64(0)
	step := func() {
		pid := off % producers
		setPIDSeq(v, pid, seqs[pid])
		m.Begin(&a, Client, 0)
		if err := m.Validate(&a, v, off); err != nil {
			t.Fatal(err)
		}
		m.Commit(&a)
		seqs[pid]++
		off++
	}
	for i := 0; i < 2*producers; i++ {
		step()
	}
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Fatalf("%v allocations per append, want 0", n)
	}
	// A marker and a Replication multi-batch append are allocation-free too.
	mk := build(t, commit(1, 0, 0))
	step2 := func() {
		m.Begin(&a, Replication, 0)
		setPIDSeq(v, 2, seqs[2])
		if err := m.Validate(&a, v, off); err != nil {
			t.Fatal(err)
		}
		if err := m.Validate(&a, mk, off+1); err != nil {
			t.Fatal(err)
		}
		m.Commit(&a)
		seqs[2]++
		off += 2
	}
	step2()
	if n := testing.AllocsPerRun(1000, step2); n != 0 {
		t.Fatalf("%v allocations per multi-batch append, want 0", n)
	}
	// So is an append of batches without a producer id (nothing staged)
	// and one with two batches of one producer (the working copy).
	np := build(t, data(-1, -1, -1, 2))
	step3 := func() {
		m.Begin(&a, Client, 0)
		if err := m.Validate(&a, np, off); err != nil {
			t.Fatal(err)
		}
		m.Commit(&a)
		off += 2
	}
	w := build(t, data(3, 0, 0, 1))
	step4 := func() {
		m.Begin(&a, Client, 0)
		setPIDSeq(w, 3, seqs[3])
		if err := m.Validate(&a, w, off); err != nil {
			t.Fatal(err)
		}
		setPIDSeq(w, 3, seqs[3]+1)
		if err := m.Validate(&a, w, off+1); err != nil {
			t.Fatal(err)
		}
		m.Commit(&a)
		seqs[3] += 2
		off += 2
	}
	step3()
	step4()
	if n := testing.AllocsPerRun(1000, step3); n != 0 {
		t.Fatalf("%v allocations per append without producers, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, step4); n != 0 {
		t.Fatalf("%v allocations per append of two batches of one producer, want 0", n)
	}
}
