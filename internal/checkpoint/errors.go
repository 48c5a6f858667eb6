package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/partlog/partlog/internal/fsutil"
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

// corruptf builds a *CorruptionError; string and []byte arguments (bad
// input) are shortened to an excerpt, so a message never quotes more than
// ~100 bytes of a file.
func corruptf(line int, format string, args ...any) *CorruptionError {
	return &CorruptionError{Line: line, Reason: fmt.Sprintf(format, fsutil.Clip(args)...)}
}

// readSmall reads a whole checkpoint-like file, at most
// fsutil.SmallFileLimit bytes: a larger one (a crashed file system leaves
// zero-filled files of any length) is a *CorruptionError naming path,
// refused before it is read. Other errors are returned as they are.
func readSmall(path string) ([]byte, error) {
	b, err := fsutil.ReadSmall(path)
	if errors.Is(err, fsutil.ErrTooLarge) {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is the CorruptionError's
		}
		return nil, &CorruptionError{Path: path, Reason: err.Error()}
	}
	return b, err
}

// withPath sets the path of a *CorruptionError in err, if there is one.
func withPath(err error, path string) error {
	var ce *CorruptionError
	if errors.As(err, &ce) {
		ce.Path = path
	}
	return err
}
