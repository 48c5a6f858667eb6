package producerstate

import (
	"fmt"
	"slices"

	"github.com/partlog/partlog/batch"
)

// CompletedTxn is a transaction closed by a COMMIT or ABORT marker
// (producer-state.md §1.5, §3).
type CompletedTxn struct {
	ProducerID int64
	// FirstOffset is the offset of the transaction's first data batch.
	FirstOffset int64
	// LastOffset is the marker's offset.
	LastOffset int64
	// LastStableOffset is the LSO to store in the aborted-transaction
	// index entry (§3.3): the first offset of the earliest open
	// transaction of another producer at the marker's position, or
	// LastOffset+1 if there is none.
	LastStableOffset int64
	// Aborted is true for ABORT, false for COMMIT.
	Aborted bool
}

// opKind is the kind of a staged update.
type opKind uint8

const (
	opData    opKind = iota // a data batch of a producer
	opMarker                // a COMMIT/ABORT marker of a producer
	opTouch                 // an empty control batch of a producer: create a blank entry if absent
	opBarrier               // MIRROR_PID_RESET: wipe producers and open transactions
)

// stagedOp is one accepted batch's effect, applied by Commit in order.
type stagedOp struct {
	kind             opKind
	aborted          bool  // opMarker
	startsTxn        bool  // opData: opens a transaction at meta.FirstOffset()
	epoch            int16 // producer epoch of the batch
	coordinatorEpoch int32 // opMarker
	pid              int64
	offset           int64 // base offset of the batch
	timestamp        int64 // opMarker: marker record timestamp
	meta             BatchMetadata
	stored           *entry // the stored entry seen by Validate, nil if none or wiped by a barrier
	shard            *shard // pid's stripe (data, marker and touch ops)
}

// accumulator is the per-producer state of one append. Validation reads
// the stored entry in place; a working copy (e) is made only when a
// second batch of the producer in the same append needs the effect of the
// first (copied), so the common append of one batch per producer never
// copies an entry.
type accumulator struct {
	pid       int64
	shard     *shard // pid's stripe
	stored    *entry // stored entry, nil if none
	pending   int32  // index in ops of the one op not yet applied to a copy, -1 if none
	present   bool   // the producer has an entry (stored or created earlier in this append)
	copied    bool   // e is the working state
	origEpoch int16  // epoch of the state the append started from ("S" of §2.5)
	e         entry
}

// noEntry is the state of a producer without an entry, for reading only.
var noEntry = blankEntry(-1)

// state returns the producer's state as the append has changed it so
// far, for reading. The first batch of a producer reads the stored entry
// (or the blank state); a later one gets a working copy with the staged
// op applied.
func (a *Append) state(acc *accumulator) *entry {
	if acc.copied {
		return &acc.e
	}
	if acc.pending < 0 {
		if acc.stored != nil {
			return acc.stored
		}
		return &noEntry
	}
	if acc.stored != nil {
		acc.e = *acc.stored
	} else {
		acc.e = blankEntry(acc.pid)
	}
	applyOp(&acc.e, &a.ops[acc.pending])
	acc.copied, acc.pending = true, -1
	return &acc.e
}

// stage appends op, the effect of a validated batch of acc's producer.
func (a *Append) stage(acc *accumulator, op *stagedOp) {
	*a.newOp() = *op
	a.staged(acc)
}

// linearAccumulators is how many producers one append tracks with a
// linear scan before it switches to a map; appends from clients carry one
// producer, follower fetches a handful.
const linearAccumulators = 16

// Append is the staging area of one append: Begin, Validate for every
// batch, then Commit (or drop it). It is owned by the caller, reused
// across appends (no allocation once its slices have grown) and not safe
// for concurrent use.
type Append struct {
	// The fields up to barriers' length, the first two cache lines, are
	// all that Begin, ValidateHeader and Commit touch for an append of
	// producer-less batches (the Log embeds an Append on a line boundary:
	// with thousands of partitions appended to in turn, each line is a
	// miss). Keep them first.
	m            *Manager
	origin       Origin
	failed       bool // a batch was rejected: Commit does nothing
	committed    bool
	afterBarrier bool // a barrier was staged: the stored state counts as empty
	hasOffsets   bool
	// tryKnown: nothing is staged yet and the origin is Client, so the
	// next batch with a producer id may take validateKnownData.
	tryKnown bool
	// knownPending: the one batch staged so far was staged by
	// validateKnownData, in known (no op, no accumulator); the general
	// path turns it into both (materialize) before it stages anything.
	knownPending bool
	// hasBarrier: a batch of the append is a MIRROR_PID_RESET barrier,
	// whether or not the manager acts on barriers (HasBarrier).
	hasBarrier bool
	nowMs      int64
	lastOffset int64
	accIndex   map[int64]int32
	ops        []stagedOp
	accs       []accumulator
	completed  []CompletedTxn
	barriers   []int64
	known      Known
	scratch    []byte
	record     batch.Record
	// control is the type of the control batch validateControl read
	// last, hasControl whether it read one (for ControlType).
	control    batch.ControlType
	hasControl bool
}

// Begin starts a new append of origin on a. nowMs is the broker clock
// (kept for callers and future verification-state use).
func (m *Manager) Begin(a *Append, origin Origin, nowMs int64) {
	a.m = m
	a.origin = origin
	a.nowMs = nowMs
	a.failed, a.committed, a.afterBarrier, a.hasOffsets, a.knownPending, a.hasBarrier = false, false, false, false, false, false
	a.tryKnown = origin == Client
	a.lastOffset = -1
	a.ops = a.ops[:0]
	a.accs = a.accs[:0]
	if len(a.accIndex) > 0 {
		clear(a.accIndex)
	}
	a.completed = a.completed[:0]
	a.barriers = a.barriers[:0]
}

// Origin returns the origin given to Begin.
func (a *Append) Origin() Origin { return a.origin }

// CompletedTxns returns the transactions closed by markers of this
// append, in batch order, with LastStableOffset filled (§3.3). Valid after
// Commit, until the next Begin.
func (a *Append) CompletedTxns() []CompletedTxn { return a.completed }

// ControlType returns the type of the record of the control batch just
// validated, as the validation read it; ok is false when that batch has
// no record or was not read. Only meaningful right after a control batch
// was validated (a replay's Applied, say): callers need not read the
// records again.
func (a *Append) ControlType() (t batch.ControlType, ok bool) { return a.control, a.hasControl }

// HasBarrier reports whether a batch validated so far is a
// MIRROR_PID_RESET barrier (even with barriers disabled, when Barriers is
// empty): the log refuses a barrier while transactions are open.
func (a *Append) HasBarrier() bool { return a.hasBarrier }

// Barriers returns the offsets of the barriers staged in this append.
func (a *Append) Barriers() []int64 { return a.barriers }

// accumulatorFor returns the working copy of pid, creating it from the
// stored entry (or the empty state after a barrier). created reports a new
// slot, so that a rejected batch can drop it.
func (a *Append) accumulatorFor(pid int64) (idx int, created bool) {
	if len(a.accs) <= linearAccumulators {
		for i := range a.accs {
			if a.accs[i].pid == pid {
				return i, false
			}
		}
	} else if i, ok := a.accIndex[pid]; ok {
		return int(i), false
	}
	// Reuse a slot without zeroing its entry: e is only read once copied,
	// and copying overwrites all of it.
	if idx = len(a.accs); idx < cap(a.accs) {
		a.accs = a.accs[:idx+1]
	} else {
		a.accs = append(a.accs, accumulator{})
	}
	acc := &a.accs[idx]
	var stored *entry
	sh := a.m.shardFor(pid)
	if !a.afterBarrier {
		// Appends are serialised with every mutation (package doc,
		// invariant 1), so the map is read here without the shard lock:
		// only readers can run concurrently, and they only read.
		stored = sh.producers.get(pid)
	}
	acc.pid, acc.shard, acc.stored, acc.pending, acc.copied = pid, sh, stored, -1, false
	if stored != nil {
		acc.present, acc.origEpoch = true, stored.epoch
	} else {
		acc.present, acc.origEpoch = false, -1
	}
	if len(a.accs) > linearAccumulators {
		if a.accIndex == nil {
			a.accIndex = make(map[int64]int32)
		}
		if len(a.accIndex) == 0 {
			for i := range a.accs {
				a.accIndex[a.accs[i].pid] = int32(i)
			}
		} else {
			a.accIndex[pid] = int32(idx)
		}
	}
	return idx, true
}

func (a *Append) dropAccumulator(idx int) {
	pid := a.accs[idx].pid
	a.accs = a.accs[:idx]
	if len(a.accIndex) > 0 {
		delete(a.accIndex, pid)
		if len(a.accs) <= linearAccumulators {
			clear(a.accIndex)
		}
	}
}

// Validate checks one batch of the append, in append order, whose base
// offset in the log is baseOffset, and stages its effect. It must be
// called for every batch, including batches without a producer id. On
// error nothing is staged for the batch and the whole append is marked
// failed: Commit then does nothing, and the caller writes nothing.
func (m *Manager) Validate(a *Append, v batch.View, baseOffset int64) error {
	var h batch.BatchHeader
	v.DecodeHeader(&h)
	return m.ValidateHeader(a, v, &h, baseOffset)
}

// ValidateHeader is Validate for a caller that has already decoded v's
// header into h (a batch.Iterator's Header): the producer state reads the
// fields from h, not again from the bytes.
func (m *Manager) ValidateHeader(a *Append, v batch.View, h *batch.BatchHeader, baseOffset int64) error {
	if a.m != m {
		panic("partlog/producerstate: Validate on an Append begun by another Manager")
	}
	if a.failed || a.committed {
		return fmt.Errorf("partlog/producerstate: Validate on a failed or committed append")
	}
	if baseOffset < 0 {
		// Offsets are ≥ 0: a Commit of this batch would store a
		// negative MEO.
		a.failed = true
		return fmt.Errorf("partlog/producerstate: Validate of a batch at negative base offset %d", baseOffset)
	}
	if h.ProducerID < 0 && !h.IsControl() {
		// §2.1: only PID > -1 touches producer state (R11); nothing is
		// staged for the batch.
		a.noteOffsets(h, baseOffset)
		return nil
	}
	if a.tryKnown && a.validateKnownData(h, baseOffset) {
		return nil // the usual produce request, staged without an accumulator
	}
	return a.validateStaged(v, h, baseOffset)
}

// validateStaged is ValidateHeader of a batch with producer state by the
// general path (accumulators and ops).
func (a *Append) validateStaged(v batch.View, h *batch.BatchHeader, baseOffset int64) error {
	a.tryKnown = false
	if a.knownPending {
		a.materialize()
	}
	if err := a.validate(v, h, baseOffset); err != nil {
		a.failed = true
		return err
	}
	a.noteOffsets(h, baseOffset)
	return nil
}

// noteOffsets extends the append's offset range by the batch of header h
// at baseOffset.
func (a *Append) noteOffsets(h *batch.BatchHeader, baseOffset int64) {
	last := baseOffset + int64(h.LastOffsetDelta)
	if !a.hasOffsets || last > a.lastOffset {
		a.lastOffset = last
	}
	a.hasOffsets = true
}

func (a *Append) validate(v batch.View, h *batch.BatchHeader, baseOffset int64) error {
	if h.IsControl() {
		if a.origin == Client {
			return a.reject(ErrControlFromClient, h, baseOffset, nil, "clients may not append control batches")
		}
		return a.validateControl(v, h, baseOffset)
	}
	if h.ProducerID < 0 { // §2.1: only PID > -1 touches producer state (R11)
		return nil
	}
	return a.validateData(h, baseOffset)
}

func (a *Append) validateData(h *batch.BatchHeader, baseOffset int64) error {
	pid := h.ProducerID
	epoch := h.ProducerEpoch
	firstSeq := h.BaseSequence
	lastSeq := h.LastSequence()
	if a.origin == Client && firstSeq < 0 {
		return a.reject(ErrInvalidSequence, h, baseOffset, nil, "idempotent batch without a base sequence")
	}
	idx, created := a.accumulatorFor(pid)
	acc := &a.accs[idx]
	cur := a.state(acc)

	// §2.4 step 1: duplicate lookup (Client only) in the *stored* entry:
	// same epoch, exact (firstSeq, lastSeq) of a cached batch.
	if st := acc.stored; a.origin == Client && st != nil && st.epoch == epoch {
		if b, ok := st.findDuplicate(firstSeq, lastSeq); ok {
			err := &DuplicateSequenceError{ProducerID: pid, ProducerEpoch: epoch, FirstSequence: firstSeq,
				LastSequence: lastSeq, FirstOffset: b.FirstOffset(), LastOffset: b.LastOffset, Timestamp: b.Timestamp}
			if created {
				a.dropAccumulator(idx)
			}
			return err
		}
	}
	// §2.5 rule 1: epoch.
	if epoch < cur.epoch && !a.origin.trusted() {
		return a.failData(ErrInvalidProducerEpoch, h, baseOffset, cur, idx, created, "producer epoch is below the stored epoch")
	}
	// §2.5 rule 2: sequence (Client only).
	if a.origin == Client {
		if epoch != cur.epoch {
			if firstSeq != 0 && cur.epoch != -1 {
				return a.failData(ErrOutOfOrderSequence, h, baseOffset, cur, idx, created, "first sequence of a new epoch must be 0")
			}
		} else if acc.origEpoch != -1 {
			prev := int64(cur.lastSeq())
			if !(int64(firstSeq) == prev+1 || (firstSeq == 0 && prev == batch.MaxSequence)) {
				return a.failData(ErrOutOfOrderSequence, h, baseOffset, cur, idx, created, "sequence does not follow the last one")
			}
		}
	}
	// §2.5 rule 4: transaction state (every origin).
	transactional := h.IsTransactional()
	open := cur.txnFirstOffset >= 0
	if open && !transactional {
		return a.failData(ErrInvalidTxnState, h, baseOffset, cur, idx, created, "non-transactional batch while the producer has an open transaction")
	}
	// §2.5 rule 3 (record) and the txn start, staged in place (the op
	// is written field by field into its slot, not built and copied).
	op := a.newOp()
	op.kind, op.aborted, op.startsTxn = opData, false, transactional && !open
	op.epoch, op.coordinatorEpoch, op.pid, op.offset, op.timestamp = epoch, 0, pid, baseOffset, 0
	op.meta.LastSequence, op.meta.OffsetDelta = lastSeq, h.LastOffsetDelta
	op.meta.LastOffset, op.meta.Timestamp = baseOffset+int64(h.LastOffsetDelta), h.MaxTimestamp
	op.stored, op.shard = acc.stored, acc.shard
	a.staged(acc)
	return nil
}

// Known is one data batch of a stored producer that FindKnown accepted
// for an append of that batch alone: the entry it extends and what
// CommitKnown adds to it. Its zero value is not an accepted batch.
type Known struct {
	stored *entry        // its shard is not kept: commits and materialize rarely need it
	meta   BatchMetadata // meta.LastSequence is the entry's seqTop once it is pushed
}

// Accepted reports whether FindKnown accepted a batch into k.
func (k *Known) Accepted() bool { return k.stored != nil }

// FindKnown decides, without an Append, the batch a produce request
// usually is: a data batch of header h (its CRC checked) at baseOffset
// ≥ 0 of a Client, from a stored producer in its stored epoch (≥ 0),
// outside a transaction and not transactional, whose sequences run from
// the entry's seqTop+1 upwards without wrapping. It thus follows the
// newest cached batch and ends above every cached one, so it is no
// duplicate; that is decided from the entry's first cache line. The
// general path (Begin, ValidateHeader) accepts exactly such a batch; here
// the entry is kept in k, for CommitKnown once the batch is in the log,
// and nothing else is staged or changed. For every other batch (a wrap
// to 0 and a cache out of order included) it returns false having done
// nothing, and the general path decides the batch, errors included.
// Same contract as ValidateHeader: the caller's append lock is held
// from FindKnown to CommitKnown (package doc, invariant 1).
// TestKnownPathMatchesGeneralPath runs both paths on the same random
// appends.
func (m *Manager) FindKnown(h *batch.BatchHeader, baseOffset int64, k *Known) bool {
	pid, epoch := h.ProducerID, h.ProducerEpoch
	if pid < 0 || baseOffset < 0 || m.noKnownPath {
		return false
	}
	st := m.shardFor(pid).producers.get(pid)
	if st == nil || h.Attributes&(batch.AttrControl|batch.AttrTransactional) != 0 ||
		st.epoch != epoch || epoch < 0 || st.txnFirstOffset >= 0 {
		return false
	}
	// firstSeq, delta and lastSeq all ≥ 0: no wrap (the sum of two
	// non-negative int32 that overflows is negative). seqTop+1 cannot
	// wrap to a non-negative value, and noSeqTop+1 is negative.
	firstSeq, delta := h.BaseSequence, h.LastOffsetDelta
	lastSeq := firstSeq + delta
	if firstSeq != st.seqTop+1 || firstSeq|delta|lastSeq < 0 {
		return false
	}
	k.stored = st
	k.meta.LastSequence, k.meta.OffsetDelta, k.meta.LastOffset, k.meta.Timestamp = lastSeq, delta, baseOffset+int64(delta), h.MaxTimestamp
	return true
}

// CommitKnown is Commit of an append of the one batch FindKnown accepted
// into k, once its bytes are in the log: the batch joins its producer's
// entry and the MEO moves past it. Nothing may have changed the state
// since FindKnown (the caller's append lock is held throughout).
func (m *Manager) CommitKnown(k *Known) {
	m.pushKnown(k)
	m.mapEndOffset.Store(k.meta.LastOffset + 1)
}

// pushKnown adds the batch FindKnown accepted into k to its entry,
// without the shard lock unless a reader is at work. The caller's append
// lock, held, keeps out readers that came first (beginRead waits for
// it); one that counted itself before that is seen here (readers > 0),
// and the entry is written under its shard lock as readers expect. No
// atomic operation is added to the append (readers is a load), where a
// lock would be two. Package doc, Locking.
func (m *Manager) pushKnown(k *Known) {
	if m.readers.Load() == 0 {
		k.stored.push(&k.meta, k.meta.LastSequence)
		return
	}
	sh := m.shardFor(k.stored.producerID)
	sh.mu.Lock()
	k.stored.push(&k.meta, k.meta.LastSequence)
	sh.mu.Unlock()
}

// validateKnownData is validateData for the case FindKnown accepts: the
// first batch of a Client append that has producer state (nothing staged
// before it, so no barrier either). validateData accepts such a batch
// and stages one data op (its accumulator holding the stored entry
// unchanged, the op pending); here the op's content is kept in a.known,
// and materialize makes both if another batch with producer state
// follows; the batch's offsets are noted. For every other batch it
// returns false having done nothing, and validateStaged decides the
// batch.
func (a *Append) validateKnownData(h *batch.BatchHeader, baseOffset int64) bool {
	if !a.m.FindKnown(h, baseOffset, &a.known) {
		return false
	}
	a.tryKnown, a.knownPending = false, true
	a.noteOffsets(h, baseOffset)
	return true
}

// materialize turns the batch validateKnownData staged into the op and
// the accumulator validateData would have staged for it: ops[0], and the
// stored entry, unchanged, with ops[0] pending.
func (a *Append) materialize() {
	k := &a.known
	st := k.stored
	sh := a.m.shardFor(st.producerID)
	op := a.newOp()
	op.kind, op.aborted, op.startsTxn = opData, false, false
	op.epoch, op.coordinatorEpoch, op.pid, op.offset, op.timestamp = st.epoch, 0, st.producerID, k.meta.FirstOffset(), 0
	op.meta = k.meta
	op.stored, op.shard = st, sh
	if cap(a.accs) > 0 {
		a.accs = a.accs[:1]
	} else {
		a.accs = append(a.accs, accumulator{})
	}
	acc := &a.accs[0]
	acc.pid, acc.shard, acc.stored, acc.pending, acc.copied = st.producerID, sh, st, 0, false
	acc.present, acc.origEpoch = true, st.epoch
	a.knownPending = false
}

// failData is validateData's rejection: the error, and the accumulator
// dropped if this batch created it.
func (a *Append) failData(sentinel error, h *batch.BatchHeader, baseOffset int64, cur *entry, idx int, created bool, detail string) error {
	err := a.reject(sentinel, h, baseOffset, cur, detail)
	if created {
		a.dropAccumulator(idx)
	}
	return err
}

// newOp returns a new last slot of ops, to be filled in whole.
func (a *Append) newOp() *stagedOp {
	if n := len(a.ops); n < cap(a.ops) {
		a.ops = a.ops[:n+1]
	} else {
		a.ops = append(a.ops, stagedOp{})
	}
	return &a.ops[len(a.ops)-1]
}

// staged records that the last op (just filled by newOp) is acc's.
func (a *Append) staged(acc *accumulator) {
	if acc.copied {
		applyOp(&acc.e, &a.ops[len(a.ops)-1])
	} else {
		acc.pending = int32(len(a.ops) - 1)
	}
	acc.present = true
}

func (a *Append) validateControl(v batch.View, h *batch.BatchHeader, baseOffset int64) error {
	pid := h.ProducerID
	a.hasControl = false
	if h.RecordsCount <= 0 {
		// §2.6 rule 0 / §6.8 R1: an empty control batch (all records
		// compacted away) is neither a marker nor a barrier; with a PID it
		// still yields a blank entry for an unknown producer (quirk).
		if pid < 0 {
			return nil
		}
		idx, _ := a.accumulatorFor(pid)
		acc := &a.accs[idx]
		if !acc.present {
			// No effect on the entry's fields: nothing to apply to a
			// working copy, and no pending op is replaced (an absent
			// producer has none).
			acc.present = true
			a.ops = append(a.ops, stagedOp{kind: opTouch, pid: pid, offset: baseOffset, epoch: -1})
		}
		return nil
	}
	typ, data, err := v.ControlRecord(a.scratch, &a.record)
	// Keep a grown decompression buffer for the next batch, but never
	// the records of an uncompressed batch: those are the caller's bytes,
	// which a later decompression into the scratch would overwrite.
	if h.Compression() != batch.CompressionNone && cap(data) > cap(a.scratch) {
		a.scratch = data[:0]
	}
	if err != nil {
		return a.corruptControl(h, baseOffset, err)
	}
	a.control, a.hasControl = typ, true
	if typ == batch.ControlMirrorPidReset {
		a.hasBarrier = true
	}
	if typ == batch.ControlMirrorPidReset && !a.m.barriersDisabled {
		// §6.8 R1: a barrier whatever its PID, epoch, sequence or flags.
		a.afterBarrier = true
		a.accs = a.accs[:0]
		if len(a.accIndex) > 0 {
			clear(a.accIndex)
		}
		a.barriers = append(a.barriers, baseOffset)
		a.ops = append(a.ops, stagedOp{kind: opBarrier, pid: pid, offset: baseOffset})
		return nil
	}
	if pid < 0 { // §2.1: control batches without a PID are not producer state
		return nil
	}
	if typ != batch.ControlCommit && typ != batch.ControlAbort {
		return a.reject(ErrUnknownControlType, h, baseOffset, nil, "control type "+typ.String()+" with a producer id")
	}
	marker, err := batch.ParseEndTxnMarker(a.record.Value)
	if err != nil {
		return a.corruptControl(h, baseOffset, err)
	}
	epoch := h.ProducerEpoch
	idx, created := a.accumulatorFor(pid)
	acc := &a.accs[idx]
	cur := a.state(acc)
	fail := func(sentinel error, detail string) error {
		err := a.reject(sentinel, h, baseOffset, cur, detail)
		e := err.(*ProducerError)
		e.CoordinatorEpoch, e.StoredCoordinatorEpoch = marker.CoordinatorEpoch, cur.coordinatorEpoch
		if created {
			a.dropAccumulator(idx)
		}
		return err
	}
	// §2.6 rule 2: producer epoch; rule 3: coordinator epoch.
	if epoch < cur.epoch && !a.origin.trusted() {
		return fail(ErrInvalidProducerEpoch, "marker producer epoch is below the stored epoch")
	}
	if marker.CoordinatorEpoch < cur.coordinatorEpoch && !a.origin.trusted() {
		return fail(ErrTransactionCoordinatorFenced, "marker coordinator epoch is below the stored one")
	}
	op := stagedOp{
		kind:             opMarker,
		aborted:          typ == batch.ControlAbort,
		epoch:            epoch,
		coordinatorEpoch: marker.CoordinatorEpoch,
		pid:              pid,
		offset:           baseOffset,
		timestamp:        a.record.Timestamp,
		stored:           acc.stored,
	}
	a.stage(acc, &op)
	return nil
}

func (a *Append) corruptControl(h *batch.BatchHeader, baseOffset int64, cause error) error {
	if h.ProducerID < 0 {
		// Kafka ignores control batches without a producer id; one whose
		// first record cannot be read is not a barrier (R1) either.
		return nil
	}
	return &ProducerError{Err: fmt.Errorf("%w: %w", ErrUnknownControlType, cause), Origin: a.origin, Offset: baseOffset,
		ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, FirstSequence: -1, LastSequence: -1,
		StoredEpoch: -1, StoredLastSequence: -1, Detail: "unreadable control record"}
}

func (a *Append) reject(sentinel error, h *batch.BatchHeader, baseOffset int64, stored *entry, detail string) error {
	e := &ProducerError{Err: sentinel, Origin: a.origin, Offset: baseOffset, ProducerID: h.ProducerID,
		ProducerEpoch: h.ProducerEpoch, FirstSequence: h.BaseSequence, LastSequence: h.LastSequence(),
		StoredEpoch: -1, StoredLastSequence: -1, CoordinatorEpoch: -1, StoredCoordinatorEpoch: -1, Detail: detail}
	if stored != nil {
		e.StoredEpoch, e.StoredLastSequence = stored.epoch, stored.lastSeq()
	}
	return e
}

// applyOp applies a data, marker or touch op to one entry. Validation
// (on the accumulator) and Commit (on the stored entry) both use it.
func applyOp(e *entry, op *stagedOp) {
	switch op.kind {
	case opData:
		e.addBatch(op.epoch, op.meta)
		if op.startsTxn {
			e.txnFirstOffset = op.meta.FirstOffset()
		}
	case opMarker:
		e.applyMarker(op.epoch, op.coordinatorEpoch, op.timestamp)
	}
}

// CommitPlain is Begin, ValidateHeader and Commit in one call for an
// append of one data batch without producer state (producer id < 0, not
// a control batch: nothing is staged for it, §2.1) whose last offset is
// lastOffset ≥ 0, once its bytes are in the log: only the MEO moves past
// it. The leader's usual request takes it, without an Append's resets
// and checks. Writer only.
func (m *Manager) CommitPlain(lastOffset int64) { m.mapEndOffset.Store(lastOffset + 1) }

// Commit applies the staged updates in batch order, after the bytes are
// in the log: producer entries, transaction starts, completed
// transactions (with their LSO), barriers at their exact positions; then
// MEO := last offset of the append + 1. It does nothing if a batch was
// rejected or if no batch was validated. An append that staged nothing
// (no batch with a producer id) only moves the MEO, without the state
// lock: no entry changes, so a reader holding the lock sees a consistent
// state with either value. An append whose one batch with producer state
// the known path staged changes that entry without any lock unless a
// reader is at work (package doc, Locking).
func (m *Manager) Commit(a *Append) {
	if a.m != m || a.failed || a.committed || !a.hasOffsets {
		return
	}
	a.committed = true
	if len(a.ops) == 0 {
		if a.knownPending {
			// One data batch of a stored producer in its epoch, outside
			// a transaction (validateKnownData): CommitKnown's work.
			m.pushKnown(&a.known)
		}
		m.mapEndOffset.Store(a.lastOffset + 1)
		return
	}
	// Out of line: its frame and spills are not paid by the cases above.
	m.commitOps(a)
}

// commitOps is Commit of an append that staged ops.
func (m *Manager) commitOps(a *Append) {
	if op := &a.ops[0]; len(a.ops) == 1 && op.kind == opData && op.stored != nil && !op.startsTxn {
		// One data batch of a known producer outside a transaction (a
		// produce request's usual shape): only that entry changes, under
		// its shard lock, which every reader of entries takes; no count,
		// transaction or barrier changes, so the state lock is not needed.
		op.shard.mu.Lock()
		applyOp(op.stored, op)
		op.shard.mu.Unlock()
		m.mapEndOffset.Store(a.lastOffset + 1)
		return
	}
	m.mu.Lock()
	for i := range a.ops {
		op := &a.ops[i]
		switch op.kind {
		case opBarrier:
			m.applyBarrierLocked(op.offset)
			continue
		case opMarker:
			m.completeLocked(a, op)
		}
		s := op.shard
		if s == nil {
			s = m.shardFor(op.pid)
		}
		s.mu.Lock()
		e := op.stored
		if e == nil {
			if e = s.producers.get(op.pid); e == nil {
				e = new(entry)
				*e = blankEntry(op.pid)
				s.producers.put(op.pid, e)
				m.count++
			}
		}
		applyOp(e, op)
		s.mu.Unlock()
		if op.startsTxn {
			m.ongoing = append(m.ongoing, txnRecord{producerID: op.pid, firstOffset: op.meta.FirstOffset(), lastOffset: -1})
			if n := len(m.ongoing); n > 1 && m.ongoing[n-2].firstOffset > m.ongoing[n-1].firstOffset {
				slices.SortFunc(m.ongoing, func(x, y txnRecord) int { return cmp64(x.firstOffset, y.firstOffset) })
			}
		}
	}
	m.mapEndOffset.Store(a.lastOffset + 1)
	m.mu.Unlock()
}

// completeLocked closes pid's open transaction at a marker (§2.6 rule 4,
// §3.3), before the marker is applied to the entry.
func (m *Manager) completeLocked(a *Append, op *stagedOp) {
	i := slices.IndexFunc(m.ongoing, func(t txnRecord) bool { return t.producerID == op.pid })
	if i < 0 {
		return // empty transaction: no CompletedTxn, no LSO effect (§3.7)
	}
	lso := op.offset + 1
	for _, t := range m.ongoing {
		if t.producerID != op.pid {
			lso = t.firstOffset
			break
		}
	}
	t := m.ongoing[i]
	m.ongoing = slices.Delete(m.ongoing, i, i+1)
	t.lastOffset = op.offset
	m.unreplicated = append(m.unreplicated, t)
	a.completed = append(a.completed, CompletedTxn{ProducerID: op.pid, FirstOffset: t.firstOffset,
		LastOffset: op.offset, LastStableOffset: lso, Aborted: op.aborted})
}

// applyBarrierLocked performs §6.8 R4 at offset: every producer entry and
// every open transaction goes; decided (unreplicated) transactions stay.
func (m *Manager) applyBarrierLocked(offset int64) {
	m.orphanedTxns += int64(len(m.ongoing))
	m.clearLocked()
	m.barriers = append(m.barriers, offset)
}
