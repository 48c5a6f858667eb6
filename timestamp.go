package partlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/segment"
)

// TimestampType is a topic's message.timestamp.type.
type TimestampType = batch.TimestampType

// Timestamp types of Options.MessageTimestampType.
const (
	// CreateTime keeps the producer's timestamps (the default).
	CreateTime = batch.CreateTime
	// LogAppendTime makes the leader stamp every batch with its clock.
	LogAppendTime = batch.LogAppendTime
)

// Special timestamps of Kafka's ListOffsets, for OffsetForTimestamp.
const (
	// ListLatest asks for the log end offset.
	ListLatest int64 = -1
	// ListEarliest asks for the log start offset.
	ListEarliest int64 = -2
	// ListMaxTimestamp asks for the record with the largest timestamp.
	ListMaxTimestamp int64 = -3
	// ListEarliestLocal asks for the first offset held locally: the log
	// start offset, without tiered storage.
	ListEarliestLocal int64 = -4
	// ListLatestTiered asks for the last offset in tiered storage: none
	// here.
	ListLatestTiered int64 = -5
)

// TimestampOffset is OffsetForTimestamp's answer: an offset, its
// record's timestamp (-1 for the special lookups that name an offset
// only) and the leader epoch of its batch (-1 when unknown).
type TimestampOffset = segment.TimestampOffset

// OffsetForTimestamp answers Kafka's ListOffsets for one partition. For
// ts ≥ 0 it returns the first record whose timestamp is ≥ ts: the first
// segment whose largest timestamp reaches ts is searched from its time
// index's floor entry (then the offset index, then a walk of batch
// headers; only the batch that holds the answer is decoded). The special
// values:
//
//   - ListLatest (-1): the log end offset, timestamp -1, the latest
//     leader epoch.
//   - ListEarliest (-2) and ListEarliestLocal (-4): the log start offset,
//     timestamp -1, the leader epoch in force there.
//   - ListMaxTimestamp (-3): the first record holding the log's largest
//     timestamp.
//   - ListLatestTiered (-5): found is false (no tiered storage).
//
// found is false when no record qualifies (Kafka answers offset -1). The
// lookup takes the append lock only while it reads the segments' largest
// timestamps (opening a sealed segment's time index the first time).
func (l *Log) OffsetForTimestamp(ts int64) (r TimestampOffset, found bool, err error) {
	if l.closed.Load() {
		return r, false, ErrClosed
	}
	switch ts {
	case ListLatest:
		return TimestampOffset{Timestamp: batch.NoTimestamp, Offset: l.logEndOffset.Load(), LeaderEpoch: l.epochs.latest()}, true, nil
	case ListEarliest:
		start := l.logStartOffset.Load()
		epoch := int32(-1)
		if es := l.epochs.list(); len(es) > 0 && es[0].StartOffset <= start {
			epoch = es[0].Epoch
		}
		return TimestampOffset{Timestamp: batch.NoTimestamp, Offset: start, LeaderEpoch: epoch}, true, nil
	case ListEarliestLocal:
		start := l.logStartOffset.Load()
		return TimestampOffset{Timestamp: batch.NoTimestamp, Offset: start, LeaderEpoch: l.epochs.epochForOffset(start)}, true, nil
	case ListLatestTiered:
		return r, false, nil
	}
	// A segment deleted (retention, truncation) between reading the list
	// and searching it reports segment.ErrClosed: read the list again.
	for try := 0; ; try++ {
		r, found, err = l.offsetForTimestamp(ts)
		if !errors.Is(err, segment.ErrClosed) || l.closed.Load() || try == 3 {
			return r, found, err
		}
	}
}

// offsetForTimestamp is OffsetForTimestamp for a timestamp or
// ListMaxTimestamp, over one reading of the segment list.
func (l *Log) offsetForTimestamp(ts int64) (r TimestampOffset, found bool, err error) {
	segs, maxes, offs, err := l.segmentMaxTimestamps()
	if err != nil {
		return r, false, err
	}
	if ts == ListMaxTimestamp {
		best := -1
		for i := range segs {
			if best < 0 || maxes[i] > maxes[best] {
				best = i
			}
		}
		if best < 0 || maxes[best] < 0 {
			return r, false, nil
		}
		r, found, _, err = segs[best].FindMaxTimestamp(maxes[best], offs[best], nil)
		return r, found, err
	}
	start := l.logStartOffset.Load()
	var scratch []byte
	for i, s := range segs {
		if maxes[i] < ts {
			continue
		}
		r, found, scratch, err = s.FindOffsetByTimestamp(ts, start, scratch)
		if err != nil || found {
			return r, found, err
		}
	}
	return r, false, nil
}

// segmentMaxTimestamps returns the segments and each one's largest
// timestamp and the offset holding it, under the append lock (the active
// segment's are owner-only).
func (l *Log) segmentMaxTimestamps() ([]*segment.Segment, []int64, []int64, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed.Load() {
		return nil, nil, nil, ErrClosed
	}
	segs := slices.Clone(l.segments)
	maxes := make([]int64, len(segs))
	offs := make([]int64, len(segs))
	for i, s := range segs {
		var err error
		if maxes[i], offs[i], err = s.MaxTimestampSoFar(); err != nil {
			return nil, nil, nil, err
		}
	}
	return segs, maxes, offs, nil
}

// timestampRulesApply reports whether the topic's timestamp settings
// need the clock for a leader append.
func (o *Options) timestampRulesApply() bool {
	return o.MessageTimestampType == LogAppendTime || bounded(o.MessageTimestampBeforeMaxMs) || bounded(o.MessageTimestampAfterMaxMs)
}

// bounded reports whether a timestamp window field bounds the window:
// positive, or Zero (0 and negative leave it unbounded).
func bounded(ms int64) bool {
	return ms > 0 || ms == Zero
}

// timestampRules applies message.timestamp.type and the timestamp window
// to the batches of a leader's (or coordinator's) append, in validate's
// walk (applyTimestampRules of the topic's settings).
//
// CreateTime: every batch's first and max timestamps (from its header, so
// the append stays zero-copy) must lie in [now -
// MessageTimestampBeforeMaxMs, now + MessageTimestampAfterMaxMs]; batches
// without timestamps (-1) pass, as in Kafka. A record timestamp below its
// batch's first timestamp is not looked at.
//
// LogAppendTime: the records are copied into a buffer the log keeps
// (stamped), and each batch, once validated as received, gets the
// timestamp-type attribute bit and now as its max timestamp in the copy,
// and its CRC-32C computed again (the only case where partlog computes a
// CRC on the append path); its header is updated in place, so the
// producer state and the segment see the append time.
type timestampRules struct {
	apply         bool
	now           int64
	before, after int64
	stamped       []byte
}

// timestampRules returns the rules of an append of records, reading the
// clock once. Caller holds appendMu.
func (l *Log) timestampRules(records []byte) timestampRules {
	r := timestampRules{apply: true, now: l.opts.Now().UnixMilli(),
		before: l.opts.MessageTimestampBeforeMaxMs, after: l.opts.MessageTimestampAfterMaxMs}
	if l.opts.MessageTimestampType == LogAppendTime {
		l.appendTimeBuf = append(l.appendTimeBuf[:0], records...)
		r.stamped = l.appendTimeBuf
	}
	return r
}

// batch applies the rules to the validated batch v at pos, whose header
// is h: with LogAppendTime it returns v's stamped copy (h updated),
// otherwise v after the window check.
func (r *timestampRules) batch(v batch.View, h *batch.BatchHeader, pos int64) (batch.View, error) {
	if r.stamped != nil {
		c := batch.View(r.stamped[pos : pos+int64(len(v)) : pos+int64(len(v))])
		stampLogAppendTime(c, r.now)
		h.Attributes |= batch.AttrTimestampType
		h.MaxTimestamp, h.CRC = r.now, c.CRC()
		return c, nil
	}
	lo, hi := h.BaseTimestamp, h.MaxTimestamp
	if lo == batch.NoTimestamp {
		lo = hi
	}
	return v, r.window(lo, hi, pos)
}

// window checks that timestamps lo and hi (the smallest and largest of a
// batch's, NoTimestamp when it has none) lie in the topic's window: the
// records between them do. A batch without timestamps passes, as in
// Kafka.
func (r *timestampRules) window(lo, hi, pos int64) error {
	for _, ts := range [2]int64{lo, hi} {
		if ts == batch.NoTimestamp {
			continue
		}
		if bounded(r.before) && ts < r.now-zeroOr(r.before) || bounded(r.after) && ts > r.now+zeroOr(r.after) {
			return fmt.Errorf("%w: batch at %d has timestamp %d, accepted [%d, %d]", ErrInvalidTimestamp, pos, ts,
				windowLow(r.now, r.before), windowHigh(r.now, r.after))
		}
	}
	return nil
}

// stampLogAppendTime marks a batch LogAppendTime with max timestamp ts
// and rewrites its CRC.
func stampLogAppendTime(v batch.View, ts int64) { stampMaxTimestamp(v, true, ts) }

// stampMaxTimestamp sets a batch's max timestamp to ts and its timestamp
// type to LogAppendTime or CreateTime, and rewrites its CRC.
func stampMaxTimestamp(v batch.View, logAppendTime bool, ts int64) {
	attrs := binary.BigEndian.Uint16(v[batch.OffAttributes:]) &^ uint16(batch.AttrTimestampType)
	if logAppendTime {
		attrs |= uint16(batch.AttrTimestampType)
	}
	binary.BigEndian.PutUint16(v[batch.OffAttributes:], attrs)
	binary.BigEndian.PutUint64(v[batch.OffMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(v[batch.OffCRC:], v.ComputeCRC())
}

func windowLow(now, before int64) int64 {
	if bounded(before) {
		return now - zeroOr(before)
	}
	return math.MinInt64
}

func windowHigh(now, after int64) int64 {
	if bounded(after) {
		return now + zeroOr(after)
	}
	return math.MaxInt64
}
