package producerstate_test

import (
	"errors"
	"fmt"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/producerstate"
)

// idempotent returns a one-record batch of producer 7, epoch 0, with base
// sequence seq, as a client sends it.
func idempotent(seq int32) []byte {
	var bld batch.Builder
	spec := batch.NewBatchSpec(0)
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = 7, 0, seq
	b, err := bld.AppendBatch(nil, &spec, []batch.RecordSpec{{Timestamp: 1_700_000_000_000, Value: []byte("v")}})
	if err != nil {
		panic(err)
	}
	return b
}

// An append is staged (Begin, then Validate for each batch), written to
// the log by the caller, then committed; a refused batch is not written.
// The usual produce request, one batch of a producer already stored,
// can skip the staging: FindKnown decides it, CommitKnown commits it.
func Example() {
	m := producerstate.New(producerstate.Config{})
	var a producerstate.Append

	// The producer's first batch, at offset 0, by the general path.
	m.Begin(&a, producerstate.Client, 0)
	if err := m.Validate(&a, batch.View(idempotent(0)), 0); err != nil {
		fmt.Println(err)
		return
	}
	// ... the caller writes the batch to the log here ...
	m.Commit(&a)

	// Its next batch, at offset 1: the one-batch calls.
	var h batch.BatchHeader
	v, err := batch.CheckAt(idempotent(1), 0, &h)
	if err != nil {
		fmt.Println(err)
		return
	}
	var k producerstate.Known
	if m.FindKnown(&h, 1, &k) {
		// ... the caller writes the batch to the log here ...
		m.CommitKnown(&k)
	}
	e, _ := m.Producer(7)
	fmt.Println("last sequence", e.LastSequence, "at offset", e.LastOffset, "map end offset", m.MapEndOffset())

	// A retry of that batch is a duplicate: FindKnown leaves it to the
	// general path, which names the offsets it was written at.
	fmt.Println("known:", m.FindKnown(&h, 2, &k))
	m.Begin(&a, producerstate.Client, 0)
	var dup *producerstate.DuplicateSequenceError
	if err := m.Validate(&a, v, 2); errors.As(err, &dup) {
		fmt.Println("duplicate of offsets", dup.FirstOffset, "to", dup.LastOffset)
	}
	// Output:
	// last sequence 1 at offset 1 map end offset 2
	// known: false
	// duplicate of offsets 1 to 1
}
