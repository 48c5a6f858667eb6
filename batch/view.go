package batch

import (
	"encoding/binary"
	"math"
)

// Byte positions of the v2 batch header fields (formats.md §1.1).
// Kafka format; do not change.
const (
	OffBaseOffset           = 0
	OffBatchLength          = 8
	OffPartitionLeaderEpoch = 12
	OffMagic                = 16
	OffCRC                  = 17
	OffAttributes           = 21
	OffLastOffsetDelta      = 23
	OffBaseTimestamp        = 27
	OffMaxTimestamp         = 35
	OffProducerID           = 43
	OffProducerEpoch        = 51
	OffBaseSequence         = 53
	OffRecordsCount         = 57

	// HeaderSize is the size of a v2 batch header, RECORD_BATCH_OVERHEAD.
	HeaderSize = 61
	// LogOverhead is the offset+length prefix common to every entry of a
	// .log file, whatever its magic (LOG_OVERHEAD).
	LogOverhead = 12
	// MagicV2 is the only magic this engine writes.
	MagicV2 = 2
	// framingPeek is how many bytes the framing rule reads before it
	// decides anything: offset, length, leader epoch/CRC, magic.
	framingPeek = 17
	// minEntrySize is the smallest legal length field (a legacy v0
	// message with null key and value).
	minEntrySize = 14
)

// Attribute bits (formats.md §1.2). Kafka format; do not change.
const (
	AttrCompressionMask = 0x07
	AttrTimestampType   = 0x08
	AttrTransactional   = 0x10
	AttrControl         = 0x20
	AttrDeleteHorizon   = 0x40
)

// Sentinels for "none" (formats.md §0.1).
const (
	NoProducerID    int64 = -1
	NoProducerEpoch int16 = -1
	NoSequence      int32 = -1
	NoTimestamp     int64 = -1
	NoLeaderEpoch   int32 = -1
	MaxSequence           = math.MaxInt32
	maxBatchLength        = math.MaxInt32 - LogOverhead
)

// Compression is a codec id from the attributes (formats.md §1.10).
type Compression int8

// Codec ids. Kafka format; do not change.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

var compressionNames = [...]string{"none", "gzip", "snappy", "lz4", "zstd"}

// String returns the name Kafka's tools print ("none", "gzip", ...).
func (c Compression) String() string {
	if c >= 0 && int(c) < len(compressionNames) {
		return compressionNames[c]
	}
	return "unknown(" + itoa(int64(c)) + ")"
}

// Valid reports whether c is a codec id Kafka knows (0..4).
func (c Compression) Valid() bool { return c >= 0 && c <= CompressionZstd }

// TimestampType says how record timestamps are to be read.
type TimestampType int8

const (
	// NoTimestampType is reported for magic 0 messages.
	NoTimestampType TimestampType = -1
	// CreateTime: timestamps are set by the producer.
	CreateTime TimestampType = 0
	// LogAppendTime: the broker's append time, stored in maxTimestamp;
	// every record reports it.
	LogAppendTime TimestampType = 1
)

// String returns the name Kafka's tools print.
func (t TimestampType) String() string {
	switch t {
	case CreateTime:
		return "CreateTime"
	case LogAppendTime:
		return "LogAppendTime"
	default:
		return "NoTimestampType"
	}
}

// View is one v2 record batch: exactly 12+batchLength bytes, aliasing the
// caller's memory (a produce request, a mapped segment). Accessors read
// the header straight from those bytes and never allocate or copy.
//
// A View returned by Check, Iterator or Builder has been validated (its
// length covers at least the header and matches batchLength). A View made
// by converting arbitrary bytes must be checked with Check before its
// accessors are used: on a slice shorter than HeaderSize they panic, as
// any out-of-range slice access does.
type View []byte

func (v View) i16(off int) int16 { return int16(binary.BigEndian.Uint16(v[off:])) }
func (v View) i32(off int) int32 { return int32(binary.BigEndian.Uint32(v[off:])) }
func (v View) i64(off int) int64 { return int64(binary.BigEndian.Uint64(v[off:])) }

// BaseOffset is the offset of the first record slot of the batch.
func (v View) BaseOffset() int64 { return v.i64(OffBaseOffset) }

// BatchLength is the stored length field: size of the batch minus 12.
func (v View) BatchLength() int32 { return v.i32(OffBatchLength) }

// Size is the whole batch size in bytes, 12+BatchLength.
func (v View) Size() int { return LogOverhead + int(v.BatchLength()) }

// PartitionLeaderEpoch is the epoch of the leader that appended the batch.
func (v View) PartitionLeaderEpoch() int32 { return v.i32(OffPartitionLeaderEpoch) }

// Magic is the format version byte (2 for a View that passed Check).
func (v View) Magic() int8 { return int8(v[OffMagic]) }

// CRC is the stored CRC-32C of bytes [21, end).
func (v View) CRC() uint32 { return binary.BigEndian.Uint32(v[OffCRC:]) }

// Attributes is the raw attributes field.
func (v View) Attributes() int16 { return v.i16(OffAttributes) }

// attrs is the low byte, the only one Kafka reads (formats.md §1.2).
func (v View) attrs() byte { return v[OffAttributes+1] }

// Compression is the codec of the records section.
func (v View) Compression() Compression { return Compression(v.attrs() & AttrCompressionMask) }

// TimestampType is CreateTime or LogAppendTime.
func (v View) TimestampType() TimestampType {
	if v.attrs()&AttrTimestampType != 0 {
		return LogAppendTime
	}
	return CreateTime
}

// IsTransactional reports the transactional attribute bit.
func (v View) IsTransactional() bool { return v.attrs()&AttrTransactional != 0 }

// IsControl reports the control attribute bit.
func (v View) IsControl() bool { return v.attrs()&AttrControl != 0 }

// HasDeleteHorizon reports attribute bit 6: BaseTimestamp holds the
// delete horizon set by the log cleaner.
func (v View) HasDeleteHorizon() bool { return v.attrs()&AttrDeleteHorizon != 0 }

// DeleteHorizon returns the delete horizon and true when bit 6 is set.
func (v View) DeleteHorizon() (int64, bool) {
	if v.HasDeleteHorizon() {
		return v.BaseTimestamp(), true
	}
	return 0, false
}

// LastOffsetDelta is lastOffset-baseOffset.
func (v View) LastOffsetDelta() int32 { return v.i32(OffLastOffsetDelta) }

// BaseTimestamp is the first record's timestamp (or the delete horizon).
func (v View) BaseTimestamp() int64 { return v.i64(OffBaseTimestamp) }

// MaxTimestamp is the largest record timestamp, or the append time for
// LogAppendTime batches.
func (v View) MaxTimestamp() int64 { return v.i64(OffMaxTimestamp) }

// ProducerID is the idempotent/transactional producer id, or -1.
func (v View) ProducerID() int64 { return v.i64(OffProducerID) }

// ProducerEpoch is the producer epoch, or -1.
func (v View) ProducerEpoch() int16 { return v.i16(OffProducerEpoch) }

// BaseSequence is the first record's sequence, or -1.
func (v View) BaseSequence() int32 { return v.i32(OffBaseSequence) }

// RecordsCount is the declared number of records.
func (v View) RecordsCount() int32 { return v.i32(OffRecordsCount) }

// LastOffset is BaseOffset+LastOffsetDelta.
func (v View) LastOffset() int64 { return v.BaseOffset() + int64(v.LastOffsetDelta()) }

// NextOffset is LastOffset+1.
func (v View) NextOffset() int64 { return v.LastOffset() + 1 }

// LastSequence is the sequence of the last offset slot, with int32
// wrap-around, or -1 when the batch carries no sequence.
func (v View) LastSequence() int32 {
	s := v.BaseSequence()
	if s == NoSequence {
		return NoSequence
	}
	return IncrementSequence(s, v.LastOffsetDelta())
}

// HasProducerID reports whether the batch names a producer.
func (v View) HasProducerID() bool { return v.ProducerID() >= 0 }

// RecordsSection returns the records section as stored (compressed when
// Compression() != CompressionNone). It aliases v.
func (v View) RecordsSection() []byte { return v[HeaderSize:] }

// SetBaseOffset writes the base offset in place. The field lies outside
// the CRC, so the batch stays valid.
func (v View) SetBaseOffset(o int64) { binary.BigEndian.PutUint64(v[OffBaseOffset:], uint64(o)) }

// SetLastOffset writes baseOffset = o - lastOffsetDelta in place, as
// Kafka's setLastOffset does.
func (v View) SetLastOffset(o int64) { v.SetBaseOffset(o - int64(v.LastOffsetDelta())) }

// SetPartitionLeaderEpoch writes the partition leader epoch in place.
// The field lies outside the CRC, so the batch stays valid.
func (v View) SetPartitionLeaderEpoch(e int32) {
	binary.BigEndian.PutUint32(v[OffPartitionLeaderEpoch:], uint32(e))
}

// ComputeCRC computes the CRC-32C of bytes [21, end) of v.
func (v View) ComputeCRC() uint32 { return Checksum(v[OffAttributes:]) }

// IncrementSequence adds delta to a sequence number, wrapping from
// MaxInt32 to 0 as Kafka's DefaultRecordBatch.incrementSequence does.
func IncrementSequence(seq, delta int32) int32 {
	if seq > MaxSequence-delta {
		return delta - (MaxSequence - seq) - 1
	}
	return seq + delta
}

// DecrementSequence is the inverse of IncrementSequence.
func DecrementSequence(seq, delta int32) int32 {
	if seq-delta < 0 {
		return MaxSequence - (delta - seq) + 1
	}
	return seq - delta
}

// itoa formats v without fmt (keeps String methods allocation-light).
func itoa(v int64) string {
	var b [20]byte
	i := len(b)
	neg := v < 0
	u := uint64(v)
	if neg {
		u = uint64(-v)
	}
	for {
		i--
		b[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			break
		}
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
