package producerstate

// Tests that kill the mutants a mutation pass found surviving in this
// package (issue 10 item 11). Several reuse one Append across appends,
// as the log does (the other tests take a fresh one each time).

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/partlog/partlog/batch"
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

// stageAll begins a on m with origin and validates specs from offset
// next on; it fails the test on the first error.
func stageAll(t *testing.T, m *Manager, a *Append, origin Origin, next int64, specs ...bspec) int64 {
	t.Helper()
	m.Begin(a, origin, 0)
	for _, s := range specs {
		v := build(t, s)
		if err := m.Validate(a, v, next); err != nil {
			t.Fatalf("batch %+v at %d: %v", s, next, err)
		}
		next += span(v)
	}
	return next
}

// twoRounds returns, for producers first..first+n-1 in reverse order, a
// batch of seq0.. (one record) each, then a second one each: the second
// round finds its accumulators by producer id (through the map once more
// than linearAccumulators producers are staged).
func twoRounds(first int64, n int, seq0 int32) []bspec {
	var specs []bspec
	for round := int32(0); round < 2; round++ {
		for p := first + int64(n) - 1; p >= first; p-- {
			specs = append(specs, data(p, 0, seq0+round, 1))
		}
	}
	return specs
}

// TestAppendReusedAfterAbandon: an Append that was staged and never
// committed (a later batch of the request failed) leaves nothing behind
// when it is begun again: neither its accumulators nor, with more
// producers than the linear search covers, its accumulator index.
func TestAppendReusedAfterAbandon(t *testing.T) {
	for _, producers := range []int{1, linearAccumulators + 4} {
		m := New(Config{})
		var a Append
		var first, abandoned []bspec
		for p := 0; p < producers; p++ {
			first = append(first, data(int64(100+p), 0, 0, 2)) // sequences 0..1
			abandoned = append(abandoned, data(int64(100+p), 0, 2, 5))
		}
		next := stageAll(t, m, &a, Client, 0, first...)
		m.Commit(&a)
		stageAll(t, m, &a, Client, next, abandoned...) // no Commit
		// The retry continues from the committed sequence 1: nothing of
		// the abandoned stage may be seen (Client appends check
		// sequences against the stored state).
		end := stageAll(t, m, &a, Client, next, twoRounds(100, producers, 2)...)
		m.Commit(&a)
		if m.Len() != producers || m.MapEndOffset() != end {
			t.Fatalf("%d producers, MEO %d after the retry; want %d and %d", m.Len(), m.MapEndOffset(), producers, end)
		}
		for p := 0; p < producers; p++ {
			if e := mustEntry(t, m, int64(100+p)); e.LastSequence != 3 {
				t.Fatalf("producer %d: last sequence %d, want 3", 100+p, e.LastSequence)
			}
		}
	}
}

// TestAppendReusedBarriers: the barriers an Append reports are those of
// its own batches, and the manager records each barrier once.
func TestAppendReusedBarriers(t *testing.T) {
	m := New(Config{})
	var a Append
	next := stageAll(t, m, &a, Replication, 0, data(1, 0, 0, 1), barrier())
	m.Commit(&a)
	stageAll(t, m, &a, Replication, next, data(2, 0, 0, 1))
	m.Commit(&a)
	if got := a.Barriers(); len(got) != 0 {
		t.Errorf("second append reports barriers %v, want none", got)
	}
	if got := m.Barriers(); !slices.Equal(got, []int64{1}) {
		t.Errorf("manager barriers %v, want [1]", got)
	}
}

// TestBarrierInAppendWithManyProducers: after a barrier inside one append
// with more producers than the linear search covers, every producer
// starts over, and each batch after the barrier goes to its own
// producer's state (not to one found through an index of the state
// before the barrier).
func TestBarrierInAppendWithManyProducers(t *testing.T) {
	const n = linearAccumulators + 4
	m := New(Config{})
	var a Append
	var specs []bspec
	for p := int64(100); p < 100+n; p++ {
		specs = append(specs, data(p, 0, 0, 3))
	}
	specs = append(specs, barrier())
	specs = append(specs, twoRounds(100, n, 0)...)
	stageAll(t, m, &a, Replication, 0, specs...)
	m.Commit(&a)
	if m.Len() != n {
		t.Fatalf("%d producers after the barrier, want %d", m.Len(), n)
	}
	for p := int64(100); p < 100+n; p++ {
		if e := mustEntry(t, m, p); e.LastSequence != 1 || e.NumBatches != 2 {
			t.Fatalf("producer %d after the barrier: last sequence %d, %d batches; want 1 and 2", p, e.LastSequence, e.NumBatches)
		}
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

// TestControlScratchDoesNotAliasBatches: decoding the records of a
// compressed control batch must never write into the bytes of an
// earlier batch of the same request. Validate keeps a scratch buffer for
// decompression; the record section of an uncompressed batch is a
// sub-slice of the caller's bytes and must not become that scratch.
func TestControlScratchDoesNotAliasBatches(t *testing.T) {
	m := New(Config{})
	l := newLog(t, m)
	l.must(Client, txnData(7, 0, 0, 1), txnData(8, 0, 0, 1)) // 0, 1: both open
	buf := batch.AppendEndTxnMarkerBatch(nil, batch.ControlSpec{ProducerID: 7, Timestamp: 2000}, true, 0)
	first := len(buf)
	// A gzip-compressed ABORT marker for 8 (Kafka never writes one, a
	// hostile or buggy peer may): built as a compressed transactional
	// batch, then flagged as control with its CRC recomputed.
	spec := batch.BatchSpec{Transactional: true, ProducerID: 8, BaseSequence: batch.NoSequence,
		Compression: batch.CompressionGzip}
	key := batch.AppendControlKey(nil, batch.ControlAbort)
	val := batch.AppendEndTxnMarker(nil, 0)
	var b batch.Builder
	buf, err := b.AppendBatch(buf, &spec, []batch.RecordSpec{{Timestamp: 2000, Key: key, Value: val}})
	if err != nil {
		t.Fatal(err)
	}
	second := buf[first:]
	second[batch.OffAttributes+1] |= batch.AttrControl
	binary.BigEndian.PutUint32(second[batch.OffCRC:], batch.Checksum(second[batch.OffAttributes:]))
	if !batch.View(second).IsControl() || batch.View(second).Compression() != batch.CompressionGzip {
		t.Fatal("could not build a compressed control batch")
	}
	orig := bytes.Clone(buf)
	var a Append
	m.Begin(&a, Coordinator, 0)
	if err := m.Validate(&a, batch.View(buf[:first]), 2); err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(&a, batch.View(buf[first:]), 3); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, orig) {
		t.Fatal("validating the compressed control batch overwrote the caller's bytes")
	}
	m.Commit(&a)
	if got := a.CompletedTxns(); len(got) != 2 || !got[1].Aborted || got[1].ProducerID != 8 {
		t.Fatalf("completed %+v, want 7 committed and 8 aborted", got)
	}
}
