package dump

import (
	"sort"
	"unicode/utf16"
)

// Kafka's dump tool keeps its end-of-run reports in java.util.HashMaps
// keyed by absolute path, filled with computeIfAbsent (one call per pair
// reported), and prints them in the maps' iteration order. partlog prints
// its reports in the same order, so a dump of several files reads the same
// on stderr as Kafka's.

// javaStringHash is Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1]
// over the string's UTF-16 code units, in 32-bit arithmetic.
func javaStringHash(s string) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + int32(u)
	}
	return h
}

// javaComputeIfAbsentOrder returns the distinct keys of calls (one
// HashMap.computeIfAbsent call per element, in order) in the order the
// java.util.HashMap they filled iterates: by bucket, and within a bucket
// newest first (computeIfAbsent puts a new key at the head of its bucket,
// and a resize splits a bucket keeping its order).
//
// The table starts at 16 buckets. A call that finds more keys than three
// quarters of the table doubles it before looking (so the size after the
// last call may exceed that), and a new key joining a bucket of seven or
// more doubles it while it is smaller than 64 (treeifyBin). Buckets that
// Java turns into trees (eight keys in one bucket of a table of 64 or
// more) are ordered here as lists, which Java does not promise; dumps
// name far fewer files than that takes.
func javaComputeIfAbsentOrder(calls []string) []string {
	var keys []string
	var spread []uint32
	seen := make(map[string]bool)
	capacity := uint32(16)
	for _, k := range calls {
		if 4*uint32(len(keys)) > 3*capacity {
			capacity *= 2
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		h := uint32(javaStringHash(k))
		s := h ^ h>>16
		inBucket := 0
		for _, o := range spread {
			if o&(capacity-1) == s&(capacity-1) {
				inBucket++
			}
		}
		keys, spread = append(keys, k), append(spread, s)
		if inBucket >= 7 && capacity < 64 {
			capacity *= 2
		}
	}
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = len(keys) - 1 - i // newest first within a bucket
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
