// Package segment is one segment of a partition log: a .log file of
// record batches and its .index, .timeindex and .txnindex (formats.md §4),
// appended to while active, read by many readers, sealed at roll.
//
// Files by concern: segment.go (the type, Create, OpenSealed), open.go
// (opening an active segment, Pending and its Tail for recovery),
// append.go (Append, AppendLeader, the roll rule, index cadence),
// reserve.go (disk reservation, mapping length, prefault policy),
// mapping.go (references on the mapping, Range), read.go (Read, Scan),
// lookup.go (timestamps, aborted transactions), truncate.go, lifecycle.go
// (Seal, Close, Flush, Delete). File names are internal/filenames'.
//
// The .log bytes:
//
//   - Active segment: a writable mapping of the file, stored into (or
//     written with pwritev, Stamp.Write) only within its reserved prefix.
//     The published size (an atomic) is stored after a whole append has
//     been copied and its headers stamped, so a reader that loads it
//     never sees a partly written batch.
//   - Sealed segment: the file trimmed to its data, mapped read-only on
//     demand and unmapped again by the owner's cache (Unmap).
//
// Disk reservation: the active .log's length is SegmentBytes from the
// start (a hole past the reservation, mmapfile.Options.Ahead), but its blocks
// are reserved with fallocate in steps ahead of the write position, so
// disk use grows with the data and a full disk is the error of the append
// that needed the room, never a SIGBUS or a lost writeback: no store or
// write reaches past the reserved prefix, Append reserves first. A new
// segment reserves ReserveMinBytes and is mapped over MapMinBytes; one
// reopened after a clean close reserves and maps nothing beyond its data
// until it is appended to. A step doubles when the previous one was used
// up within a second and halves otherwise, between ReserveMinBytes and
// Config.ReserveMaxBytes, so a busy partition takes a system call per
// 16 MiB and an idle one holds a few hundred KiB beyond its data; for a
// fast one a prefault worker allocates the next step's blocks ahead,
// off the append path (reserve.go states the rules). Roll and close
// trim the file to its data.
//
// Who may hold slices into a mapping: only a holder of a reference on the
// *mmapfile.File it came from (a Range from Read, released by its
// reader). Unmapping (Unmap, Seal, Close, Delete) drops the segment's own
// reference; the munmap happens when the last reader releases.
// Truncation never shrinks or rewrites bytes a reader may hold: with
// readers active it writes a new file and leaves the old inode to them.
//
// Locking: the owner (the log's append lock) is the only writer; Segment.mu
// guards the mapping, active and closed, and the lazily opened indexes of
// a sealed segment.
package segment
