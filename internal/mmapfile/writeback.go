package mmapfile

import (
	"golang.org/x/sys/unix"
)

// StartWriteback asks the kernel to start writing out the dirty pages
// wholly inside [off, end) (sync_file_range with SYNC_FILE_RANGE_WRITE
// only) and returns without waiting for them. A partial first or last
// page is left alone: the writer may still change it, and a store or a
// write into a page under writeback can wait for it. It does nothing for
// a File without an open descriptor (released or parked: a hint is not
// worth opening one).
//
// It makes nothing durable and reports no writeback error: without
// SYNC_FILE_RANGE_WAIT_* the kernel neither reads nor advances the file
// description's error sequence, so a page that fails to be written is
// still reported by the next fdatasync (Sync). What it gains is that the
// device is busy with these bytes before that fdatasync starts, which
// then has less to write. Safe beside the owner's appends and Syncs; the
// caller must keep Close from running at the same time.
func (f *File) StartWriteback(off, end int64) error {
	start, stop := wholePages(off, end, f.size.Load())
	if stop <= start || f.closed.Load() || !f.writable {
		return nil
	}
	file := f.fd.Load()
	if file == nil {
		return nil
	}
	if err := unix.SyncFileRange(int(file.Fd()), start, stop-start, unix.SYNC_FILE_RANGE_WRITE); err != nil {
		return pathError(f.path, "sync_file_range", err)
	}
	return nil
}

// wholePages returns the pages wholly inside [off, end), clamped to
// [0, limit): start ≥ stop when there is none.
func wholePages(off, end, limit int64) (start, stop int64) {
	start = (max(off, 0) + pageSize - 1) &^ (pageSize - 1)
	stop = min(end, limit) &^ (pageSize - 1)
	return start, stop
}
