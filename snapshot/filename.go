package snapshot

import (
	"math"
	"strconv"
)

// Kafka format; do not change (formats.md §4.2, §5.1).
const (
	// Suffix ends every snapshot file name.
	Suffix = ".snapshot"
	// offsetDigits is the width of the zero-padded offset in a name.
	offsetDigits = 20
	// nameLen is the length of a canonical snapshot file name.
	nameLen = offsetDigits + len(Suffix)
)

// TempSuffix is appended to a snapshot's name while Write is producing it:
// `00000000000000000018.snapshot.tmp`.
//
// Why this name: Kafka's partition loader (formats.md §4.2,
// recovery.md §1.2 and §2.2) deletes `*.deleted` and `*.cleaned` files,
// completes `*.swap` files, and ignores everything else that is not a
// segment file — `*.tmp` included (it is the suffix of checkpoint files
// being rewritten). Its snapshot listing only takes names ending in
// ".snapshot". So a left-over `.snapshot.tmp` is invisible to Kafka and to
// List. The alternatives were rejected: `.swap` would be renamed into place
// at load (publishing a torn file); `.cleaned` takes part in the "smallest
// .cleaned offset" rule and would make Kafka delete valid `.swap` files;
// `.deleted` is the namespace of files awaiting asynchronous deletion, whose
// deleter could unlink a snapshot while it is being written. Kafka never
// deletes a stray `.tmp`, so RemoveTempFiles exists for our loader to tidy
// up after a crash.
const TempSuffix = ".tmp"

// FileName returns the snapshot file name for offset: the offset as 20
// zero-padded decimal digits followed by ".snapshot", e.g.
// "00000000000000000018.snapshot". Offsets must be >= 0; for a negative
// offset the result carries a sign and ParseFileName rejects it.
func FileName(offset int64) string {
	if offset < 0 {
		return strconv.FormatInt(offset, 10) + Suffix
	}
	var buf [nameLen]byte
	b := buf[:0]
	var digits [offsetDigits]byte
	d := strconv.AppendInt(digits[:0], offset, 10)
	for range offsetDigits - len(d) {
		b = append(b, '0')
	}
	b = append(b, d...)
	return string(append(b, Suffix...))
}

// ParseFileName returns the offset in a canonical snapshot file name (a base
// name, not a path). ok is false unless name is exactly 20 ASCII digits
// followed by ".snapshot" and the value fits in an int64.
//
// Kafka itself parses any digits before the first dot (so it would also
// take "18.snapshot"); Kafka never writes such names, and this package
// ignores them rather than guess.
func ParseFileName(name string) (offset int64, ok bool) {
	if len(name) != nameLen || name[offsetDigits:] != Suffix {
		return 0, false
	}
	var v uint64
	for i := range offsetDigits {
		c := name[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxInt64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return int64(v), true
}
