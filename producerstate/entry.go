package producerstate

import "github.com/partlog/partlog/batch"

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
// The cached batches are a ring: n of them, the newest at index last
// (the oldest n-1 slots before it, cyclically), so adding one to a full
// cache overwrites the oldest instead of shifting the other four. They are stored field by field (one array per field),
// and the fields the checks of a produce request read (validateKnownData:
// the open transaction, every slot's last sequence, the epoch, the ring's
// position) are the first 32 bytes: heap entries are 160-byte objects,
// which start at 0 or 32 modulo 64, so those checks read one cache line.
type entry struct {
	txnFirstOffset int64                   // -1: no open transaction
	seqs           [MaxCachedBatches]int32 // LastSequence of each slot
	epoch          int16
	n, last        uint8
	// (32 bytes)
	producerID       int64
	lastTimestamp    int64
	coordinatorEpoch int32
	deltas           [MaxCachedBatches]int32 // OffsetDelta of each slot
	offsets          [MaxCachedBatches]int64 // LastOffset of each slot
	stamps           [MaxCachedBatches]int64 // Timestamp of each slot
	_                [8]byte                 // 160 bytes: LoadSnapshot's slab keeps the 32-byte alignment too
}

// blankEntry is the state of a brand-new producer (§1.1 last column).
func blankEntry(pid int64) entry {
	return entry{producerID: pid, lastTimestamp: -1, txnFirstOffset: -1, coordinatorEpoch: -1, epoch: -1}
}

// slot is the ring index of the i-th cached batch, oldest first (i < n).
func (e *entry) slot(i int) int {
	j := int(e.last) + 1 + i - int(e.n) // in last-4 .. last
	if j < 0 {
		j += MaxCachedBatches
	}
	return j
}

// batch returns the batch in ring slot j.
func (e *entry) batch(j int) BatchMetadata {
	return BatchMetadata{LastSequence: e.seqs[j], OffsetDelta: e.deltas[j], LastOffset: e.offsets[j], Timestamp: e.stamps[j]}
}

// setBatch stores b in ring slot j.
func (e *entry) setBatch(j int, b *BatchMetadata) {
	e.seqs[j], e.deltas[j], e.offsets[j], e.stamps[j] = b.LastSequence, b.OffsetDelta, b.LastOffset, b.Timestamp
}

// at returns the i-th cached batch, oldest first (i < n).
func (e *entry) at(i int) BatchMetadata { return e.batch(e.slot(i)) }

// newest returns the newest cached batch; e.n must be > 0.
func (e *entry) newest() BatchMetadata { return e.at(int(e.n) - 1) }

func (e *entry) lastSeq() int32 {
	if e.n == 0 {
		return -1
	}
	return e.seqs[e.last]
}

// setEpoch implements the epoch part of mutation rules 1.1-1 and 1.1-2:
// a different epoch, higher or lower, empties the deque.
func (e *entry) setEpoch(epoch int16) {
	if e.epoch != epoch {
		e.n, e.last = 0, 0
		e.epoch = epoch
	}
}

// addBatch implements mutation rule 1.1-1.
func (e *entry) addBatch(epoch int16, b BatchMetadata) {
	e.setEpoch(epoch)
	e.pushBatch(&b)
}

// pushBatch is addBatch of a batch in the entry's epoch: it goes in the
// slot after the newest, which in a full ring is the oldest's.
func (e *entry) pushBatch(b *BatchMetadata) {
	j := int(e.last) + 1
	if j == MaxCachedBatches {
		j = 0
	}
	e.seqs[j], e.deltas[j], e.offsets[j], e.stamps[j] = b.LastSequence, b.OffsetDelta, b.LastOffset, b.Timestamp
	e.last = uint8(j)
	if e.n < MaxCachedBatches {
		e.n++
	}
	e.lastTimestamp = b.Timestamp
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
	s := &e.seqs
	return s[0] == lastSeq || s[1] == lastSeq || s[2] == lastSeq || s[3] == lastSeq || s[4] == lastSeq
}

// findDuplicate returns the cached batch with exactly these sequences.
func (e *entry) findDuplicate(firstSeq, lastSeq int32) (BatchMetadata, bool) {
	// A duplicate has lastSeq as its last sequence: one compare per slot,
	// valid or not, rules out the common case (a new sequence) without
	// walking the ring; a stale slot can only send it to the walk.
	if !e.mayHoldDuplicate(lastSeq) {
		return BatchMetadata{}, false
	}
	// Oldest first, as Kafka looks.
	for i := range int(e.n) {
		if b := e.at(i); b.LastSequence == lastSeq && b.FirstSequence() == firstSeq {
			return b, true
		}
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
		x.Batches[i] = e.at(i)
	}
	if e.n > 0 {
		last := e.newest()
		x.LastSequence, x.LastOffset, x.OffsetDelta = last.LastSequence, last.LastOffset, last.OffsetDelta
	}
	return x
}
