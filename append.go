package partlog

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/segment"
)

// AppendInfo reports what an append wrote.
type AppendInfo struct {
	// FirstOffset is the base offset of the first batch, LastOffset the
	// last offset of the last batch.
	FirstOffset, LastOffset int64
	// MaxTimestamp is the largest batch max timestamp (-1 if none), and
	// OffsetOfMaxTimestamp the last offset of the batch that holds it.
	MaxTimestamp, OffsetOfMaxTimestamp int64
	// Batches and Records count what was appended; Bytes is the size.
	Batches, Records int
	Bytes            int
	// Position is the byte position of the append in its segment, and
	// SegmentBaseOffset that segment.
	Position, SegmentBaseOffset int64
}

// scan is what validating an append found, carried to the steps after it
// so that none decodes the bytes again: each batch's header (to the
// segment append and the epoch cache), the sums and epochs below, and the
// producer state's view of the batches, staged in l.stage during the same
// walk (its barriers included). With LogAppendTime the walk stamps the
// batches too, into a copy: bytes is what to append.
type scan struct {
	// hdrs holds each batch's decoded header in append order (their
	// positions follow from their sizes); its array is the Log's
	// (logCold.hdrBuf), reused from append to append.
	hdrs           []batch.BatchHeader
	bytes          []byte
	copied         bool // bytes is the log's copy of the records (recordRules)
	records        int
	firstBase      int64 // base offset of the first batch as received
	lastOffset     int64 // last offset of the last batch as received
	offsetSlots    int64 // sum of lastOffsetDelta+1
	maxTimestamp   int64
	firstEpoch     int32
	lastEpoch      int32
	epochsDecrease bool // a batch's leader epoch is below the previous one's
}

// reset empties s for an append of records, keeping buf's array for the
// headers.
func (s *scan) reset(records []byte, buf []batch.BatchHeader) {
	s.hdrs, s.bytes, s.copied = buf[:0], records, false
	s.records, s.offsetSlots = 0, 0
	s.firstBase, s.lastOffset, s.maxTimestamp = -1, -1, batch.NoTimestamp
	s.firstEpoch, s.lastEpoch, s.epochsDecrease = 0, 0, false
}

// next returns the slot for the next batch's header: the walk decodes
// into it (batch.CheckAt) and add counts it; drop gives it back when the
// batch is refused.
func (s *scan) next() *batch.BatchHeader {
	s.hdrs = append(s.hdrs, batch.BatchHeader{})
	return &s.hdrs[len(s.hdrs)-1]
}

func (s *scan) drop() { s.hdrs = s.hdrs[:len(s.hdrs)-1] }

// add counts the batch of header h, the last slot of hdrs.
func (s *scan) add(h *batch.BatchHeader) {
	if e := h.PartitionLeaderEpoch; len(s.hdrs) == 1 {
		s.firstBase = h.BaseOffset
		s.firstEpoch, s.lastEpoch = e, e
	} else {
		s.epochsDecrease = s.epochsDecrease || e < s.lastEpoch
		s.lastEpoch = e
	}
	s.lastOffset = h.LastOffset()
	s.offsetSlots += int64(h.LastOffsetDelta) + 1
	s.records += int(h.RecordsCount)
	if ts := h.MaxTimestamp; ts > s.maxTimestamp {
		s.maxTimestamp = ts
	}
}

// validate checks every batch of records (batch.Check: framing, magic 2,
// CRC-32C, header rules), for a client Kafka's leader rules, and, when
// the offsets are kept as they are (follower, mirror), that they
// increase from batch to batch; for a leader or coordinator append it
// applies the topic's timestamp rules (applyTimestampRules); in the same
// walk it stages each batch in the producer state (l.stage), which
// appendStamped commits, and keeps each header in s. The bytes must be
// exactly a sequence of whole batches. It does not allocate (but to grow
// the Log's header array, once).
func (l *Log) validate(records []byte, origin Origin, keptOffsets bool, s *scan) error {
	s.reset(records, l.hdrBuf)
	err := l.validateWalk(records, origin, keptOffsets, s)
	l.hdrBuf = s.hdrs[:0]
	return err
}

func (l *Log) validateWalk(records []byte, origin Origin, keptOffsets bool, s *scan) error {
	if len(records) == 0 {
		return fmt.Errorf("%w: empty append", ErrInvalidRecords)
	}
	leader := origin == OriginClient
	// The producer state stages each batch in the same walk, at the
	// offset it will have: as fetched, or assigned from the log end.
	l.psm.Begin(&l.stage, origin, 0) // the manager does not read the clock
	next := l.logEndOffset.Load()
	var ts timestampRules
	if l.tsRules && !keptOffsets {
		ts = l.timestampRules(records)
		if ts.stamped != nil {
			s.bytes = ts.stamped
		}
	}
	prevLast := int64(-1)
	for p := 0; p < len(records); {
		// Each batch's header is decoded once, by batch.CheckAt (an
		// Iterator's step, called here directly), into its slot of
		// s.hdrs; the rules, the producer state and the segment read it
		// from there.
		h := s.next()
		v, err := batch.CheckAt(records[p:], int64(p), h)
		if err != nil {
			s.drop()
			if leader && soundFrame(records[p:]) {
				// Framing and CRC hold: a header field broke a rule
				// (offset range, count, codec), which Kafka's
				// LogValidator answers INVALID_RECORD, not corrupt.
				return fmt.Errorf("%w: %w", ErrPolicy, err)
			}
			return fmt.Errorf("%w: %w", ErrInvalidRecords, err)
		}
		pos := int64(p) // the batch's position in records, for errors
		p += len(v)
		if leader {
			// The rules of leaderRules, inline for a batch that passes
			// them (the call is made to name the failure, or to walk
			// the records).
			if int64(len(v)) > l.opts.MaxBatchBytes || h.BaseOffset != 0 || h.IsControl() || h.RecordsCount <= 0 ||
				int64(h.LastOffsetDelta)+1 != int64(h.RecordsCount) || h.ProducerID >= 0 && h.BaseSequence < 0 {
				if err := l.leaderRules(v, h, pos); err != nil {
					return err
				}
			}
			if v, err = l.recordRules(v, h, pos, &ts, s, records); err != nil {
				return err
			}
		} else if origin == OriginCoordinator {
			if err := coordinatorRules(h, pos); err != nil {
				return err
			}
		} else if keptOffsets && len(s.hdrs) > 1 && h.BaseOffset <= prevLast {
			return &OffsetError{Err: ErrUnexpectedOffset, Offset: h.BaseOffset,
				LogStartOffset: l.logStartOffset.Load(), LogEndOffset: l.logEndOffset.Load()}
		}
		// A leader's CreateTime window was checked on every record
		// (recordRules); the header's timestamps are for the others.
		if ts.apply && (!leader || ts.stamped != nil) {
			if v, err = ts.batch(v, h, pos); err != nil {
				return err
			}
		}
		slots := int64(h.LastOffsetDelta) + 1
		base := h.BaseOffset
		if !keptOffsets {
			base = next
		}
		// The batch's offsets and the log end after it must be int64s:
		// checked here, before anything (a roll) is written.
		if base < 0 || base > math.MaxInt64-slots {
			return &OffsetError{Err: ErrUnexpectedOffset, Offset: base,
				LogStartOffset: l.logStartOffset.Load(), LogEndOffset: l.logEndOffset.Load()}
		}
		if !keptOffsets {
			next += slots
		}
		if err := l.psm.ValidateHeader(&l.stage, v, h, base); err != nil {
			return err
		}
		s.add(h)
		prevLast = s.lastOffset
	}
	if int64(len(records)) > l.opts.SegmentBytes {
		return fmt.Errorf("%w: append of %d bytes exceeds the segment size %d", ErrRecordListTooLarge, len(records), l.opts.SegmentBytes)
	}
	return nil
}

// leaderRules applies the checks a leader makes of a client's batch
// (formats.md §1.8, recovery.md §3.1).
// h is v's decoded header.
func (l *Log) leaderRules(v batch.View, h *batch.BatchHeader, pos int64) error {
	switch {
	case int64(len(v)) > l.opts.MaxBatchBytes:
		return fmt.Errorf("%w: batch at %d is %d bytes, limit %d", ErrRecordTooLarge, pos, len(v), l.opts.MaxBatchBytes)
	case h.BaseOffset != 0:
		return fmt.Errorf("%w: batch at %d has base offset %d, a producer's must be 0", ErrPolicy, pos, h.BaseOffset)
	case h.IsControl():
		return fmt.Errorf("%w: control batch at %d from a client", ErrPolicy, pos)
	case h.RecordsCount <= 0 || int64(h.LastOffsetDelta)+1 != int64(h.RecordsCount):
		return fmt.Errorf("%w: batch at %d has %d records but last offset delta %d", ErrPolicy, pos, h.RecordsCount, h.LastOffsetDelta)
	case h.ProducerID >= 0 && h.BaseSequence < 0:
		return fmt.Errorf("%w: idempotent batch at %d without a base sequence", ErrPolicy, pos)
	}
	return nil
}

// recordRules walks the records of a client's batch v at pos (header h)
// as Kafka's LogValidator does: each record must be well formed under
// the valid CRC (contiguous offset deltas, lengths that add up), have a
// key on a compacted topic and, with CreateTime, a timestamp in the
// topic's window. The batch's max timestamp is the largest record
// timestamp, not the producer's header field (retention and ListOffsets
// read it): when they differ, or the batch claims LogAppendTime on a
// CreateTime topic, the batch is rewritten in the log's copy of the
// records (max timestamp, CreateTime, CRC), as Kafka's setMaxTimestamp
// does; a producer that fills the header right costs no copy. It
// returns the batch to append.
func (l *Log) recordRules(v batch.View, h *batch.BatchHeader, pos int64, ts *timestampRules, s *scan, records []byte) (batch.View, error) {
	var sum batch.RecordSummary
	if err := l.summarize(v, h, &sum); err != nil {
		// Under a valid CRC: Kafka's InvalidRecordException.
		return nil, fmt.Errorf("%w: batch at %d: %w", ErrPolicy, pos, err)
	}
	if l.opts.CleanupPolicy&Compact != 0 && sum.NullKey {
		// The cleaner could only drop a record without a key.
		return nil, fmt.Errorf("%w: compacted topic cannot accept a record without a key (batch at %d, offset delta %d)", ErrPolicy, pos, sum.NullKeyDelta)
	}
	if ts.stamped != nil {
		return v, nil // LogAppendTime: stamped by ts.batch, nothing checked
	}
	if ts.apply {
		if err := ts.window(sum.MinTimestamp, sum.MaxTimestamp, pos); err != nil {
			return nil, l.windowErrors(v, h, ts, err)
		}
	}
	if sum.MaxTimestamp == h.MaxTimestamp && h.Attributes&batch.AttrTimestampType == 0 {
		return v, nil
	}
	if !s.copied {
		l.appendTimeBuf = append(l.appendTimeBuf[:0], records...)
		s.bytes, s.copied = l.appendTimeBuf, true
	}
	c := batch.View(s.bytes[pos : pos+int64(len(v)) : pos+int64(len(v))])
	stampMaxTimestamp(c, false, sum.MaxTimestamp)
	h.Attributes &^= batch.AttrTimestampType
	h.MaxTimestamp, h.CRC = sum.MaxTimestamp, c.CRC()
	return c, nil
}

// windowErrors names the records of v (header h) whose timestamps lie
// outside the window, as Kafka's produce response lists them (KIP-467);
// err is the window's refusal of the batch. Only a refused append pays
// for the second walk.
func (l *Log) windowErrors(v batch.View, h *batch.BatchHeader, ts *timestampRules, err error) error {
	data := v.RecordsSection()
	if h.Compression() != batch.CompressionNone {
		var derr error
		if data, derr = v.RecordData(l.scratch, int(l.opts.MaxBatchBytes)*64); derr != nil {
			return err
		}
	}
	re := &RecordErrors{Err: err}
	it := v.Records(data)
	i := 0
	for r, ok := it.Next(); ok; r, ok = it.Next() {
		i++
		if ts.window(r.Timestamp, r.Timestamp, 0) != nil {
			re.Records = append(re.Records, RecordError{Index: i - 1, Message: fmt.Sprintf(
				"timestamp %d of record %d is out of range [%d, %d]", r.Timestamp, r.Offset,
				windowLow(ts.now, ts.before), windowHigh(ts.now, ts.after))})
		}
	}
	return re
}

// soundFrame reports whether b starts with a magic 2 batch whose length
// fits in b and whose CRC holds.
func soundFrame(b []byte) bool {
	if len(b) < batch.HeaderSize || b[batch.OffMagic] != 2 {
		return false
	}
	n := int64(binary.BigEndian.Uint32(b[batch.OffBatchLength:])) + 12
	if n < batch.HeaderSize || n > int64(len(b)) {
		return false
	}
	v := batch.View(b[:n])
	return v.CRC() == v.ComputeCRC()
}

// summarize checks the records of v (header h), decompressed into the
// log's scratch buffer if needed, into sum.
func (l *Log) summarize(v batch.View, h *batch.BatchHeader, sum *batch.RecordSummary) error {
	data := v.RecordsSection()
	if h.Compression() != batch.CompressionNone {
		var err error
		if data, err = v.RecordData(l.scratch, int(l.opts.MaxBatchBytes)*64); err != nil {
			return err
		}
		l.scratch = data[:0]
	}
	return batch.SummarizeRecords(v, data, true, sum)
}

// coordinatorRules are the checks of a batch the broker writes for a
// transaction coordinator or the mirroring control plane: a control batch
// whose record count matches its offset range, as a leader requires of
// every batch whose offsets it assigns.
func coordinatorRules(h *batch.BatchHeader, pos int64) error {
	switch {
	case !h.IsControl():
		return fmt.Errorf("%w: data batch at %d from a coordinator (only control batches)", ErrPolicy, pos)
	case h.RecordsCount <= 0 || int64(h.LastOffsetDelta)+1 != int64(h.RecordsCount):
		return fmt.Errorf("%w: batch at %d has %d records but last offset delta %d", ErrPolicy, pos, h.RecordsCount, h.LastOffsetDelta)
	}
	return nil
}

// AppendAsLeader appends a produce request's batches (client origin):
// it validates every batch, checks it against the producer state
// (idempotence, epochs, transactions), gives the batches the next offsets
// and the leader epoch, and appends them. Only the base offset and
// partition leader epoch of each batch are written, in the mapped copy:
// records is not modified and no CRC is computed (except on a
// LogAppendTime topic, where each batch is stamped with the append time
// in a copy and its CRC recomputed; see Options.MessageTimestampType and
// applyTimestampRules; and with a CompressionType other than producer,
// where a batch of another codec is recompressed in a copy). A new
// leader epoch is
// recorded in the leader-epoch cache. Nothing is written when any batch
// is rejected; a retried batch already in the log fails with a
// *producerstate.DuplicateSequenceError carrying its original offsets.
// It does not allocate (except when the epoch changes or a segment
// rolls).
func (l *Log) AppendAsLeader(records []byte, leaderEpoch int32) (AppendInfo, error) {
	var info AppendInfo
	err := l.appendLeader(records, leaderEpoch, &info)
	return info, err
}

// enterAppend counts an append in l.commit.appending while some caller is in
// Sync, the only time anyone reads the count (a group's leader, in
// comingBack, is itself in Sync), and reports whether it counted, for
// leaveAppend. Otherwise an append pays one load of a line it reads
// anyway (writes) instead of two atomic additions on a line of logCold,
// which no append touches otherwise. An append that starts before the
// first caller enters Sync goes uncounted: a leader may then cut its
// group without waiting for it, as it would for an appender that never
// syncs.
func (l *Log) enterAppend() bool {
	if l.writes.syncers.Load() == 0 {
		return false
	}
	l.commit.appending.Add(1)
	return true
}

// leaveAppend undoes enterAppend's count, if it made one.
func (l *Log) leaveAppend(counted bool) {
	if counted {
		l.commit.appending.Add(-1)
	}
}

// PrepareIndexes makes the active segment's index files now, as Kafka
// makes them with the segment; they are otherwise made by the segment's
// first index entry, in an append. A leader that calls it as it creates
// a partition pays the two file creations there.
func (l *Log) PrepareIndexes() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	return l.active().PrepareIndexes()
}

// appendLeader is appendAssigned(records, leaderEpoch, OriginClient,
// info) with the usual produce request in one function: one batch that
// passes every check, at the latest leader epoch, with no record
// validation or timestamp rule, stored into the mapping and needing no
// roll (Segment.AppendLeader). Each step is the general path's (the
// same CheckAt, leader rules, offset checks and producer-state calls, in
// the same order), made once on the header CheckAt decoded. At the first
// thing outside that case, before anything is written, it goes the
// general way (appendAssignedLocked), which checks everything again and
// names any error; only a producer-state refusal is returned as it is,
// being the general path's own error at that point.
func (l *Log) appendLeader(records []byte, leaderEpoch int32, info *AppendInfo) error {
	counted := l.enterAppend()
	l.appendMu.Lock()
	err := l.appendLeaderLocked(records, leaderEpoch, info)
	l.appendMu.Unlock()
	l.leaveAppend(counted)
	return err
}

// beginLeader stages the one batch of appendLeaderLocked (v, its header
// h, at base offset next) in the producer state, as validate does.
func (l *Log) beginLeader(v batch.View, h *batch.BatchHeader, next int64) error {
	l.psm.Begin(&l.stage, OriginClient, 0)
	return l.psm.ValidateHeader(&l.stage, v, h, next)
}

func (l *Log) appendLeaderLocked(records []byte, leaderEpoch int32, info *AppendInfo) error {
	if l.failed != nil || l.closed.Load() || l.opts.MessageTimestampType == LogAppendTime || l.opts.CleanupPolicy&Compact != 0 ||
		l.opts.CompressionType != CompressionProducer ||
		leaderEpoch != l.latestEpoch.Load() || int64(len(records)) > l.opts.SegmentBytes {
		return l.appendAssignedLocked(records, leaderEpoch, OriginClient, info)
	}
	var h batch.BatchHeader
	v, err := batch.CheckAt(records, 0, &h)
	next := l.logEndOffset.Load()
	slots := int64(h.LastOffsetDelta) + 1
	// validate's leader rules and offset checks, as one test that passes.
	if err != nil || len(v) != len(records) || int64(len(v)) > l.opts.MaxBatchBytes || h.BaseOffset != 0 || h.IsControl() || h.RecordsCount <= 0 ||
		slots != int64(h.RecordsCount) || h.ProducerID >= 0 && h.BaseSequence < 0 || next < 0 || next > math.MaxInt64-slots {
		return l.appendAssignedLocked(records, leaderEpoch, OriginClient, info)
	}
	// recordRules' walk: a batch it would refuse or rewrite takes the
	// general path, which does either.
	var sum batch.RecordSummary
	if l.summarize(v, &h, &sum) != nil || sum.MaxTimestamp != h.MaxTimestamp || h.Attributes&batch.AttrTimestampType != 0 {
		return l.appendAssignedLocked(records, leaderEpoch, OriginClient, info)
	}
	if l.tsRules {
		r := timestampRules{apply: true, now: l.opts.Now().UnixMilli(),
			before: l.opts.MessageTimestampBeforeMaxMs, after: l.opts.MessageTimestampAfterMaxMs}
		if r.window(sum.MinTimestamp, sum.MaxTimestamp, 0) != nil {
			return l.appendAssignedLocked(records, leaderEpoch, OriginClient, info)
		}
	}
	// A batch without producer state (no producer id; not a control
	// batch, refused above) stages nothing, and neither does the usual
	// batch of a stored producer (Manager.FindKnown, kept in known):
	// unless the general tail below takes them, producer state only sees
	// CommitPlain or CommitKnown. Any other batch is staged in l.stage
	// now, as validate would, and a refusal returned as it is.
	var known producerstate.Known
	if h.ProducerID >= 0 && !l.psm.FindKnown(&h, next, &known) {
		if err := l.beginLeader(v, &h, next); err != nil {
			return err
		}
	}
	last := next + slots - 1
	st := segment.Stamp{Assign: true, NextOffset: next, LeaderEpoch: leaderEpoch}
	st.Write, st.Synced = l.writes.write(l.opts.WritePath, len(records))
	active := l.active()
	pos := int64(-1)
	if !st.Write {
		if pos, err = active.AppendLeader(records, &h, next, leaderEpoch, l.opts.SegmentMs, l.jitterMs, st.Synced); err != nil {
			return err
		}
	}
	if pos < 0 {
		// A roll, a reservation step or a written append: the general
		// path's tail, on the stage and scan validate would have made
		// (staging again what FindKnown accepted: nothing has changed
		// since, so the general path accepts it too).
		if h.ProducerID < 0 || known.Accepted() {
			if err := l.beginLeader(v, &h, next); err != nil {
				return err
			}
		}
		var s scan
		s.reset(records, l.hdrBuf)
		*s.next() = h
		s.add(&h)
		err := l.appendStamped(&s, st, next, last, info)
		l.hdrBuf = s.hdrs[:0]
		return err
	}
	l.logEndOffset.Store(last + 1)
	l.waiters.logEndMoved()
	switch {
	case h.ProducerID < 0:
		l.psm.CommitPlain(last)
	case known.Accepted():
		l.psm.CommitKnown(&known)
	default:
		l.psm.Commit(&l.stage) // a client's data batch completes no transaction
	}
	info.FirstOffset, info.LastOffset = next, last
	info.MaxTimestamp, info.OffsetOfMaxTimestamp = batch.NoTimestamp, -1
	if h.MaxTimestamp > batch.NoTimestamp {
		info.MaxTimestamp, info.OffsetOfMaxTimestamp = h.MaxTimestamp, last
	}
	info.Batches, info.Records, info.Bytes = 1, int(h.RecordsCount), len(records)
	info.Position, info.SegmentBaseOffset = pos, active.BaseOffset()
	return nil
}

// AppendAsCoordinator appends batches written by the broker on behalf of
// a transaction coordinator (COMMIT/ABORT markers) or of the mirroring
// control plane (the MIRROR_PID_RESET barrier): offsets and the leader
// epoch are assigned as for a leader, control batches are allowed, and
// the producer state applies the coordinator's rules. An aborted
// transaction completed here gets its .txnindex entry.
func (l *Log) AppendAsCoordinator(records []byte, leaderEpoch int32) (AppendInfo, error) {
	var info AppendInfo
	err := l.appendAssigned(records, leaderEpoch, OriginCoordinator, &info)
	return info, err
}

// appendAssigned and appendKept fill *info (the API returns it by value;
// inside, it is written once, in place).
func (l *Log) appendAssigned(records []byte, leaderEpoch int32, origin Origin, info *AppendInfo) error {
	// No defer: the locked part is a function of its own, so the unlock
	// costs a call's return rather than a deferred call per append.
	counted := l.enterAppend()
	l.appendMu.Lock()
	err := l.appendAssignedLocked(records, leaderEpoch, origin, info)
	l.appendMu.Unlock()
	l.leaveAppend(counted)
	return err
}

func (l *Log) appendAssignedLocked(records []byte, leaderEpoch int32, origin Origin, info *AppendInfo) error {
	if l.failed != nil || l.closed.Load() { // checkWritable's test, inline
		return l.checkWritable()
	}
	if origin == OriginClient {
		var err error
		if records, err = l.recompressLocked(records); err != nil {
			return err
		}
	}
	var s scan
	if err := l.validate(records, origin, false, &s); err != nil {
		return err
	}
	if latest := l.epochs.latest(); leaderEpoch < latest {
		return fmt.Errorf("%w: append at epoch %d, latest %d", ErrStaleLeaderEpoch, leaderEpoch, latest)
	}
	if origin == OriginCoordinator && l.stage.HasBarrier() {
		if open := l.psm.OngoingTransactions(); len(open) > 0 {
			return fmt.Errorf("%w: %d open (the first from producer %d at offset %d)",
				ErrOpenTransactions, len(open), open[0].ProducerID, open[0].FirstOffset)
		}
	}
	leo := l.logEndOffset.Load()
	st := segment.Stamp{Assign: true, NextOffset: leo, LeaderEpoch: leaderEpoch}
	st.Write, st.Synced = l.writes.write(l.opts.WritePath, len(records))
	return l.appendStamped(&s, st, leo, leo+s.offsetSlots-1, info)
}

// AppendAsFollower appends batches fetched from a leader as they are:
// offsets, leader epochs and CRCs are kept. The first batch must start at
// or after the log end offset and each batch after the previous one
// (gaps, as compaction leaves them, are allowed); otherwise it fails with
// ErrUnexpectedOffset and nothing is written. Leader epochs met in the
// batches are recorded in the leader-epoch cache, and the producer state
// follows with replication rules (no sequence checks).
func (l *Log) AppendAsFollower(records []byte) (AppendInfo, error) {
	var info AppendInfo
	err := l.appendKept(records, OriginReplication, &info)
	return info, err
}

// AppendAsMirror appends batches fetched from a source cluster's
// partition as they are (offsets, leader epochs and CRCs kept), with the
// mirror origin's producer-state rules. The mirror package decides when
// this is allowed.
func (l *Log) AppendAsMirror(records []byte) (AppendInfo, error) {
	var info AppendInfo
	err := l.appendKept(records, OriginMirror, &info)
	return info, err
}

func (l *Log) appendKept(records []byte, origin Origin, info *AppendInfo) error {
	counted := l.enterAppend()
	l.appendMu.Lock()
	err := l.appendKeptLocked(records, origin, info)
	l.appendMu.Unlock()
	l.leaveAppend(counted)
	return err
}

func (l *Log) appendKeptLocked(records []byte, origin Origin, info *AppendInfo) error {
	if err := l.checkWritable(); err != nil {
		return err
	}
	var s scan
	if err := l.validate(records, origin, true, &s); err != nil {
		return err
	}
	leo := l.logEndOffset.Load()
	if s.firstBase < leo {
		return &OffsetError{Err: ErrUnexpectedOffset, Offset: s.firstBase,
			LogStartOffset: l.logStartOffset.Load(), LogEndOffset: leo}
	}
	if latest := l.epochs.latest(); s.firstEpoch < latest || s.epochsDecrease {
		return fmt.Errorf("%w: fetched batch at offset %d has epoch %d, latest %d",
			ErrStaleLeaderEpoch, s.firstBase, s.firstEpoch, latest)
	}
	var st segment.Stamp
	st.Write, st.Synced = l.writes.write(l.opts.WritePath, len(records))
	return l.appendStamped(&s, st, s.firstBase, s.lastOffset, info)
}

// appendStamped rolls if needed, records epochs, appends s.bytes, commits
// the producer state staged by validate and advances the log end offset
// (invariant order of doc.go: the bytes are in the log before the
// producer state changes). Caller holds appendMu, has validated the bytes
// into s and chose st.Write (writePolicy.write, once per append).
func (l *Log) appendStamped(s *scan, st segment.Stamp, first, last int64, info *AppendInfo) error {
	records := s.bytes
	active := l.active()
	if active.ShouldRoll(int64(len(records)), last, s.maxTimestamp, l.opts.SegmentMs, l.jitterMs, l.now) {
		if err := l.rollLocked(first); err != nil {
			return err
		}
		active = l.active()
	}
	// recordEpochs has nothing to do for a leader append at the latest
	// epoch (the usual case): tested inline.
	if !st.Assign || st.LeaderEpoch > l.epochs.latest() {
		if err := l.recordEpochs(s, st, first); err != nil {
			return err
		}
	}
	var out segment.Appended
	if err := active.Append(records, s.hdrs, st, &out); err != nil {
		return err
	}
	// The bytes are in the log: publish the end first, so that a failure
	// below can never make offsets be reused (KAFKA-7866).
	l.logEndOffset.Store(out.LastOffset + 1)
	l.waiters.logEndMoved()
	l.psm.Commit(&l.stage)
	for _, t := range l.stage.CompletedTxns() {
		if !t.Aborted {
			continue
		}
		e := index.AbortedTxn{ProducerID: t.ProducerID, FirstOffset: t.FirstOffset, LastOffset: t.LastOffset, LastStableOffset: t.LastStableOffset}
		if err := active.AppendAbortedTxn(e); err != nil {
			l.failed = err
			return err
		}
	}
	// Field by field: a composite literal is built on the stack and then
	// copied with 16-byte loads of 8-byte stores just made, which the CPU
	// cannot forward (a measurable stall per append).
	info.FirstOffset, info.LastOffset = out.FirstOffset, out.LastOffset
	info.MaxTimestamp, info.OffsetOfMaxTimestamp = out.MaxTimestamp, out.OffsetOfMaxTimestamp
	info.Batches, info.Records, info.Bytes = out.Batches, s.records, len(records)
	info.Position, info.SegmentBaseOffset = out.Position, active.BaseOffset()
	return nil
}

// recordEpochs adds new leader epochs to the cache: the leader's epoch at
// the first assigned offset, or each new epoch met in a follower's
// batches at that batch's base offset.
func (l *Log) recordEpochs(s *scan, st segment.Stamp, first int64) error {
	latest := l.epochs.latest()
	if st.Assign {
		if st.LeaderEpoch > latest {
			return l.epochs.assign(st.LeaderEpoch, first)
		}
		return nil
	}
	// Kept-offset appends have non-decreasing epochs (validate checked),
	// so the last batch's epoch says whether there is anything new.
	if s.lastEpoch <= latest {
		return nil
	}
	for i := range s.hdrs {
		if h := &s.hdrs[i]; h.PartitionLeaderEpoch > latest {
			if err := l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset); err != nil {
				return err
			}
			latest = h.PartitionLeaderEpoch
		}
	}
	return nil
}
