// Package unsafeutil is the only package of partlog that imports unsafe.
// Each function states how long its result may be used.
package unsafeutil

import (
	"errors"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

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

// Mincore fills vec with a byte per page of b, whose low bit tells
// whether the page is resident (mincore(2); for a file mapping: in the
// page cache, mapped or not). b must start at a page boundary and vec
// must hold a byte for each of its pages (checked: the kernel would write
// past it). Nothing is kept.
func Mincore(b, vec []byte) error {
	if len(b) == 0 {
		return nil
	}
	page := os.Getpagesize()
	if uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(page) != 0 {
		return errors.New("partlog/unsafeutil: mincore of memory not at a page boundary")
	}
	if len(vec) < (len(b)+page-1)/page {
		return errors.New("partlog/unsafeutil: mincore vector shorter than the pages")
	}
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	if e != 0 {
		return e
	}
	return nil
}
