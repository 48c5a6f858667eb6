package segment

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
)

// File kinds of a partition directory (formats.md §4.2). Kafka format; do
// not change.
const (
	LogSuffix       = ".log"
	IndexSuffix     = ".index"
	TimeIndexSuffix = ".timeindex"
	TxnIndexSuffix  = ".txnindex"
	SnapshotSuffix  = ".snapshot"
)

// Transient suffixes appended to a whole file name by Kafka's rename
// protocols (formats.md §4.2, recovery.md §1.5).
const (
	DeletedSuffix = ".deleted"
	CleanedSuffix = ".cleaned"
	SwapSuffix    = ".swap"
)

// offsetDigits is the width of the zero-padded offset in every name.
const offsetDigits = 20

// ErrBadName is returned by ParseFileName for a name that is not one of
// partlog's or Kafka's segment-family names.
var ErrBadName = errors.New("partlog/segment: not a segment file name")

// FileName is a parsed file name: <20-digit offset><Kind>[<Transient>].
type FileName struct {
	Offset    int64
	Kind      string // LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix or SnapshotSuffix
	Transient string // "", DeletedSuffix, CleanedSuffix or SwapSuffix
}

// String formats the name: 20 ASCII digits, the kind, the transient
// suffix.
func (n FileName) String() string {
	var b [offsetDigits + 24]byte
	s := strconv.AppendInt(b[:0], n.Offset, 10)
	out := make([]byte, 0, offsetDigits+len(n.Kind)+len(n.Transient))
	for i := len(s); i < offsetDigits; i++ {
		out = append(out, '0')
	}
	out = append(out, s...)
	out = append(out, n.Kind...)
	out = append(out, n.Transient...)
	return string(out)
}

// MakeFileName returns the name of the kind file of the segment (or
// snapshot) at offset.
func MakeFileName(offset int64, kind string) string {
	return FileName{Offset: offset, Kind: kind}.String()
}

// Path joins dir and the name of the kind file at offset.
func Path(dir string, offset int64, kind string) string {
	return filepath.Join(dir, MakeFileName(offset, kind))
}

// ParseFileName parses a base name made by FileName.String. It requires
// exactly 20 ASCII digits (formats.md §9 item 11), a known kind and at
// most one known transient suffix.
func ParseFileName(name string) (FileName, error) {
	if len(name) <= offsetDigits {
		return FileName{}, ErrBadName
	}
	var off int64
	for i := 0; i < offsetDigits; i++ {
		c := name[i]
		if c < '0' || c > '9' {
			return FileName{}, ErrBadName
		}
		d := int64(c - '0')
		if off > (1<<63-1-d)/10 {
			return FileName{}, ErrBadName
		}
		off = off*10 + d
	}
	rest := name[offsetDigits:]
	n := FileName{Offset: off}
	for _, t := range []string{DeletedSuffix, CleanedSuffix, SwapSuffix} {
		if strings.HasSuffix(rest, t) {
			n.Transient = t
			rest = rest[:len(rest)-len(t)]
			break
		}
	}
	switch rest {
	case LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix, SnapshotSuffix:
		n.Kind = rest
	default:
		return FileName{}, ErrBadName
	}
	return n, nil
}
