package batch

import "encoding/binary"

// Check validates the v2 batch at the start of b and returns a View of
// exactly its bytes (b may hold more after it). The checks are the
// batch-level ones of formats.md §1.4, in this order:
//
//  1. framing: at least 18 bytes, a length field ≥ 14, and the whole
//     entry inside b (otherwise a torn tail; a region of zero bytes is a
//     torn tail with Zero set, a zero header followed by non-zero bytes is
//     corruption);
//  2. magic 2 (0 and 1 are legacy entries, anything else corrupt);
//  3. batch size ≥ 61;
//  4. CRC-32C over [21, end);
//  5. a known codec, recordsCount ≥ 0, lastOffsetDelta ≥ 0,
//     recordsCount ≤ lastOffsetDelta+1 (compaction may remove records,
//     never add them), an uncompressed records section large enough for
//     the declared count (7 bytes per record at least), producer epoch
//     and base sequence ≥ -1.
//
// Records are not parsed; see RecordIterator and CheckRecords for that.
// Errors are *TornTailError or *CorruptionError with Position 0.
func Check(b []byte) (View, error) {
	var h BatchHeader
	return CheckAt(b, 0, &h)
}

// CheckAt is Check with positions reported relative to pos (the batch's
// position in its request or file); it leaves the decoded header in h
// (valid when the error is nil). It is the step of an Iterator, for a
// caller that walks a region itself (the append path: one call less per
// batch). A well-formed batch
// takes one pass: the header decoded, every framing and field rule in one
// expression, the CRC. Anything else goes through checkSlow, which applies
// the rules one by one in the documented order to name the first that
// fails.
func CheckAt(b []byte, pos int64, h *BatchHeader) (View, error) {
	if len(b) >= HeaderSize {
		hb := (*[HeaderSize]byte)(b)
		h.decodeFraming(hb) // DecodeHeader, inline
		h.decodeProducer(hb)
		size := int64(h.BatchLength) + LogOverhead
		if size >= HeaderSize && size <= int64(len(b)) && h.Magic == MagicV2 && fieldsValid(h, size) {
			v := View(b[:size:size])
			if Checksum(v[OffAttributes:]) == h.CRC {
				return v, nil
			}
		}
	}
	return checkSlow(b, pos, h)
}

// fieldsValid reports whether checkFields accepts h (same rules, no error).
func fieldsValid(h *BatchHeader, size int64) bool {
	c := h.Compression()
	count, lod := int64(h.RecordsCount), int64(h.LastOffsetDelta)
	return c.Valid() && count >= 0 && lod >= 0 && count <= lod+1 &&
		(c != CompressionNone || count*minRecordSize <= size-HeaderSize) &&
		h.ProducerEpoch >= NoProducerEpoch && h.BaseSequence >= NoSequence
}

// checkSlow is CheckAt rule by rule, for a batch the fast path refused.
func checkSlow(b []byte, pos int64, h *BatchHeader) (View, error) {
	n, err := frameAt(b, pos)
	if err != nil {
		return nil, err
	}
	v := View(b[:n:n])
	if m := v.Magic(); m != MagicV2 {
		if m == 0 || m == 1 {
			return nil, corruptf(pos, "legacy magic %d entry where a v2 batch is required", m)
		}
		return nil, corruptf(pos, "invalid magic %d", m)
	}
	if n < HeaderSize {
		return nil, corruptf(pos, "batch size %d is smaller than the %d-byte header", n, HeaderSize)
	}
	v.DecodeHeader(h)
	if computed := v.ComputeCRC(); h.CRC != computed {
		return nil, corruptf(pos, "crc mismatch (stored %d, computed %d)", h.CRC, computed)
	}
	if err := checkFields(h, len(v), pos); err != nil {
		return nil, err
	}
	return v, nil
}

// checkFields applies the header sanity rules (step 5 of Check) to a batch
// of size bytes whose framing, magic and CRC are known to be good.
func checkFields(h *BatchHeader, size int, pos int64) error {
	c := h.Compression()
	if !c.Valid() {
		return corruptf(pos, "invalid compression codec id %d", int8(c))
	}
	count, lod := h.RecordsCount, h.LastOffsetDelta
	if count < 0 {
		return corruptf(pos, "invalid record count %d", count)
	}
	if lod < 0 {
		return corruptf(pos, "invalid last offset delta %d", lod)
	}
	if int64(count) > int64(lod)+1 {
		return corruptf(pos, "record count %d exceeds last offset delta %d + 1", count, lod)
	}
	if c == CompressionNone && int64(count)*minRecordSize > int64(size-HeaderSize) {
		return corruptf(pos, "%d records cannot fit in a %d-byte records section", count, size-HeaderSize)
	}
	if e := h.ProducerEpoch; e < NoProducerEpoch {
		return corruptf(pos, "invalid producer epoch %d", e)
	}
	if s := h.BaseSequence; s < NoSequence {
		return corruptf(pos, "invalid base sequence %d", s)
	}
	return nil
}

// minRecordSize is the smallest encoded record: one byte each for length,
// attributes, timestamp delta, offset delta, key length, value length and
// header count.
const minRecordSize = 7

// Frame applies only the framing rules of formats.md §1.4 to the entry at
// the start of b, whatever its magic, and returns its size (12 + length).
// It is what a dump tool uses to step over legacy entries.
func Frame(b []byte) (int, error) { return frameAt(b, 0) }

func frameAt(b []byte, pos int64) (int, error) {
	if len(b) <= framingPeek {
		return 0, tornTail(b, pos, itoa(int64(len(b)))+" bytes left, fewer than the 18 an entry needs")
	}
	length := int32(binary.BigEndian.Uint32(b[OffBatchLength:]))
	if length < minEntrySize {
		if IsZero(b) {
			return 0, tornTail(b, pos, "zero padding")
		}
		if IsZero(b[:min(len(b), HeaderSize)]) {
			return 0, corruptf(pos, "zero-filled hole followed by non-zero bytes")
		}
		return 0, corruptf(pos, "entry length %d is smaller than %d", length, minEntrySize)
	}
	size := int64(length) + LogOverhead
	if size > int64(len(b)) {
		return 0, &TornTailError{Position: pos, Remaining: int64(len(b)),
			Reason: "entry of " + itoa(size) + " bytes runs past the end (" + itoa(int64(len(b))) + " bytes left)"}
	}
	return int(size), nil
}

func tornTail(b []byte, pos int64, reason string) *TornTailError {
	return &TornTailError{Position: pos, Remaining: int64(len(b)), Zero: IsZero(b), Reason: reason}
}

// isZero reports whether every byte of b is zero. It compares eight bytes
// at a time, since it may run over the preallocated tail of a segment.
func IsZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
