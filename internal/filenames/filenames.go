// Package filenames is the one codec of the file names of a partition
// directory (formats.md §4.2): <20-digit offset><kind>[<transient>], the
// kinds of a segment and the producer snapshot, Kafka's transient
// suffixes of its rename protocols, and the temporary suffix of files
// being replaced. Kafka format; do not change.
package filenames

import (
	"errors"
	"math"
	"path/filepath"
	"strconv"
	"strings"
)

// File kinds (formats.md §4.2).
const (
	Log       = ".log"
	Index     = ".index"
	TimeIndex = ".timeindex"
	TxnIndex  = ".txnindex"
	Snapshot  = ".snapshot"
)

// Transient suffixes appended to a whole file name by Kafka's rename
// protocols (formats.md §4.2, recovery.md §1.5).
const (
	Deleted = ".deleted"
	Cleaned = ".cleaned"
	Swap    = ".swap"
)

// Temp is appended to a file's name while it is being replaced (written,
// fsynced, renamed over the name: a checkpoint, a producer snapshot, a
// rewritten segment file).
//
// Why this name: Kafka's partition loader (recovery.md §1.2 and §2.2)
// deletes `*.deleted` and `*.cleaned` files, completes `*.swap` files, and
// ignores everything else that is not a segment file, `*.tmp` included
// (the suffix of its own checkpoint files being rewritten); its snapshot
// listing only takes names ending in ".snapshot". So a leftover `.tmp` is
// invisible to Kafka. The alternatives were rejected: `.swap` would be
// renamed into place at load (publishing a torn file); `.cleaned` takes
// part in the "smallest .cleaned offset" rule and would make Kafka delete
// valid `.swap` files; `.deleted` is the namespace of files awaiting
// asynchronous deletion, whose deleter could unlink a file while it is
// being written. Kafka never deletes a stray `.tmp`; partlog's loader
// tidies them up after a crash.
const Temp = ".tmp"

// OffsetDigits is the width of the zero-padded offset in every name.
const OffsetDigits = 20

// ErrBadName is returned by Parse for a name that is not one of the
// segment family's.
var ErrBadName = errors.New("partlog: not a segment or snapshot file name")

// Name is a parsed file name: <20-digit offset><Kind>[<Transient>].
type Name struct {
	Offset    int64
	Kind      string // Log, Index, TimeIndex, TxnIndex or Snapshot
	Transient string // "", Deleted, Cleaned or Swap
}

// String formats the name: the offset as 20 zero-padded ASCII digits, the
// kind, the transient suffix. A negative offset (never written) formats
// with its sign and no padding, which Parse rejects.
func (n Name) String() string {
	var digits [OffsetDigits + 1]byte
	d := strconv.AppendInt(digits[:0], n.Offset, 10)
	out := make([]byte, 0, OffsetDigits+len(n.Kind)+len(n.Transient))
	if n.Offset >= 0 {
		for range OffsetDigits - len(d) {
			out = append(out, '0')
		}
	}
	out = append(out, d...)
	out = append(out, n.Kind...)
	out = append(out, n.Transient...)
	return string(out)
}

// Make returns the name of the kind file at offset.
func Make(offset int64, kind string) string {
	return Name{Offset: offset, Kind: kind}.String()
}

// Path joins dir and the name of the kind file at offset.
func Path(dir string, offset int64, kind string) string {
	return filepath.Join(dir, Make(offset, kind))
}

// Parse parses a base name made by Name.String. It requires exactly 20
// ASCII digits (formats.md §9 item 11) whose value fits an int64, a known
// kind and at most one known transient suffix.
//
// Kafka itself parses any digits before the first dot (so it would take
// "18.snapshot"); Kafka never writes such names, and partlog ignores them
// rather than guess.
func Parse(name string) (Name, error) {
	if len(name) <= OffsetDigits {
		return Name{}, ErrBadName
	}
	var v uint64
	for i := range OffsetDigits {
		c := name[i]
		if c < '0' || c > '9' {
			return Name{}, ErrBadName
		}
		d := uint64(c - '0')
		if v > (math.MaxInt64-d)/10 {
			return Name{}, ErrBadName
		}
		v = v*10 + d
	}
	rest := name[OffsetDigits:]
	n := Name{Offset: int64(v)}
	for _, t := range []string{Deleted, Cleaned, Swap} {
		if strings.HasSuffix(rest, t) {
			n.Transient = t
			rest = rest[:len(rest)-len(t)]
			break
		}
	}
	switch rest {
	case Log, Index, TimeIndex, TxnIndex, Snapshot:
		n.Kind = rest
	default:
		return Name{}, ErrBadName
	}
	return n, nil
}

// ParseSnapshot returns the offset of a producer snapshot's canonical
// name (no transient suffix); ok is false for any other name.
func ParseSnapshot(name string) (offset int64, ok bool) {
	n, err := Parse(name)
	if err != nil || n.Kind != Snapshot || n.Transient != "" {
		return 0, false
	}
	return n.Offset, true
}
