package batch

import "encoding/binary"

// BatchHeader is the fixed 61-byte header of a v2 batch, decoded in one pass
// for code that reads several of its fields (the append path reads most
// of them: framing, rules, producer state, offsets). The View accessors
// read the same fields from the bytes one at a time; both agree by
// construction (TestHeaderMatchesView).
type BatchHeader struct {
	BaseOffset           int64
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	CRC                  uint32
	LastOffsetDelta      int32
	BaseSequence         int32
	RecordsCount         int32
	Attributes           int16
	ProducerEpoch        int16
	Magic                int8
}

// DecodeHeader decodes the header of v into h. v must hold at least
// HeaderSize bytes (a View from Check or an Iterator does).
func (v View) DecodeHeader(h *BatchHeader) {
	b := (*[HeaderSize]byte)(v)
	h.decodeFraming(b)
	h.decodeProducer(b)
}

// decodeFraming decodes the fields up to the last offset delta, and
// decodeProducer the rest: DecodeHeader's two halves, each small enough
// for the compiler to inline (the whole is not), so that CheckAt, on
// every append, decodes without a call.
func (h *BatchHeader) decodeFraming(b *[HeaderSize]byte) {
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[OffBaseOffset:]))
	h.BatchLength = int32(binary.BigEndian.Uint32(b[OffBatchLength:]))
	h.PartitionLeaderEpoch = int32(binary.BigEndian.Uint32(b[OffPartitionLeaderEpoch:]))
	h.Magic = int8(b[OffMagic])
	h.CRC = binary.BigEndian.Uint32(b[OffCRC:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[OffAttributes:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[OffLastOffsetDelta:]))
}

// decodeProducer decodes the fields from the base timestamp on.
func (h *BatchHeader) decodeProducer(b *[HeaderSize]byte) {
	h.BaseTimestamp = int64(binary.BigEndian.Uint64(b[OffBaseTimestamp:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[OffMaxTimestamp:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[OffProducerID:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[OffProducerEpoch:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[OffBaseSequence:]))
	h.RecordsCount = int32(binary.BigEndian.Uint32(b[OffRecordsCount:]))
}

// Size is the whole batch size in bytes, 12+BatchLength.
func (h *BatchHeader) Size() int { return LogOverhead + int(h.BatchLength) }

// Compression is the codec of the records section.
func (h *BatchHeader) Compression() Compression {
	return Compression(h.Attributes & AttrCompressionMask)
}

// IsControl reports the control attribute bit.
func (h *BatchHeader) IsControl() bool { return h.Attributes&AttrControl != 0 }

// IsTransactional reports the transactional attribute bit.
func (h *BatchHeader) IsTransactional() bool { return h.Attributes&AttrTransactional != 0 }

// LastOffset is BaseOffset+LastOffsetDelta.
func (h *BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// LastSequence is the sequence of the last offset slot, with int32
// wrap-around, or -1 when the batch carries no sequence.
func (h *BatchHeader) LastSequence() int32 {
	if h.BaseSequence == NoSequence {
		return NoSequence
	}
	return IncrementSequence(h.BaseSequence, h.LastOffsetDelta)
}

// appendNew appends h as the header of a batch being built, its length
// and CRC zero: finishBatch fills them once the records follow.
func (h *BatchHeader) appendNew(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.BaseOffset))
	dst = append(dst, 0, 0, 0, 0) // batchLength
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.PartitionLeaderEpoch))
	dst = append(dst, MagicV2, 0, 0, 0, 0) // magic, crc
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Attributes))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.LastOffsetDelta))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.BaseTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.MaxTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.ProducerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.ProducerEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.BaseSequence))
	return binary.BigEndian.AppendUint32(dst, uint32(h.RecordsCount))
}

// finishBatch fills in the length and CRC of the batch built in
// dst[start:] (its header, then its records): the last step of every
// batch the package writes. A batch too long for its length field gives
// ErrBuild and dst without it.
func finishBatch(dst []byte, start int) ([]byte, error) {
	size := len(dst) - start
	if size-LogOverhead > maxBatchLength {
		return dst[:start], ErrBuild
	}
	v := View(dst[start:])
	binary.BigEndian.PutUint32(v[OffBatchLength:], uint32(size-LogOverhead))
	binary.BigEndian.PutUint32(v[OffCRC:], v.ComputeCRC())
	return dst, nil
}
