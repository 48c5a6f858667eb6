package mirror

import (
	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
)

// maxBatchEpoch walks the batch headers of fetched bytes without checking
// CRCs (batch.Walker) and returns the largest partition leader epoch. ok
// is false when the bytes do not frame as whole batches (the Log's
// validation then rejects them).
func maxBatchEpoch(records []byte) (top int32, ok bool) {
	top = -1
	w := batch.NewWalker(records)
	for v, more := w.Next(); more; v, more = w.Next() {
		top = max(top, v.PartitionLeaderEpoch())
	}
	return top, len(records) > 0 && w.Offset() == len(records)
}

// checkBatches validates fetched bytes as the Log would (batch.Check on
// each batch, offsets increasing), for the slow path that acts on header
// fields before appending.
func checkBatches(records []byte) error {
	it := batch.NewIterator(records, 0)
	prev := int64(-1)
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		if v.BaseOffset() <= prev {
			return &partlog.OffsetError{Err: partlog.ErrUnexpectedOffset, Offset: v.BaseOffset()}
		}
		prev = v.LastOffset()
	}
	if err := it.Err(); err != nil {
		return err
	}
	return nil
}

// findBarrier returns the offset of the first barrier at or after from in
// the log, reading from from to the log end.
func findBarrier(l *partlog.Log, from int64) (int64, bool, error) {
	off := max(from, l.LogStartOffset())
	for {
		end := l.LogEndOffset()
		if off >= end {
			return -1, false, nil
		}
		v, err := l.Read(off, 1<<20, end)
		if err != nil {
			return -1, false, err
		}
		next := off
		it := batch.NewIterator(v.Records, 0)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			if b.BaseOffset() >= from && b.IsBarrier() {
				at := b.BaseOffset()
				v.Release()
				return at, true, nil
			}
			next = max(next, b.NextOffset())
		}
		err = it.Err()
		v.Release()
		if err != nil {
			return -1, false, err
		}
		if next <= off {
			return -1, false, nil
		}
		off = next
	}
}
