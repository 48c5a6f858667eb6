package batch

import (
	"errors"
	"fmt"

	"github.com/partlog/partlog/internal/corrupt"
)

// ErrCorrupt marks every failure to decode bytes that claim to be a record
// batch (or a record, a control value, a compressed stream, a legacy
// message). Test with errors.Is(err, ErrCorrupt); the concrete error is a
// *CorruptionError that says where and why. It wraps partlog's one
// corruption marker (internal/corrupt, partlog.ErrCorrupt).
var ErrCorrupt = corrupt.Sentinel("partlog/batch: corrupt record batch")

// ErrTornTail marks a region that ends inside a batch (fewer bytes remain
// than the next batch needs) or in zero padding, which is what an
// interrupted append or a preallocated file leaves behind. It is not
// corruption: a log truncates it silently. The concrete error is a
// *TornTailError.
var ErrTornTail = errors.New("partlog/batch: torn tail")

// CorruptionError says where bytes failed to decode and why: Pos is the
// byte position of the offending batch (or record, or field) relative to
// the start of the region given to the decoder, Err an underlying cause
// (a decompressor's error). errors.Is(err, ErrCorrupt) holds for every
// *CorruptionError of this package.
type CorruptionError = corrupt.Error

// TornTailError says where a region stops holding whole batches.
// errors.Is(err, ErrTornTail) holds for every *TornTailError.
type TornTailError struct {
	// Position is where the incomplete batch (or the zero padding) starts.
	Position int64
	// Remaining is the number of bytes from Position to the end of the region.
	Remaining int64
	// Zero is true when every remaining byte is zero (preallocation padding).
	Zero bool
	// Reason is a short description ("12 bytes left, header needs 17", ...).
	Reason string
}

func (e *TornTailError) Error() string {
	return fmt.Sprintf("partlog/batch: torn tail at position %d (%d bytes): %s", e.Position, e.Remaining, e.Reason)
}

// Is reports whether target is ErrTornTail.
func (e *TornTailError) Is(target error) bool { return target == ErrTornTail }

// IsTornTail reports whether err says that a region ends in an incomplete
// batch or zero padding (as opposed to corruption).
func IsTornTail(err error) bool { return errors.Is(err, ErrTornTail) }

// IsCorrupt reports whether err marks corrupt bytes.
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

// corruptf builds a *CorruptionError at pos.
func corruptf(pos int64, format string, args ...any) *CorruptionError {
	return &CorruptionError{Kind: ErrCorrupt, Pos: pos, Reason: fmt.Sprintf(format, args...)}
}
