package producerstate

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/partlog/partlog/batch"
)

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

// TestAppendControlType: the type validation read of a control batch is
// what Append.ControlType reports (recovery reads the replay's abort
// markers from it rather than parsing the records again); an empty control
// batch reports none.
func TestAppendControlType(t *testing.T) {
	m := New(Config{})
	l := newLog(t, m)
	l.must(Client, txnData(5, 0, 0, 1))
	for _, c := range []struct {
		spec bspec
		want batch.ControlType
	}{
		{abort(5, 0, 0), batch.ControlAbort},
		{barrier(), batch.ControlMirrorPidReset},
	} {
		a := l.must(Coordinator, c.spec)
		if got, ok := a.ControlType(); !ok || got != c.want {
			t.Errorf("ControlType() = %v, %v; want %v", got, ok, c.want)
		}
	}
	empty := abort(5, 0, 0)
	empty.control = 5
	a := new(Append)
	m.Begin(a, Coordinator, 0)
	v := build(t, empty)
	if err := m.Validate(a, v, 100); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.ControlType(); ok {
		t.Error("an empty control batch reports a type")
	}
}
