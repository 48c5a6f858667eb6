package batch

import "encoding/binary"

// The two forms a log cleaner writes a batch it does not copy whole
// (formats.md §1.11; Kafka's MemoryRecords.filterTo):
//
//   - AppendRetained: the batch with only some of its records, recompressed
//     with its codec. Base offset, last offset delta, leader epoch, producer
//     id, epoch and base sequence, timestamp type, the transactional and
//     control bits and the max timestamp are the original's, so offsets,
//     sequences and producer state read the same from the copy; each kept
//     record keeps its offset delta and its timestamp, re-encoded against
//     the new base timestamp: the delete horizon (attribute bit 6, KIP-534)
//     when one is given, else the first kept record's timestamp.
//   - AppendEmpty: Kafka's empty batch (DefaultRecordBatch.writeEmptyHeader):
//     the original's offsets, producer fields, leader epoch, timestamp type,
//     max timestamp and transactional/control bits, no records, no codec,
//     base timestamp -1, 61 bytes. A cleaner keeps it where the batch's
//     last offset or producer sequence must survive its records.
//
// One difference from Kafka, on purpose: Kafka's copy takes the largest
// kept record timestamp as its max timestamp (for CreateTime); partlog
// keeps the original's. A producer's last timestamp (its expiry clock) is
// its last batch's max timestamp, so a producer state rebuilt from the
// cleaned log then equals one rebuilt from the log before cleaning
// (package cleaner, TestCleanKeepsProducerState), and a segment's largest
// timestamp, which time retention reads, does not move back.

// AppendEmpty appends the empty form of v to dst.
func AppendEmpty(dst []byte, v View) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.BaseOffset()))
	dst = binary.BigEndian.AppendUint32(dst, HeaderSize-LogOverhead)
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.PartitionLeaderEpoch()))
	dst = append(dst, MagicV2, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(retainedAttributes(v, CompressionNone, false)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.LastOffsetDelta()))
	dst = binary.BigEndian.AppendUint64(dst, ^uint64(0)) // base timestamp -1
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.MaxTimestamp()))
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.ProducerID()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(v.ProducerEpoch()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(v.BaseSequence()))
	dst = binary.BigEndian.AppendUint32(dst, 0)
	out := View(dst[start:])
	binary.BigEndian.PutUint32(out[OffCRC:], out.ComputeCRC())
	return dst
}

// retainedAttributes are the attributes of a copy of v: its timestamp
// type, transactional and control bits, the codec c and the delete
// horizon bit (other bits are dropped, as Kafka's builder writes them).
func retainedAttributes(v View, c Compression, horizon bool) int16 {
	a := int16(c)
	if v.TimestampType() == LogAppendTime {
		a |= AttrTimestampType
	}
	if v.IsTransactional() {
		a |= AttrTransactional
	}
	if v.IsControl() {
		a |= AttrControl
	}
	if horizon {
		a |= AttrDeleteHorizon
	}
	return a
}

// AppendRetained appends to dst the copy of v that keeps record i of its
// records data (v's RecordData) when keep[i] is true; keep holds one
// entry per record and at least one is true. With hasHorizon the copy's
// base timestamp is the delete horizon. It returns ErrCorrupt (a
// *CorruptionError) when records does not decode, ErrBuild when the copy
// cannot be encoded; dst is then returned unchanged.
func (b *Builder) AppendRetained(dst []byte, v View, records []byte, keep []bool, horizon int64, hasHorizon bool) ([]byte, error) {
	if int(v.RecordsCount()) != len(keep) {
		return dst, ErrBuild
	}
	lat := v.TimestampType() == LogAppendTime
	// Effective timestamps, as Kafka's records report them: the append
	// time for LogAppendTime batches.
	oldBase := v.BaseTimestamp()
	stamp := func(r *Record) int64 {
		if lat {
			return v.MaxTimestamp()
		}
		return oldBase + r.TimestampDelta
	}
	base, kept := horizon, int32(0)
	var r Record
	for i, pos := 0, 0; i < len(keep); i++ {
		n, err := parseRecord(records[pos:], &r)
		if err != nil {
			err.Pos += int64(pos)
			return dst, err
		}
		pos += n
		if keep[i] {
			if kept == 0 && !hasHorizon {
				base = stamp(&r)
			}
			kept++
		}
	}
	if kept == 0 {
		return dst, ErrBuild
	}
	c := v.Compression()
	var h BatchHeader
	v.DecodeHeader(&h)
	h.Attributes, h.BaseTimestamp, h.RecordsCount = retainedAttributes(v, c, hasHorizon), base, int32(kept)
	start := len(dst)
	dst = h.appendNew(dst)
	body := dst
	if c != CompressionNone {
		body = b.scratch[:0]
	}
	for i, pos := 0, 0; i < len(keep); i++ {
		rec := records[pos:]
		n, _ := parseRecord(rec, &r) // decoded above
		pos += n
		if keep[i] {
			body = appendRebased(body, rec[:n], &r, stamp(&r)-base)
		}
	}
	if c != CompressionNone {
		b.scratch = body
		var err error
		if dst, err = AppendCompressed(dst, c, body); err != nil {
			return dst[:start], err
		}
	} else {
		dst = body
	}
	return finishBatch(dst, start)
}

// appendRebased appends the record rec (decoded into r) with timestamp
// delta tsDelta: its length, attributes and deltas are encoded again, its
// key, value and headers copied as they are.
func appendRebased(dst, rec []byte, r *Record, tsDelta int64) []byte {
	_, ln := ReadVarint(rec)
	body := rec[ln:]
	_, tk := ReadVarlong(body[1:])
	_, ok := ReadVarint(body[1+tk:])
	rest := body[1+tk+ok:]
	size := 1 + varlongSize(tsDelta) + VarintSize(r.OffsetDelta) + len(rest)
	dst = AppendVarint(dst, int32(size))
	dst = append(dst, byte(r.Attributes))
	dst = AppendVarlong(dst, tsDelta)
	dst = AppendVarint(dst, r.OffsetDelta)
	return append(dst, rest...)
}
