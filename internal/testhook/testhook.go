// Package testhook holds observation points that the tests of other
// packages of this module set, for what they cannot see through the
// exported API (for example when a Log's data became durable). Production
// code only calls a hook when a test set it; nothing outside this module
// can import the package.
package testhook

import "sync/atomic"

// LogFlushed, when set, is called by partlog after each Log flush that
// succeeded (not a roll's background flush, which leaves the active
// segment unsynced), with the log's directory, while the flush still holds the
// log's append lock: no write changes the directory during the call, so
// the files as they are then are what a power failure would leave.
var LogFlushed atomic.Pointer[func(dir string)]

// Fallocate, when set, is called by internal/mmapfile before each
// fallocate(2) of [off, off+n) on the file fd; an error it returns is
// returned as fallocate's (ENOSPC to fill a disk without mounting one).
var Fallocate atomic.Pointer[func(fd int, off, n int64) error]

// Synced, when set, is called with the path of a segment file or of a
// directory after each fdatasync or fsync of it that succeeded (in
// internal/mmapfile, in package segment for sealed segments, and in
// internal/fsutil.SyncDir for every directory), so tests can see what a
// flush made durable.
var Synced atomic.Pointer[func(path string)]

// LogFlushFault, when set, is called by partlog at the start of each Log
// flush's fsyncs, with the log's directory; an error it returns fails the
// flush as a failed fsync would (the log is then poisoned).
var LogFlushFault atomic.Pointer[func(dir string) error]

// CleanStep, when set, is called by the log cleaner after each durable
// step of a cleaning (package cleaner, Step* names) with the partition
// directory; an error it returns fails the cleaning there. Crash tests
// stop the process at a chosen step.
var CleanStep atomic.Pointer[func(dir, step string) error]

// WriteFile, when set, is called by internal/fsutil before each atomic
// file write (checkpoints, markers, snapshots) with the file's path; an
// error it returns is returned as the write's (ENOSPC, to fill a disk
// without mounting one).
var WriteFile atomic.Pointer[func(path string) error]
