package mmapfile

import (
	"errors"
	"fmt"
	"os"

	"github.com/partlog/partlog/internal/fsutil"
	"github.com/partlog/partlog/internal/testhook"
	"golang.org/x/sys/unix"
)

// SyncPath fdatasyncs the regular file at path (never through a link)
// through a descriptor opened for the call: File.SyncFile for a file that
// is not open.
func SyncPath(path string) error {
	fd, err := fsutil.Open(path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return pathError(path, "open", err)
	}
	err = unix.Fdatasync(int(fd.Fd()))
	if cerr := fd.Close(); err == nil && cerr != nil {
		return pathError(path, "close", cerr)
	}
	if err != nil {
		return pathError(path, "fdatasync", err)
	}
	if h := testhook.Synced.Load(); h != nil {
		(*h)(path)
	}
	return nil
}

// WriteAt writes head and then body at off with one pwritev(2) (retried on
// a short write) through the page cache the mapping shares, so the bytes
// are visible through Bytes as soon as it returns. The range must lie
// below Size (grow first): WriteAt never extends the file. Owner only.
func (f *File) WriteAt(head, body []byte, off int64) error {
	if err := f.checkWritable("write"); err != nil {
		return err
	}
	n := int64(len(head) + len(body))
	if off < 0 || off+n > f.size.Load() {
		return pathError(f.path, "write", fmt.Errorf("%w: range [%d, %d) outside the %d reserved bytes", ErrCapacity, off, off+n, f.size.Load()))
	}
	file, err := f.descriptor()
	if err != nil {
		return pathError(f.path, "write", err)
	}
	if file == nil {
		return pathError(f.path, "write", errors.New("descriptor released"))
	}
	fd := int(file.Fd())
	for len(head)+len(body) > 0 {
		iov := [2][]byte{head, body}
		w, err := unix.Pwritev(fd, iov[:], off)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return pathError(f.path, "pwritev", err)
		}
		if w == 0 {
			return pathError(f.path, "pwritev", fmt.Errorf("wrote nothing at %d", off))
		}
		off += int64(w)
		if w >= len(head) {
			body = body[w-len(head):]
			head = nil
		} else {
			head = head[w:]
		}
	}
	return nil
}

// Sync makes the bytes stored into [off, off+n) durable, together with the
// file length if it changed.
//
// It calls fdatasync on the descriptor rather than msync(MS_SYNC) on the
// page-aligned range. Both write back the pages dirtied through the shared
// mapping (Linux shares one page cache between the two paths); fdatasync is
// never slower, is faster for larger flushes (bench/RESULTS.md, File.Sync),
// and also persists a length change made by Truncate or Grow, which msync
// is not guaranteed to do. The off and n arguments are validated but do
// not narrow the flush: every dirty page of the file is written back.
func (f *File) Sync(off, n int64) error {
	if err := f.checkWritable("sync"); err != nil {
		return err
	}
	if off < 0 || n < 0 || off+n > f.Cap() {
		return pathError(f.path, "sync", fmt.Errorf("%w: range [%d, %d) outside mapping of %d bytes", ErrCapacity, off, off+n, f.Cap()))
	}
	return f.syncFdatasync()
}

// SyncFile flushes all dirty pages and the file length with fdatasync.
func (f *File) SyncFile() error {
	if err := f.checkWritable("sync"); err != nil {
		return err
	}
	return f.syncFdatasync()
}

func (f *File) syncFdatasync() error {
	if err := f.withFD(unix.Fdatasync); err != nil {
		return pathError(f.path, "fdatasync", err)
	}
	if h := testhook.Synced.Load(); h != nil {
		(*h)(f.path)
	}
	return nil
}

// syncMsync flushes the page-aligned range around [off, off+n) with
// msync(MS_SYNC). Kept for the benchmark that justifies Sync's choice.
func (f *File) syncMsync(off, n int64) error {
	start, end := alignRange(off, n, f.MapLen())
	if start >= end {
		return nil
	}
	if err := unix.Msync(f.data[start:end], unix.MS_SYNC); err != nil {
		return pathError(f.path, "msync", err)
	}
	return nil
}

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
