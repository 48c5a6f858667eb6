// Package unsafeutil is the only package of partlog that imports unsafe.
// Each function states how long its result may be used.
package unsafeutil

import "unsafe"

// String returns a string that shares b's memory, without copying. The
// string is valid only while b is neither modified nor released: for a
// slice of a mapped segment, until the reader's reference is released.
// Use it to look up or compare (map keys, header names) without
// allocating; copy with strings.Clone to keep the result.
func String(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Bytes returns the bytes of s without copying. The result must never be
// written to (strings are immutable, and literals live in read-only
// memory); it is valid as long as s is.
func Bytes(s string) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
