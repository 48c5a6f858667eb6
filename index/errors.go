package index

import (
	"errors"
	"fmt"

	"github.com/partlog/partlog/internal/corrupt"
)

// ErrCorrupt marks every error caused by the bytes of an index: a damaged or
// padded file, an entry that breaks the ordering rules, a short or
// unsupported entry given to a decoder. Test with errors.Is(err, ErrCorrupt)
// or IsCorrupt; the concrete error is a *CorruptionError.
var ErrCorrupt = corrupt.Sentinel("partlog/index: corrupt index")

// Errors returned by the append and maintenance methods. They describe a
// misuse by the caller, not damaged bytes.
var (
	// ErrFull is returned when appending to an index whose capacity is used
	// up (the segment should have rolled; see IsFull).
	ErrFull = errors.New("partlog/index: index is full")
	// ErrOffsetOrder is returned when an appended offset is not greater than
	// the last entry's (offset index), or smaller than it (time index); Kafka
	// raises InvalidOffsetException here.
	ErrOffsetOrder = errors.New("partlog/index: offset out of order")
	// ErrTimestampOrder is returned by TimeIndex.MaybeAppend when the
	// timestamp is smaller than the last entry's.
	ErrTimestampOrder = errors.New("partlog/index: timestamp out of order")
	// ErrOffsetOverflow is returned when offset − base offset does not fit in
	// [0, 2147483647], the relative-offset rule of formats.md §4.7.
	ErrOffsetOverflow = errors.New("partlog/index: offset out of relative range")
	// ErrBadPosition is returned when an offset-index position is negative.
	ErrBadPosition = errors.New("partlog/index: negative file position")
	// ErrReadOnly is returned by mutating methods of an index opened
	// read-only.
	ErrReadOnly = errors.New("partlog/index: index is read-only")
	// ErrClosed is returned by methods called after Close.
	ErrClosed = errors.New("partlog/index: index is closed")
	// ErrSize is returned by Create and Resize for a size that cannot hold
	// one entry, or that would drop entries.
	ErrSize = errors.New("partlog/index: invalid index size")
	// ErrPastCapacity is returned by OpenActiveOffsetIndex and
	// OpenActiveTimeIndex, without cut, for a file longer than the
	// capacity asked for.
	ErrPastCapacity = errors.New("partlog/index: index file longer than its capacity")
)

// CorruptionError says where an index's bytes break the format: Path is
// the index file (empty when a decoder was given bytes), Pos the byte
// position in it (or in the decoded slice) of the offending entry, -1 when
// the problem is the file as a whole. errors.Is(err, ErrCorrupt) holds.
type CorruptionError = corrupt.Error

// IsCorrupt reports whether err was caused by damaged index bytes, as
// opposed to an I/O error or a misuse.
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

func corruptf(path string, pos int64, format string, args ...any) error {
	return &CorruptionError{Kind: ErrCorrupt, Path: path, Pos: pos, Reason: fmt.Sprintf(format, args...)}
}
