package main

import (
	"sort"
	"unicode/utf16"
)

// Kafka's dump tool keeps its end-of-run reports in java.util.HashMaps
// keyed by absolute path and prints them in the map's iteration order.
// partlog prints its reports in the same order, so a dump of several
// files reads the same on stderr as Kafka's.

// javaStringHash is Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1]
// over the string's UTF-16 code units, in 32-bit arithmetic.
func javaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// javaHashMapOrder returns keys (distinct, in insertion order) in the
// order a java.util.HashMap holding them iterates: by bucket, and within
// a bucket in insertion order (a resize splits each bucket keeping that
// order). The table starts at 16 buckets and doubles when it holds more
// than three quarters of its size, or when a bucket would hold a ninth
// key while the table is smaller than 64 (HashMap's treeifyBin). Buckets
// that Java turns into trees (nine keys in one bucket of a table of 64 or
// more) are iterated here in insertion order, which Java does not
// promise; dumps name far fewer files than that takes.
func javaHashMapOrder(keys []string) []string {
	spread := make([]uint32, len(keys))
	for i, k := range keys {
		h := uint32(javaStringHash(k))
		spread[i] = h ^ h>>16
	}
	capacity := uint32(16)
	for n := range keys {
		inBucket := 0
		for j := 0; j < n; j++ {
			if spread[j]&(capacity-1) == spread[n]&(capacity-1) {
				inBucket++
			}
		}
		if inBucket >= 8 && capacity < 64 {
			capacity *= 2
		}
		if 4*uint32(n+1) > 3*capacity {
			capacity *= 2
		}
	}
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		return spread[idx[a]]&(capacity-1) < spread[idx[b]]&(capacity-1)
	})
	out := make([]string, len(keys))
	for i, j := range idx {
		out[i] = keys[j]
	}
	return out
}
