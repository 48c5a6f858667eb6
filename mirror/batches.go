package mirror

import (
	"encoding/binary"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
)

// maxBatchEpoch walks the batch headers of fetched bytes without checking
// CRCs and returns the largest partition leader epoch. ok is false when
// the bytes do not frame as whole batches (the Log's validation then
// rejects them).
func maxBatchEpoch(records []byte) (top int32, ok bool) {
	top = -1
	for p := 0; p < len(records); {
		if len(records)-p < batch.HeaderSize {
			return top, false
		}
		n := int(binary.BigEndian.Uint32(records[p+batch.OffBatchLength:]))
		size := batch.LogOverhead + n
		if n < batch.HeaderSize-batch.LogOverhead || size > len(records)-p {
			return top, false
		}
		if e := int32(binary.BigEndian.Uint32(records[p+batch.OffPartitionLeaderEpoch:])); e > top {
			top = e
		}
		p += size
	}
	return top, len(records) > 0
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

// IsBarrier reports whether v is a MIRROR_PID_RESET barrier: a control
// batch whose first record's key has type 7, whatever its producer fields
// or value version (producer-state.md §6.8 R1).
func IsBarrier(v batch.View) bool {
	if !v.IsControl() || v.RecordsCount() <= 0 {
		return false
	}
	data, err := v.RecordData(nil, 1<<20)
	if err != nil {
		return false
	}
	it := batch.NewRecordIterator(v, data)
	var r batch.Record
	if !it.Next(&r) {
		return false
	}
	_, typ, err := batch.ParseControlKey(r.Key)
	return err == nil && typ == batch.ControlMirrorPidReset
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
			if b.BaseOffset() >= from && IsBarrier(b) {
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
