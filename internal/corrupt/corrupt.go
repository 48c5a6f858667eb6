// Package corrupt is partlog's one corruption marker: every error caused
// by bytes that break their format (a record batch, an index, a producer
// snapshot, a checkpoint, mirror.checkpoint, the group store) answers
// errors.Is(err, ErrCorrupt), whichever package found it. Each package
// keeps its own sentinel (batch.ErrCorrupt, index.ErrCorrupt, ...) made
// with Sentinel, so errors.Is against it keeps working too, and reports
// where and why with an *Error. The root package re-exports the marker as
// partlog.ErrCorrupt.
package corrupt

import (
	"errors"
	"fmt"
)

// ErrCorrupt is the marker.
var ErrCorrupt = errors.New("partlog: corrupt data")

// Sentinel returns a package's corruption sentinel: an error with text msg
// (also the start of its *Error messages) for which errors.Is(s,
// ErrCorrupt) holds.
func Sentinel(msg string) error { return &sentinel{msg: msg} }

type sentinel struct{ msg string }

func (s *sentinel) Error() string { return s.msg }
func (s *sentinel) Unwrap() error { return ErrCorrupt }

// Error says which bytes failed to decode, where and why. errors.Is(err,
// Kind) and errors.Is(err, ErrCorrupt) hold for it, and errors.Is and
// errors.As reach Err through it.
type Error struct {
	// Kind is the sentinel of the package that decoded the bytes.
	Kind error
	// Path is the file read; empty when bytes were decoded directly.
	Path string
	// Pos is the byte position of the offending batch, entry or field,
	// relative to the start of the file or of the bytes given to the
	// decoder; -1 when the problem is not tied to a byte (a line, the
	// file as a whole).
	Pos int64
	// Line is the 1-based line of a text file, 0 when none.
	Line int
	// Reason describes the problem in a few words, e.g. "crc mismatch
	// (stored 443998212, computed 0)" (CRCs in unsigned decimal, as Kafka
	// prints them).
	Reason string
	// Err, if not nil, is an underlying cause (a decompressor's error).
	Err error
}

// Error is "<Kind>[ <Path>][ at byte <Pos>][, line <Line>]: <Reason>[: <Err>]".
func (e *Error) Error() string {
	msg := "partlog: corrupt data"
	if e.Kind != nil {
		msg = e.Kind.Error()
	}
	if e.Path != "" {
		msg += " " + e.Path
	}
	if e.Pos >= 0 && e.Line == 0 {
		msg += fmt.Sprintf(" at byte %d", e.Pos)
	}
	if e.Line > 0 {
		msg += fmt.Sprintf(", line %d", e.Line)
	}
	msg += ": " + e.Reason
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the package's sentinel and the cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// Is reports whether err marks corrupt bytes, whichever package found
// them.
func Is(err error) bool { return errors.Is(err, ErrCorrupt) }
