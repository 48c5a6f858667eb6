package producerstate

import (
	"math"

	"github.com/partlog/partlog/batch"
)

// MaxCachedBatches is the number of most recent data batches kept per
// producer for duplicate detection (producer-state.md §1.6; Kafka's
// NUM_BATCHES_TO_RETAIN). Kafka behaviour; do not change.
const MaxCachedBatches = 5

// BatchMetadata describes one cached data batch of a producer
// (producer-state.md §1.2). Two values are equal iff all fields are equal.
type BatchMetadata struct {
	// LastSequence is the sequence of the batch's last record.
	LastSequence int32
	// OffsetDelta is LastOffset minus the batch's first offset.
	OffsetDelta int32
	// LastOffset is the log offset of the batch's last record.
	LastOffset int64
	// Timestamp is the batch's max timestamp.
	Timestamp int64
}

// FirstSequence is LastSequence-OffsetDelta with int32 wrap-around.
func (b BatchMetadata) FirstSequence() int32 {
	return batch.DecrementSequence(b.LastSequence, b.OffsetDelta)
}

// FirstOffset is LastOffset-OffsetDelta.
func (b BatchMetadata) FirstOffset() int64 { return b.LastOffset - int64(b.OffsetDelta) }

// Entry is a copy of one producer's state (producer-state.md §1.1). The
// scalar fields LastSequence, LastOffset and OffsetDelta are derived from
// the newest cached batch (-1, -1, 0 when none is cached).
type Entry struct {
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence is the newest cached batch's last sequence, or -1.
	LastSequence int32
	// LastOffset is the newest cached batch's last offset, or -1.
	LastOffset int64
	// OffsetDelta is the newest cached batch's offset delta, or 0.
	OffsetDelta int32
	// LastTimestamp is the max timestamp of the last data batch or the
	// timestamp of the last marker record, whichever came last; -1 if none.
	LastTimestamp int64
	// CoordinatorEpoch is the epoch of the coordinator that wrote the last
	// COMMIT/ABORT marker for this producer, or -1.
	CoordinatorEpoch int32
	// CurrentTxnFirstOffset is the first offset of the producer's open
	// transaction, or -1 when none is open.
	CurrentTxnFirstOffset int64
	// Batches holds the cached batches, oldest first; only the first
	// NumBatches elements are meaningful.
	Batches [MaxCachedBatches]BatchMetadata
	// NumBatches is the number of cached batches (0..5).
	NumBatches int
}

// CachedBatches returns the cached batches, oldest first (a slice of
// e.Batches).
func (e *Entry) CachedBatches() []BatchMetadata { return e.Batches[:e.NumBatches] }

// FirstSequence is the oldest cached batch's first sequence, or -1.
func (e *Entry) FirstSequence() int32 {
	if e.NumBatches == 0 {
		return -1
	}
	return e.Batches[0].FirstSequence()
}

// entry is the stored form of one producer. It is also the accumulator
// type of an Append: validation applies batches to a copy with exactly
// the functions that Commit later applies to the stored entry, so the two
// cannot disagree.
//
// The fields the usual produce request reads (validateKnownData: epoch,
// open transaction, seqTop) and the ones its commit writes besides the
// batch slot (n, head, seqTop, lastTimestamp) are the first 32 bytes:
// entries are 160 bytes (size class 160, or a slab of them), so they
// start on a 32-byte boundary and those bytes are one cache line.
type entry struct {
	lastTimestamp  int64
	txnFirstOffset int64 // -1: no open transaction
	// seqTop is the newest cached batch's last sequence when it is above
	// the last sequence of every other cached batch, -1 when no batch is
	// cached, and noSeqTop otherwise (see pushBatch). A batch whose
	// sequences run from seqTop+1 upwards without wrapping follows the
	// newest batch and duplicates no cached batch.
	seqTop           int32
	coordinatorEpoch int32
	epoch            int16
	// The cached batches are a ring: n of them, the oldest at
	// batches[head], so adding one to a full cache overwrites the oldest
	// instead of shifting the other four.
	n, head    uint8
	producerID int64
	batches    [MaxCachedBatches]BatchMetadata
}

// noSeqTop is seqTop when the newest cached batch does not have the
// highest last sequence (after a wrap to 0, or batches of a trusted
// origin out of order).
const noSeqTop = math.MinInt32

// blankEntry is the state of a brand-new producer (§1.1 last column).
func blankEntry(pid int64) entry {
	return entry{producerID: pid, lastTimestamp: -1, txnFirstOffset: -1, coordinatorEpoch: -1, epoch: -1, seqTop: -1}
}

// at returns the i-th cached batch, oldest first (i < n).
func (e *entry) at(i int) *BatchMetadata {
	j := int(e.head) + i
	if j >= MaxCachedBatches {
		j -= MaxCachedBatches
	}
	return &e.batches[j]
}

// newest returns the newest cached batch; e.n must be > 0.
func (e *entry) newest() *BatchMetadata { return e.at(int(e.n) - 1) }

func (e *entry) lastSeq() int32 {
	if e.n == 0 {
		return -1
	}
	return e.newest().LastSequence
}

// setEpoch implements the epoch part of mutation rules 1.1-1 and 1.1-2:
// a different epoch, higher or lower, empties the deque.
func (e *entry) setEpoch(epoch int16) {
	if e.epoch != epoch {
		e.n, e.head, e.seqTop = 0, 0, -1
		e.epoch = epoch
	}
}

// addBatch implements mutation rule 1.1-1.
func (e *entry) addBatch(epoch int16, b BatchMetadata) {
	e.setEpoch(epoch)
	e.pushBatch(&b)
}

// pushBatch is addBatch of a batch in the entry's epoch.
func (e *entry) pushBatch(b *BatchMetadata) {
	// The new batch is above every cached one if it is above the newest
	// and the newest was above the others (seqTop is -1 when none is
	// cached).
	top := b.LastSequence
	if !(top > e.seqTop && e.seqTop != noSeqTop) {
		top = e.seqTopAfter(top)
	}
	e.push(b, top)
}

// push adds b to the ring (the oldest goes if it is full); top is the
// entry's seqTop afterwards (seqTopAfter).
func (e *entry) push(b *BatchMetadata, top int32) {
	if e.n == MaxCachedBatches {
		e.batches[e.head] = *b // the oldest goes
		if e.head++; e.head == MaxCachedBatches {
			e.head = 0
		}
	} else {
		*e.at(int(e.n)) = *b
		e.n++
	}
	e.lastTimestamp = b.Timestamp
	e.seqTop = top
}

// seqTopAfter is the entry's seqTop once a batch ending at lastSeq is
// pushed: lastSeq if it is above every cached batch that stays, else
// noSeqTop.
func (e *entry) seqTopAfter(lastSeq int32) int32 {
	i := 0
	if e.n == MaxCachedBatches {
		i = 1 // the oldest goes
	}
	for ; i < int(e.n); i++ {
		if e.at(i).LastSequence >= lastSeq {
			return noSeqTop
		}
	}
	return lastSeq
}

// applyMarker implements mutation rule 1.1-2.
func (e *entry) applyMarker(epoch int16, coordinatorEpoch int32, timestamp int64) {
	e.setEpoch(epoch)
	e.coordinatorEpoch = coordinatorEpoch
	e.txnFirstOffset = -1
	e.lastTimestamp = timestamp
}

// mayHoldDuplicate reports whether a slot of the ring, valid or stale,
// has lastSeq as its last sequence: when it is false, no cached batch is
// a duplicate of a batch ending at lastSeq.
func (e *entry) mayHoldDuplicate(lastSeq int32) bool {
	bs := &e.batches
	return bs[0].LastSequence == lastSeq || bs[1].LastSequence == lastSeq || bs[2].LastSequence == lastSeq ||
		bs[3].LastSequence == lastSeq || bs[4].LastSequence == lastSeq
}

// findDuplicate returns the cached batch with exactly these sequences.
func (e *entry) findDuplicate(firstSeq, lastSeq int32) (BatchMetadata, bool) {
	// A duplicate has lastSeq as its last sequence: one compare per slot,
	// valid or not, rules out the common case (a new sequence) without
	// walking the ring; a stale slot can only send it to the walk.
	if !e.mayHoldDuplicate(lastSeq) {
		return BatchMetadata{}, false
	}
	// Oldest first, as Kafka looks; the ring walked without at().
	j := int(e.head)
	for range int(e.n) {
		if j >= MaxCachedBatches {
			j = 0
		}
		if b := &e.batches[j]; b.LastSequence == lastSeq && b.FirstSequence() == firstSeq {
			return *b, true
		}
		j++
	}
	return BatchMetadata{}, false
}

func (e *entry) export() Entry {
	x := Entry{
		ProducerID:            e.producerID,
		ProducerEpoch:         e.epoch,
		LastSequence:          -1,
		LastOffset:            -1,
		LastTimestamp:         e.lastTimestamp,
		CoordinatorEpoch:      e.coordinatorEpoch,
		CurrentTxnFirstOffset: e.txnFirstOffset,
		NumBatches:            int(e.n),
	}
	for i := range int(e.n) {
		x.Batches[i] = *e.at(i)
	}
	if e.n > 0 {
		last := e.newest()
		x.LastSequence, x.LastOffset, x.OffsetDelta = last.LastSequence, last.LastOffset, last.OffsetDelta
	}
	return x
}
