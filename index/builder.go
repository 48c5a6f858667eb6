package index

// Builder computes a segment's offset and time index from its batches
// with Kafka's per-batch rule (recovery.md §2.6), one batch at a time in
// position order: an offset entry for a batch that starts more than
// interval bytes after the last indexed batch, a time entry beside it when
// the largest timestamp grew, and (Finish) a final time entry with the
// segment's largest timestamp, as a roll writes. Recovery rebuilds indexes
// with it and the cleaner indexes the segments it writes with it, so a
// cleaned segment's indexes are the ones a rebuild would make.
type Builder struct {
	base, interval      int64
	offsets, times      []byte
	maxTs, offMax       int64
	lastTs, lastIndexed int64
}

// NewBuilder returns a Builder for the segment at base with Kafka's
// index.interval.bytes interval (0: every batch but the first).
func NewBuilder(base, interval int64) Builder {
	return Builder{base: base, interval: interval, offsets: []byte{}, times: []byte{},
		maxTs: NoTimestamp, offMax: base, lastTs: NoTimestamp}
}

// Add accounts for the batch at position pos whose last offset and
// largest timestamp are given. Offsets must fit the segment's relative
// range (a batch that does not is left out of the indexes).
func (b *Builder) Add(pos, lastOffset, maxTimestamp int64) {
	if maxTimestamp > b.maxTs {
		b.maxTs, b.offMax = maxTimestamp, lastOffset
	}
	if pos-b.lastIndexed > b.interval {
		b.offsets, _ = AppendOffsetEntry(b.offsets, b.base, OffsetEntry{Offset: lastOffset, Position: int32(pos)})
		if b.maxTs > b.lastTs {
			b.times, _ = AppendTimeEntry(b.times, b.base, TimeEntry{Timestamp: b.maxTs, Offset: b.offMax})
			b.lastTs = b.maxTs
		}
		b.lastIndexed = pos
	}
}

// Finish returns the two indexes of the batches added; b is not used
// afterwards.
func (b *Builder) Finish() (offsets, times []byte) {
	if b.maxTs > b.lastTs {
		b.times, _ = AppendTimeEntry(b.times, b.base, TimeEntry{Timestamp: b.maxTs, Offset: b.offMax})
	}
	return b.offsets, b.times
}
