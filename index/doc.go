// Package index reads and writes the three index files of a Kafka segment,
// byte for byte as Apache Kafka does: the offset index (.index), the time
// index (.timeindex) and the transaction index (.txnindex). The normative
// description is docs/formats.md §4.3–§4.7; recovery.md §7.3 lists
// the extra checks partlog makes before trusting an index.
//
// # Byte maps
//
// All integers are big-endian. Offsets in the offset and time index are
// stored relative to the segment's base offset, as int32, so every offset of
// a segment must satisfy 0 ≤ offset − base ≤ 2147483647 (formats.md §4.7);
// the API takes and returns absolute offsets.
//
// Offset index entry, 8 bytes (formats.md §4.3):
//
//	0  relativeOffset int32   offset − base offset
//	4  position       int32   byte position of a batch start in the .log
//
// Time index entry, 12 bytes (formats.md §4.4):
//
//	0  timestamp      int64   largest timestamp (ms) up to and including offset
//	8  relativeOffset int32   offset − base offset
//
// Transaction index entry (AbortedTxn), 34 bytes (formats.md §4.6):
//
//	0  version          int16  0 (Kafka reads only byte 0; we read the int16)
//	2  producerId       int64
//	10 firstOffset      int64  first offset of the aborted transaction
//	18 lastOffset       int64  offset of the ABORT marker
//	26 lastStableOffset int64  the partition's LSO when the abort completed
//
// None of the files has a header. The offset and time indexes are
// preallocated to the maximum index size (DefaultMaxIndexBytes rounded down to
// whole entries) and memory-mapped while their segment is active, then cut to
// entries × entry size by Trim when the segment rolls or closes. An existing
// file counts every whole entry it holds (length / entry size), as Kafka
// does, so a file whose trim was lost shows zero entries at its end; Sanity
// reports them as padding and the segment then rebuilds the index.
//
// # Rules kept by the writers
//
//  1. Offset index: offsets strictly increase (Append rejects offset ≤ last);
//     positions must not be negative. The segment decides when to add an entry
//     (more than IndexIntervalBytes appended since the last one).
//  2. Time index: an entry is written only when its timestamp is greater than
//     the last one; a smaller timestamp or offset is an error. The index is
//     full one entry early, so that the final entry written at roll or close
//     (MaybeAppend with skipFullCheck) always has a slot.
//  3. Transaction index: LastOffset strictly increases and is ≥ the base
//     offset.
//
// # Concurrency
//
// Each index has one writer: a single goroutine at a time calls the mutating
// methods (Append, MaybeAppend, TruncateTo, Reset, Resize, Trim, Sync, Close).
// Any number of goroutines may call the reading methods (Lookup,
// LookupPosition, Entry, LastEntry, All, CollectAbortedTxns, Entries, IsFull,
// Sanity) at the same time as each other and as the writer:
//
//   - An append writes the entry's bytes past the published entry count (or
//     file size) and only then publishes the new count with an atomic store.
//     A reader loads the count first and reads only entries below it, so it
//     sees whole entries and never takes a lock the writer waits on.
//   - Operations that lower the count or replace the mapping (TruncateTo,
//     Resize, Trim, Close) take an exclusive lock; readers hold the shared
//     side of it while they touch the mapping. No slice into a mapping ever
//     leaves this package, so unmapping waits only for readers inside a call.
//
// A reading method called after Close behaves as on an empty index.
//
// # Example
//
//	x, err := index.CreateOffsetIndex(dir+"/00000000000000000000.index", 0, index.DefaultMaxIndexBytes)
//	if err != nil { ... }
//	err = x.Append(120, 4100)        // offset 120 starts at or after byte 4100
//	off, pos := x.Lookup(150)        // (120, 4100): scan the .log from 4100
//	err = x.Trim()                   // on roll: cut the file to 8 bytes
package index
