package producerstate

// Tests that kill the mutants a mutation pass found surviving in this
// package (issue 10 item 11). Several reuse one Append across appends,
// as the log does (the other tests take a fresh one each time).

import (
	"slices"
	"testing"

	"github.com/partlog/partlog/snapshot"
)

func TestOriginString(t *testing.T) {
	for o, want := range originNames {
		if got := Origin(o).String(); got != want {
			t.Errorf("Origin(%d) = %q, want %q", o, got, want)
		}
	}
	for o, want := range map[Origin]string{Origin(len(originNames)): "Origin(5)", -1: "Origin(-1)"} {
		if got := o.String(); got != want {
			t.Errorf("Origin(%d) = %q, want %q", int(o), got, want)
		}
	}
}

// stageAll begins a on m and validates specs from offset next on; it
// fails the test on the first error.
func stageAll(t *testing.T, m *Manager, a *Append, next int64, specs ...bspec) int64 {
	t.Helper()
	m.Begin(a, Replication, 0)
	for _, s := range specs {
		v := build(t, s)
		if err := m.Validate(a, v, next); err != nil {
			t.Fatalf("batch %+v at %d: %v", s, next, err)
		}
		next += span(v)
	}
	return next
}

// TestAppendReusedAfterAbandon: an Append that was staged and never
// committed (a later batch of the request failed) leaves nothing behind
// when it is begun again: neither its accumulators nor, with more
// producers than the linear search covers, its accumulator index.
func TestAppendReusedAfterAbandon(t *testing.T) {
	for _, producers := range []int{1, linearAccumulators + 4} {
		m := New(Config{})
		var a Append
		var specs []bspec
		for p := 0; p < producers; p++ {
			specs = append(specs, data(int64(100+p), 0, 0, 5))
		}
		stageAll(t, m, &a, 0, specs...) // abandoned: no Commit
		if m.Len() != 0 {
			t.Fatalf("an uncommitted append changed the state: %d producers", m.Len())
		}
		// The same batches again: sequence 0 is the next for new producers.
		next := stageAll(t, m, &a, 0, specs...)
		m.Commit(&a)
		if m.Len() != producers || m.MapEndOffset() != next {
			t.Fatalf("%d producers, MEO %d after the retry; want %d and %d", m.Len(), m.MapEndOffset(), producers, next)
		}
		for p := 0; p < producers; p++ {
			if e := mustEntry(t, m, int64(100+p)); e.LastSequence != 4 {
				t.Fatalf("producer %d: last sequence %d, want 4", 100+p, e.LastSequence)
			}
		}
	}
}

// TestAppendReusedBarriers: the barriers an Append reports are those of
// its own batches, and the manager records each barrier once.
func TestAppendReusedBarriers(t *testing.T) {
	m := New(Config{})
	var a Append
	next := stageAll(t, m, &a, 0, data(1, 0, 0, 1), barrier())
	m.Commit(&a)
	next = stageAll(t, m, &a, next, data(2, 0, 0, 1))
	m.Commit(&a)
	if got := a.Barriers(); len(got) != 0 {
		t.Errorf("second append reports barriers %v, want none", got)
	}
	if got := m.Barriers(); !slices.Equal(got, []int64{1}) {
		t.Errorf("manager barriers %v, want [1]", got)
	}
	_ = next
}

// TestBarrierInAppendWithManyProducers: after a barrier inside one append
// with more producers than the linear search covers, a producer seen
// before the barrier starts over (its earlier state is gone).
func TestBarrierInAppendWithManyProducers(t *testing.T) {
	m := New(Config{})
	var a Append
	var specs []bspec
	for p := 0; p < linearAccumulators+4; p++ {
		specs = append(specs, data(int64(100+p), 0, 0, 3))
	}
	specs = append(specs, barrier(), data(105, 0, 0, 1), data(200, 0, 0, 1))
	stageAll(t, m, &a, 0, specs...)
	m.Commit(&a)
	if m.Len() != 2 {
		t.Fatalf("%d producers after the barrier, want 2 (105 and 200)", m.Len())
	}
	if e := mustEntry(t, m, 105); e.LastSequence != 0 {
		t.Fatalf("producer 105 after the barrier: last sequence %d, want 0", e.LastSequence)
	}
}

// TestResetDropsBarriers: Reset (a full truncation) forgets the barriers.
func TestResetDropsBarriers(t *testing.T) {
	m := New(Config{})
	l := newLog(t, m)
	l.must(Replication, data(1, 0, 0, 1), barrier())
	if len(m.Barriers()) != 1 {
		t.Fatalf("barriers %v", m.Barriers())
	}
	m.Reset(10)
	if got := m.Barriers(); len(got) != 0 {
		t.Fatalf("barriers %v after Reset, want none", got)
	}
}

// TestLoadSnapshotReplacesState: loading a snapshot into a manager that
// holds state replaces that state; and the open transactions it loads are
// ordered by first offset whatever the order of the entries.
func TestLoadSnapshotReplacesState(t *testing.T) {
	m := New(Config{Shards: 1})
	l := newLog(t, m)
	l.must(Client, txnData(1, 0, 0, 2))
	entries := []snapshot.Entry{
		{ProducerID: 7, LastOffset: 60, Timestamp: 1000, CurrentTxnFirstOffset: 50, LastSequence: 0, ProducerEpoch: 0, CoordinatorEpoch: -1},
		{ProducerID: 8, LastOffset: 12, Timestamp: 1000, CurrentTxnFirstOffset: 10, LastSequence: 2, ProducerEpoch: 0, CoordinatorEpoch: -1},
	}
	m.LoadSnapshot(entries, 70, 1000)
	if _, ok := m.Producer(1); ok || m.Len() != 2 {
		t.Fatalf("after LoadSnapshot: producer 1 kept (%v), %d producers; want only 7 and 8", ok, m.Len())
	}
	got := m.OngoingTransactions()
	if len(got) != 2 || got[0].ProducerID != 8 || got[1].ProducerID != 7 {
		t.Fatalf("ongoing %+v, want 8 (at 10) before 7 (at 50)", got)
	}
	if fuo, ok := m.FirstUnstableOffset(); !ok || fuo != 10 {
		t.Fatalf("FUO %d %v, want 10", fuo, ok)
	}
}

// TestLogStartAtMarkerKeepsDecidedTxn: a decided transaction whose marker
// is at the new log start is still in the log and keeps pinning the first
// unstable offset (clamped to the log start) until the high watermark
// passes its marker; only markers below the log start are dropped.
func TestLogStartAtMarkerKeepsDecidedTxn(t *testing.T) {
	m := New(Config{})
	l := newLog(t, m)
	l.must(Client, txnData(7, 0, 0, 3))
	l.must(Coordinator, commit(7, 0, 0)) // marker at 3
	m.OnLogStartOffsetIncremented(3)
	if fuo, ok := m.FirstUnstableOffset(); !ok || fuo != 3 {
		t.Fatalf("FUO %d %v with the marker at the log start, want 3", fuo, ok)
	}
	m.OnLogStartOffsetIncremented(4)
	if fuo, ok := m.FirstUnstableOffset(); ok {
		t.Fatalf("FUO %d with the marker below the log start, want none", fuo)
	}
}
