package partlog

import (
	"sync"

	"github.com/partlog/partlog/segment"
)

// ReadView is the result of Read: whole batches, aliasing the segment's
// mapping. Records stays valid until Release, even if the log is
// truncated, rolls, deletes the segment or closes meanwhile; after
// Release it must not be touched. A view is not safe for concurrent
// Release.
type ReadView struct {
	// Records holds whole batches, possibly none: it is never nil, so a
	// fetch response encoding it writes a record-set size of 0, not -1
	// (which librdkafka rejects).
	Records []byte
	// Offset is the offset asked for; the first batch may start below it
	// (the batch that holds it).
	Offset int64
	// SegmentBaseOffset and Position locate Records in the log.
	SegmentBaseOffset int64
	Position          int64
	rng               segment.Range
}

// noRecords backs the empty Records of an empty view.
var noRecords = []byte{}

var viewPool = sync.Pool{New: func() any { return new(ReadView) }}

// Release gives the view's bytes back. The view itself is recycled: do not
// use it afterwards.
func (v *ReadView) Release() {
	if v == nil {
		return
	}
	v.rng.Release()
	*v = ReadView{}
	viewPool.Put(v)
}

// Read returns whole batches starting with the one that holds offset,
// never including a batch whose last offset is at or above upTo (pass the
// high watermark, the last stable offset or LogEndOffset), and at most
// maxBytes unless the first batch alone is larger (it is then returned
// whole, as Kafka does). offset must lie in [LogStartOffset,
// LogEndOffset]; at the log end, or when upTo ≤ offset, the view is
// empty. The caller must Release the view.
func (l *Log) Read(offset int64, maxBytes int, upTo int64) (*ReadView, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed.Load() {
		return nil, ErrClosed
	}
	start, end := l.logStartOffset.Load(), l.logEndOffset.Load()
	if offset < start || offset > end {
		return nil, &OffsetError{Err: ErrOffsetOutOfRange, Offset: offset, LogStartOffset: start, LogEndOffset: end}
	}
	v := viewPool.Get().(*ReadView)
	v.Offset = offset
	v.Records = noRecords[:0:0] // empty, never nil (a nil set encodes as size -1)
	upTo = min(upTo, end)
	if offset >= upTo {
		return v, nil
	}
	// The segment with the greatest base offset ≤ offset, then later ones
	// if it holds nothing at or after offset (compaction gaps).
	i := len(l.segments) - 1
	for i > 0 && l.segments[i].BaseOffset() > offset {
		i--
	}
	for ; i < len(l.segments); i++ {
		s := l.segments[i]
		if s.BaseOffset() >= upTo {
			break
		}
		r, err := s.Read(offset, int64(maxBytes), upTo)
		if err != nil {
			viewPool.Put(v)
			return nil, err
		}
		if r.Bytes != nil {
			v.Records, v.Position, v.SegmentBaseOffset, v.rng = r.Bytes, r.Position, s.BaseOffset(), r
			return v, nil
		}
	}
	return v, nil
}
