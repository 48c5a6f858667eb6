package snapshot

import (
	"errors"
	"fmt"

	"github.com/partlog/partlog/internal/corrupt"
)

// ErrCorrupt marks every failure to decode bytes as a snapshot file: an
// unknown version, a header or entry array that does not fit the file, a
// trailing byte, or a CRC mismatch. Test with errors.Is(err, ErrCorrupt);
// the concrete error is a *CorruptionError. Kafka's broker deletes such a
// file and falls back to the next older snapshot (producer-state.md §5.4).
var ErrCorrupt = corrupt.Sentinel("partlog/snapshot: corrupt snapshot")

// ErrInvalidArgument is returned (wrapped) when a caller asks for something
// that cannot be represented in a snapshot file or its name: a negative
// offset, or more entries than an int32 count can hold.
var ErrInvalidArgument = errors.New("partlog/snapshot: invalid argument")

// CorruptionError says which snapshot failed to decode, where, and why:
// Path is the file (empty when Decode was given bytes), Pos the byte
// position of the field that failed the check (0 for the version, 2 for
// the CRC, 6 for the count, the file length for a truncation).
// errors.Is(err, ErrCorrupt) holds for every *CorruptionError.
type CorruptionError = corrupt.Error

// IsCorrupt reports whether err says that a snapshot's bytes are invalid (as
// opposed to an I/O error reading them).
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

func corruptf(offset int64, format string, args ...any) *CorruptionError {
	return &CorruptionError{Kind: ErrCorrupt, Pos: offset, Reason: fmt.Sprintf(format, args...)}
}
