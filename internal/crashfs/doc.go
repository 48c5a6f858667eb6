// Package crashfs is a crash-simulating file system for tests: a FUSE
// file system (github.com/hanwen/go-fuse) that keeps every file in memory,
// records every change in an op log, and can tell what a power cut at any
// point of that log would have left on a disk.
//
// A process kill keeps the page cache, so it cannot show a missing
// fdatasync or an unsynced rename; a cut here loses what was not synced.
// The engine runs unchanged over the mount, through the kernel paths it
// uses on a real disk: stores into a shared writable mapping reach the
// file system as writes when the kernel writes the pages back, msync and
// fdatasync as fsyncs (after the writeback they force), pwritev as
// writes, ftruncate and fallocate (without FALLOC_FL_KEEP_SIZE) as length
// changes, creat/mkdir/rename/unlink as entry operations and the fsync of
// a directory as its sync. O_NOFOLLOW, OFD locks and flock are the
// kernel's own (the mount does not ask for lock requests).
//
// # The model
//
// Replay applies the log and keeps, for each file, the bytes and length
// its last fsync made durable plus the writes since, and for each
// directory the entries its last fsync made durable plus the entry
// operations since (see Replay for the exact rules). At a cut, Image
// materialises one outcome into a real directory, chosen by a seed: every
// pending op lost (the common case), every one kept, or a mix in which
// each write is lost, kept or kept in part (a subset of its 512-byte
// sectors, a torn write) and each directory keeps a prefix of its entry
// operations. The engine then opens that directory like one found after
// a power failure. A cut is a position in the log ("before op k"), so one
// run of a workload yields an image for every op; CutAt also cuts the
// running file system itself: from that op on every change fails with
// EIO while reads go on, so a process using it sees its disk go away.
//
// # Processes
//
// Mount starts the daemon as a child process (the test binary again, see
// daemon): a goroutine that faults on a mapping of the mount is stuck in
// the kernel outside a system call, so a process serving its own mount
// can deadlock its garbage collector. The test talks to the daemon over
// its stdin and stdout and reads the log from a file outside the mount.
// Mounting needs root and /dev/fuse (mount(2) directly; there is no
// fusermount): Require skips a test without them, or fails it when
// PARTLOG_REQUIRE_FUSE=1, as CI sets it.
package crashfs
