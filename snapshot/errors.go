package snapshot

import (
	"errors"
	"fmt"
)

// ErrCorrupt marks every failure to decode bytes as a snapshot file: an
// unknown version, a header or entry array that does not fit the file, a
// trailing byte, or a CRC mismatch. Test with errors.Is(err, ErrCorrupt);
// the concrete error is a *CorruptionError. Kafka's broker deletes such a
// file and falls back to the next older snapshot (producer-state.md §5.4).
var ErrCorrupt = errors.New("partlog/snapshot: corrupt snapshot")

// ErrInvalidArgument is returned (wrapped) when a caller asks for something
// that cannot be represented in a snapshot file or its name: a negative
// offset, or more entries than an int32 count can hold.
var ErrInvalidArgument = errors.New("partlog/snapshot: invalid argument")

// CorruptionError says which snapshot failed to decode, where, and why.
// errors.Is(err, ErrCorrupt) holds for every *CorruptionError.
type CorruptionError struct {
	// Path is the file that was read; empty when Decode was given bytes
	// directly.
	Path string
	// Offset is the byte position in the file of the field that failed
	// the check (0 for the version, 2 for the CRC, 6 for the count, the
	// file length for a truncation).
	Offset int64
	// Reason is a short description, e.g. "crc mismatch (stored
	// 0xc188ecb8, computed 0x00000001)".
	Reason string
}

// Error describes the corruption, with the file (if known), where, and why.
func (e *CorruptionError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("partlog/snapshot: corrupt snapshot at byte %d: %s", e.Offset, e.Reason)
	}
	return fmt.Sprintf("partlog/snapshot: corrupt snapshot %s at byte %d: %s", e.Path, e.Offset, e.Reason)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// IsCorrupt reports whether err says that a snapshot's bytes are invalid (as
// opposed to an I/O error reading them).
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

func corruptf(offset int64, format string, args ...any) *CorruptionError {
	return &CorruptionError{Offset: offset, Reason: fmt.Sprintf(format, args...)}
}
