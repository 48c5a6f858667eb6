package checkpoint

import (
	"errors"
	"fmt"
)

// ErrCorrupt marks every failure to parse the contents of a checkpoint,
// partition.metadata or clean-shutdown file. Test with
// errors.Is(err, ErrCorrupt); the concrete error is a *CorruptionError.
var ErrCorrupt = errors.New("partlog/checkpoint: corrupt file")

// ErrInvalidEntry is returned (wrapped) by writers given a value that could
// not be read back: a topic name that is empty or contains white space, a
// negative version, an all-zero topic id.
var ErrInvalidEntry = errors.New("partlog/checkpoint: value cannot be written")

// CorruptionError says which file failed to parse, on which line, and why.
// errors.Is(err, ErrCorrupt) holds for every *CorruptionError.
type CorruptionError struct {
	// Path is the file that was read; empty when a Parse function was given
	// bytes directly.
	Path string
	// Line is the 1-based line number of the offending line, or 0 when the
	// problem is not tied to one line (an entry count that does not match,
	// invalid UTF-8, malformed JSON).
	Line int
	// Reason is a short description, e.g. `malformed line "orders 0"`.
	Reason string
}

// Error describes the corruption, with the file (if known), where, and why.
func (e *CorruptionError) Error() string {
	where := e.Path
	if where == "" {
		where = "input"
	}
	if e.Line > 0 {
		return fmt.Sprintf("partlog/checkpoint: corrupt %s, line %d: %s", where, e.Line, e.Reason)
	}
	return fmt.Sprintf("partlog/checkpoint: corrupt %s: %s", where, e.Reason)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// IsCorrupt reports whether err says that a file's contents are invalid (as
// opposed to an I/O error reading it).
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

func corruptf(line int, format string, args ...any) *CorruptionError {
	return &CorruptionError{Line: line, Reason: fmt.Sprintf(format, args...)}
}

// withPath sets the path of a *CorruptionError in err, if there is one.
func withPath(err error, path string) error {
	var ce *CorruptionError
	if errors.As(err, &ce) {
		ce.Path = path
	}
	return err
}
