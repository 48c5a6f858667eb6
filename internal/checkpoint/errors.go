package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/partlog/partlog/internal/corrupt"
	"github.com/partlog/partlog/internal/fsutil"
)

// ErrCorrupt marks every failure to parse the contents of a checkpoint,
// partition.metadata or clean-shutdown file. Test with
// errors.Is(err, ErrCorrupt); the concrete error is a *CorruptionError.
var ErrCorrupt = corrupt.Sentinel("partlog/checkpoint: corrupt file")

// ErrInvalidEntry is returned (wrapped) by writers given a value that could
// not be read back: a topic name that is empty or contains white space, a
// negative version, an all-zero topic id.
var ErrInvalidEntry = errors.New("partlog/checkpoint: value cannot be written")

// CorruptionError says which file failed to parse, on which line, and
// why: Path is the file read (empty when a Parse function was given
// bytes), Line the 1-based line of the offending line or 0 when the
// problem is not tied to one line (an entry count that does not match,
// invalid UTF-8, malformed JSON); Pos is always -1. errors.Is(err,
// ErrCorrupt) holds for every *CorruptionError.
type CorruptionError = corrupt.Error

// IsCorrupt reports whether err says that a file's contents are invalid (as
// opposed to an I/O error reading it).
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

// corruptf builds a *CorruptionError; string and []byte arguments (bad
// input) are shortened to an excerpt, so a message never quotes more than
// ~100 bytes of a file.
func corruptf(line int, format string, args ...any) *CorruptionError {
	return &CorruptionError{Kind: ErrCorrupt, Pos: -1, Line: line, Reason: fmt.Sprintf(format, fsutil.Clip(args)...)}
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
		return nil, &CorruptionError{Kind: ErrCorrupt, Path: path, Pos: -1, Reason: err.Error()}
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
