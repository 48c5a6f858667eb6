package index

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Entry sizes and defaults. Kafka format; do not change (formats.md §4.3,
// §4.4, §4.6).
const (
	// OffsetEntrySize is the size of an offset-index entry (formats.md §4.3).
	OffsetEntrySize = 8
	// TimeEntrySize is the size of a time-index entry (formats.md §4.4).
	TimeEntrySize = 12
	// TxnEntrySize is the size of a transaction-index entry (formats.md §4.6).
	TxnEntrySize = 34
	// AbortedTxnVersion is the only AbortedTxn version (formats.md §4.6).
	AbortedTxnVersion = 0
	// NoTimestamp is the timestamp Kafka reports for an empty time index.
	NoTimestamp = -1
)

// Defaults of the broker settings that size indexes (formats.md §4.3).
const (
	// DefaultMaxIndexBytes is segment.index.bytes: the preallocated size of
	// an active segment's offset and time index.
	DefaultMaxIndexBytes = 10 << 20
	// DefaultIndexIntervalBytes is index.interval.bytes: the segment adds an
	// offset-index entry once more than this many bytes were appended since
	// the last entry. The rule belongs to the segment; the constant is here
	// so both sides agree on the default.
	DefaultIndexIntervalBytes = 4096
)

// OffsetEntry is one offset-index entry with its offset made absolute.
type OffsetEntry struct {
	Offset   int64 // base offset + relative offset
	Position int32 // byte position of a batch start in the .log file
}

// TimeEntry is one time-index entry with its offset made absolute.
type TimeEntry struct {
	Timestamp int64 // largest timestamp seen up to Offset, in ms
	Offset    int64 // base offset + relative offset
}

// AbortedTxn is one transaction-index entry (formats.md §4.6).
type AbortedTxn struct {
	Version          int16 // always AbortedTxnVersion
	ProducerID       int64
	FirstOffset      int64 // first offset of the transaction; may be in an earlier segment
	LastOffset       int64 // offset of the ABORT marker
	LastStableOffset int64 // the partition's LSO when the abort completed
}

// RelativeOffset converts offset to its 32-bit form relative to baseOffset.
// It fails with ErrOffsetOverflow unless 0 ≤ offset − baseOffset ≤
// 2147483647 (formats.md §4.7).
func RelativeOffset(baseOffset, offset int64) (int32, error) {
	if !CanConvertToRelative(baseOffset, offset) {
		return 0, fmt.Errorf("%w: offset %d, base offset %d", ErrOffsetOverflow, offset, baseOffset)
	}
	return int32(offset - baseOffset), nil
}

// CanConvertToRelative reports whether offset can be stored in an index of
// a segment starting at baseOffset.
func CanConvertToRelative(baseOffset, offset int64) bool {
	d := offset - baseOffset
	// The second test rejects wrap-around of the subtraction.
	return offset >= baseOffset && d >= 0 && d <= math.MaxInt32
}

// DecodeOffsetEntry decodes the first OffsetEntrySize bytes of b.
func DecodeOffsetEntry(b []byte, baseOffset int64) (OffsetEntry, error) {
	if len(b) < OffsetEntrySize {
		return OffsetEntry{}, corruptf("", -1, "offset entry needs %d bytes, have %d", OffsetEntrySize, len(b))
	}
	return offsetEntryAt(b, 0, baseOffset), nil
}

// AppendOffsetEntry appends the encoding of e to dst.
func AppendOffsetEntry(dst []byte, baseOffset int64, e OffsetEntry) ([]byte, error) {
	rel, err := RelativeOffset(baseOffset, e.Offset)
	if err != nil {
		return dst, err
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(rel))
	return binary.BigEndian.AppendUint32(dst, uint32(e.Position)), nil
}

// DecodeTimeEntry decodes the first TimeEntrySize bytes of b.
func DecodeTimeEntry(b []byte, baseOffset int64) (TimeEntry, error) {
	if len(b) < TimeEntrySize {
		return TimeEntry{}, corruptf("", -1, "time entry needs %d bytes, have %d", TimeEntrySize, len(b))
	}
	return timeEntryAt(b, 0, baseOffset), nil
}

// AppendTimeEntry appends the encoding of e to dst.
func AppendTimeEntry(dst []byte, baseOffset int64, e TimeEntry) ([]byte, error) {
	rel, err := RelativeOffset(baseOffset, e.Offset)
	if err != nil {
		return dst, err
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.Timestamp))
	return binary.BigEndian.AppendUint32(dst, uint32(rel)), nil
}

// DecodeAbortedTxn decodes the first TxnEntrySize bytes of b. The version is
// read as an int16 and must be 0 (formats.md §4.6 and §9 item 1).
func DecodeAbortedTxn(b []byte) (AbortedTxn, error) {
	if len(b) < TxnEntrySize {
		return AbortedTxn{}, corruptf("", -1, "aborted transaction needs %d bytes, have %d", TxnEntrySize, len(b))
	}
	e := AbortedTxn{
		Version:          int16(binary.BigEndian.Uint16(b[0:])),
		ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
		FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
		LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
		LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
	}
	if e.Version != AbortedTxnVersion {
		return e, corruptf("", 0, "unexpected aborted transaction version %d", e.Version)
	}
	return e, nil
}

// AppendAbortedTxn appends the 34-byte encoding of e to dst. The version is
// written as given; Kafka readers accept only 0.
func AppendAbortedTxn(dst []byte, e AbortedTxn) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(e.Version))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(e.LastStableOffset))
}

// DecodeOffsetIndex decodes the bytes of a whole .index file. It returns
// every complete entry; the error is non-nil (a *CorruptionError) when the
// length is not a multiple of OffsetEntrySize. It does not check ordering;
// OffsetIndex.Sanity does.
func DecodeOffsetIndex(b []byte, baseOffset int64) ([]OffsetEntry, error) {
	n := len(b) / OffsetEntrySize
	out := make([]OffsetEntry, n)
	for i := range out {
		out[i] = offsetEntryAt(b, i, baseOffset)
	}
	if len(b)%OffsetEntrySize != 0 {
		return out, corruptf("", int64(n*OffsetEntrySize), "length %d is not a multiple of %d", len(b), OffsetEntrySize)
	}
	return out, nil
}

// DecodeTimeIndex decodes the bytes of a whole .timeindex file, like
// DecodeOffsetIndex.
func DecodeTimeIndex(b []byte, baseOffset int64) ([]TimeEntry, error) {
	n := len(b) / TimeEntrySize
	out := make([]TimeEntry, n)
	for i := range out {
		out[i] = timeEntryAt(b, i, baseOffset)
	}
	if len(b)%TimeEntrySize != 0 {
		return out, corruptf("", int64(n*TimeEntrySize), "length %d is not a multiple of %d", len(b), TimeEntrySize)
	}
	return out, nil
}

// DecodeTxnIndex decodes the bytes of a whole .txnindex file. It returns the
// entries before the first problem, and a *CorruptionError for an entry with
// a version other than 0 or for a partial trailing entry (which Kafka's reader
// skips silently).
func DecodeTxnIndex(b []byte) ([]AbortedTxn, error) {
	out := make([]AbortedTxn, 0, len(b)/TxnEntrySize)
	pos := 0
	for ; len(b)-pos >= TxnEntrySize; pos += TxnEntrySize {
		e, err := DecodeAbortedTxn(b[pos:])
		if err != nil {
			return out, corruptf("", int64(pos), "unexpected aborted transaction version %d", e.Version)
		}
		out = append(out, e)
	}
	if pos != len(b) {
		return out, corruptf("", int64(pos), "partial trailing entry of %d bytes", len(b)-pos)
	}
	return out, nil
}

// offsetEntryAt decodes entry i of an offset index; b must hold it.
func offsetEntryAt(b []byte, i int, baseOffset int64) OffsetEntry {
	p := i * OffsetEntrySize
	return OffsetEntry{
		Offset:   baseOffset + int64(int32(binary.BigEndian.Uint32(b[p:]))),
		Position: int32(binary.BigEndian.Uint32(b[p+4:])),
	}
}

// timeEntryAt decodes entry i of a time index; b must hold it.
func timeEntryAt(b []byte, i int, baseOffset int64) TimeEntry {
	p := i * TimeEntrySize
	return TimeEntry{
		Timestamp: int64(binary.BigEndian.Uint64(b[p:])),
		Offset:    baseOffset + int64(int32(binary.BigEndian.Uint32(b[p+8:]))),
	}
}
