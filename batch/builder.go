package batch

import (
	"errors"
)

// BatchSpec describes the header of a batch to build. The zero value is
// not useful; start from NewBatchSpec, which sets the "none" values.
type BatchSpec struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Compression          Compression
	TimestampType        TimestampType
	Transactional        bool
	Control              bool
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32

	// MaxTimestamp, when HasMaxTimestamp is set, is written as is (the
	// broker's append time for LogAppendTime, or a compacted batch's
	// original maximum). Otherwise the largest record timestamp is used
	// (-1 when there are no records).
	MaxTimestamp    int64
	HasMaxTimestamp bool
	// DeleteHorizon, when HasDeleteHorizon is set, sets attribute bit 6
	// and is stored as baseTimestamp; record deltas are taken from it.
	DeleteHorizon    int64
	HasDeleteHorizon bool
	// LastOffsetDelta, when HasLastOffsetDelta is set, is written as is
	// (a compacted batch keeps its original last offset). Otherwise it is
	// the last record's offset delta.
	LastOffsetDelta    int32
	HasLastOffsetDelta bool
}

// NewBatchSpec returns a spec for a plain, uncompressed CreateTime batch
// at baseOffset with no producer and an unknown leader epoch.
func NewBatchSpec(baseOffset int64) BatchSpec {
	return BatchSpec{
		BaseOffset:           baseOffset,
		PartitionLeaderEpoch: NoLeaderEpoch,
		ProducerID:           NoProducerID,
		ProducerEpoch:        NoProducerEpoch,
		BaseSequence:         NoSequence,
	}
}

// RecordSpec is one record to build. A nil Key or Value is written as
// null; a non-nil empty one as empty.
type RecordSpec struct {
	// OffsetDelta is used only when the builder is told the deltas are
	// explicit (compacted batches); otherwise records get 0, 1, ….
	OffsetDelta int32
	Timestamp   int64
	Key, Value  []byte
	Headers     []Header
}

// ErrBuild is returned for a spec the builder cannot encode.
var ErrBuild = errors.New("partlog/batch: cannot build batch")

// Builder encodes v2 batches. It keeps a scratch buffer for compression,
// so reusing one Builder avoids allocations; it is not safe for
// concurrent use.
type Builder struct {
	// ExplicitOffsetDeltas makes the builder use RecordSpec.OffsetDelta.
	ExplicitOffsetDeltas bool
	scratch              []byte
}

// AppendBatch appends the encoded batch to dst and returns it. The CRC is
// computed once, over the final bytes.
func (b *Builder) AppendBatch(dst []byte, spec *BatchSpec, records []RecordSpec) ([]byte, error) {
	if !spec.Compression.Valid() {
		return dst, ErrBuild
	}
	if spec.Control && spec.Compression != CompressionNone {
		return dst, ErrBuild
	}
	baseTimestamp := NoTimestamp
	maxTimestamp := NoTimestamp
	if len(records) > 0 {
		baseTimestamp = records[0].Timestamp
	}
	if spec.HasDeleteHorizon {
		baseTimestamp = spec.DeleteHorizon
	}
	lastDelta := int32(-1)
	for i := range records {
		if records[i].Timestamp > maxTimestamp {
			maxTimestamp = records[i].Timestamp
		}
		lastDelta = b.offsetDelta(records, i)
	}
	if spec.HasMaxTimestamp {
		maxTimestamp = spec.MaxTimestamp
	}
	if spec.HasLastOffsetDelta {
		lastDelta = spec.LastOffsetDelta
	}
	if lastDelta < 0 {
		lastDelta = 0
	}

	attrs := int16(spec.Compression)
	if spec.TimestampType == LogAppendTime {
		attrs |= AttrTimestampType
	}
	if spec.Transactional {
		attrs |= AttrTransactional
	}
	if spec.Control {
		attrs |= AttrControl
	}
	if spec.HasDeleteHorizon {
		attrs |= AttrDeleteHorizon
	}
	h := BatchHeader{BaseOffset: spec.BaseOffset, PartitionLeaderEpoch: spec.PartitionLeaderEpoch, Attributes: attrs,
		LastOffsetDelta: lastDelta, BaseTimestamp: baseTimestamp, MaxTimestamp: maxTimestamp,
		ProducerID: spec.ProducerID, ProducerEpoch: spec.ProducerEpoch, BaseSequence: spec.BaseSequence,
		RecordsCount: int32(len(records))}
	start := len(dst)
	dst = h.appendNew(dst)

	if spec.Compression == CompressionNone {
		for i := range records {
			dst = appendRecord(dst, &records[i], b.offsetDelta(records, i), baseTimestamp)
		}
	} else {
		b.scratch = b.scratch[:0]
		for i := range records {
			b.scratch = appendRecord(b.scratch, &records[i], b.offsetDelta(records, i), baseTimestamp)
		}
		var err error
		dst, err = AppendCompressed(dst, spec.Compression, b.scratch)
		if err != nil {
			return dst[:start], err
		}
	}
	return finishBatch(dst, start)
}

func (b *Builder) offsetDelta(records []RecordSpec, i int) int32 {
	if b.ExplicitOffsetDeltas {
		return records[i].OffsetDelta
	}
	return int32(i)
}

// appendRecord appends one record in the encoding of formats.md §1.5.
func appendRecord(dst []byte, r *RecordSpec, offsetDelta int32, baseTimestamp int64) []byte {
	tsDelta := r.Timestamp - baseTimestamp
	body := 1 + varlongSize(tsDelta) + VarintSize(offsetDelta) +
		bytesFieldSize(r.Key) + bytesFieldSize(r.Value) + VarintSize(int32(len(r.Headers)))
	for i := range r.Headers {
		body += VarintSize(int32(len(r.Headers[i].Key))) + len(r.Headers[i].Key) + bytesFieldSize(r.Headers[i].Value)
	}
	dst = AppendVarint(dst, int32(body))
	dst = append(dst, 0)
	dst = AppendVarlong(dst, tsDelta)
	dst = AppendVarint(dst, offsetDelta)
	dst = appendBytesField(dst, r.Key)
	dst = appendBytesField(dst, r.Value)
	dst = AppendVarint(dst, int32(len(r.Headers)))
	for i := range r.Headers {
		dst = AppendVarint(dst, int32(len(r.Headers[i].Key)))
		dst = append(dst, r.Headers[i].Key...)
		dst = appendBytesField(dst, r.Headers[i].Value)
	}
	return dst
}

func bytesFieldSize(b []byte) int {
	if b == nil {
		return 1
	}
	return VarintSize(int32(len(b))) + len(b)
}

func appendBytesField(dst, b []byte) []byte {
	if b == nil {
		return AppendVarint(dst, -1)
	}
	dst = AppendVarint(dst, int32(len(b)))
	return append(dst, b...)
}

func varlongSize(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// ControlSpec describes a control batch: one control record, offset
// delta 0, timestamp delta 0, no headers, uncompressed, CreateTime.
type ControlSpec struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Timestamp            int64
	// ProducerID and ProducerEpoch are the transactional producer's for
	// end-transaction markers, and -1 for the other types.
	ProducerID    int64
	ProducerEpoch int16
}

// AppendEndTxnMarkerBatch appends an ABORT (commit false) or COMMIT
// control batch for the spec's producer: attributes transactional|control,
// base sequence -1 (formats.md §3.1, §3.4).
func AppendEndTxnMarkerBatch(dst []byte, c ControlSpec, commit bool, coordinatorEpoch int32) []byte {
	t := ControlAbort
	if commit {
		t = ControlCommit
	}
	var kv [ControlKeySize + EndTxnMarkerSize]byte
	key := AppendControlKey(kv[:0], t)
	value := AppendEndTxnMarker(kv[ControlKeySize:ControlKeySize], coordinatorEpoch)
	return appendControl(dst, c, true, key, value)
}

// AppendMirrorPidResetBatch appends a MIRROR_PID_RESET control batch
// (attributes 0x0020, producer -1/-1/-1) carrying sourceClusterID.
func AppendMirrorPidResetBatch(dst []byte, c ControlSpec, sourceClusterID string) []byte {
	c.ProducerID, c.ProducerEpoch = NoProducerID, NoProducerEpoch
	var kb [ControlKeySize]byte
	value := AppendMirrorPidReset(make([]byte, 0, len(sourceClusterID)+8), sourceClusterID)
	return appendControl(dst, c, false, AppendControlKey(kb[:0], ControlMirrorPidReset), value)
}

// AppendControlBatch appends a control batch of any type with the given
// value bytes (for KRaft types and tests).
func AppendControlBatch(dst []byte, c ControlSpec, t ControlType, transactional bool, value []byte) []byte {
	var kb [ControlKeySize]byte
	return appendControl(dst, c, transactional, AppendControlKey(kb[:0], t), value)
}

func appendControl(dst []byte, c ControlSpec, transactional bool, key, value []byte) []byte {
	spec := BatchSpec{
		BaseOffset:           c.BaseOffset,
		PartitionLeaderEpoch: c.PartitionLeaderEpoch,
		Transactional:        transactional,
		Control:              true,
		ProducerID:           c.ProducerID,
		ProducerEpoch:        c.ProducerEpoch,
		BaseSequence:         NoSequence,
	}
	rec := [1]RecordSpec{{Timestamp: c.Timestamp, Key: key, Value: value}}
	var b Builder
	out, err := b.AppendBatch(dst, &spec, rec[:])
	if err != nil {
		// Unreachable: an uncompressed control batch of bounded size
		// always encodes.
		return dst
	}
	return out
}
