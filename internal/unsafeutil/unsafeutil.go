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

// Within reports whether the memory of sub lies inside the memory of
// outer (an empty sub always does). Tests use it to prove that decoders
// return views of their input instead of copies. It only compares
// addresses and keeps no reference.
func Within(sub, outer []byte) bool {
	if len(sub) == 0 {
		return true
	}
	if len(outer) == 0 {
		return false
	}
	s := uintptr(unsafe.Pointer(unsafe.SliceData(sub)))
	o := uintptr(unsafe.Pointer(unsafe.SliceData(outer)))
	return s >= o && s+uintptr(len(sub)) <= o+uintptr(len(outer))
}
