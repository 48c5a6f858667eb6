package mmapfile

import (
	"errors"
	"os"

	"github.com/partlog/partlog/internal/unsafeutil"
	"golang.org/x/sys/unix"
)

// madvise is the madvise(2) call used by Prefault; tests replace it to
// exercise the fallback taken on kernels older than 5.14.
var madvise = unix.Madvise

// pageSize is the system page size, used to align msync and madvise ranges.
var pageSize = int64(os.Getpagesize())

// Prefault asks the kernel to allocate and map the pages of [off, off+n)
// (clamped to Size) for writing, so that later stores into them do not
// take page faults: a writable File's range is read into the page cache
// with MADV_WILLNEED, then mapped with MADV_POPULATE_WRITE (a read-only
// File's with MADV_POPULATE_READ). On kernels without the populate
// advice (before 5.14, which return EINVAL) only the read-ahead of
// MADV_WILLNEED is left. Prefault holds a reference while it runs and
// returns ErrClosed if the File is closing. It is meant to run off the
// append path; see internal/prefault.
func (f *File) Prefault(off, n int64) error {
	if !f.Acquire() {
		return pathError(f.path, "prefault", ErrClosed)
	}
	defer f.Release()
	start, end := alignRange(off, n, f.size.Load())
	if start >= end {
		return nil
	}
	region := f.data[start:end]
	if f.writable {
		// A writable mapping takes no read-ahead on faults (see
		// "Read-ahead" in the package doc), so the range is read into the
		// page cache first, in large folios and exactly this long; the
		// populate then maps pages that are already there (and reads
		// them itself if the read-ahead failed: its error is the one
		// that counts, unless there is no populate).
		err := madvise(region, unix.MADV_WILLNEED)
		if !f.noPopulate.Load() {
			return f.populate(region, unix.MADV_POPULATE_WRITE)
		}
		if err != nil {
			return pathError(f.path, "madvise", err)
		}
		return nil
	}
	if !f.noPopulate.Load() {
		if err := f.populate(region, unix.MADV_POPULATE_READ); err != nil || !f.noPopulate.Load() {
			return err
		}
	}
	if err := madvise(region, unix.MADV_WILLNEED); err != nil {
		return pathError(f.path, "madvise", err)
	}
	return nil
}

// populate applies a MADV_POPULATE_* advice to region. A kernel without
// it (EINVAL) is remembered in noPopulate and is not an error.
func (f *File) populate(region []byte, advice int) error {
	err := madvise(region, advice)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) {
		return pathError(f.path, "madvise", err)
	}
	f.noPopulate.Store(true)
	return nil
}

// FaultReadahead gives f's mapping the kernel's fault read-ahead back
// (MADV_NORMAL; see "Read-ahead" in the package doc), for an owner whose
// writer is fast enough to outrun Prefault. Advice: an error changes
// nothing the caller relies on and is dropped.
func (f *File) FaultReadahead() {
	if len(f.data) > 0 {
		_ = madvise(f.data, unix.MADV_NORMAL)
	}
}

// Cached reports whether the page holding off (< Size) is in the page
// cache, false if that cannot be told. The caller holds a reference.
func (f *File) Cached(off int64) bool {
	if off < 0 || off >= f.size.Load() {
		return false
	}
	start := off &^ (pageSize - 1)
	var vec [1]byte
	return unsafeutil.Mincore(f.data[start:start+1], vec[:]) == nil && vec[0]&1 != 0
}

// WillNeed starts read-ahead of [off, off+n) (clamped to Size): the
// kernel reads the pages not in the page cache, in the background. A
// reader of a writable mapping's older data calls it, since faults on
// such a mapping read one page at a time (see "Read-ahead" in the
// package doc).
func (f *File) WillNeed(off, n int64) error {
	if !f.Acquire() {
		return pathError(f.path, "madvise", ErrClosed)
	}
	defer f.Release()
	start, end := alignRange(off, n, f.size.Load())
	if start >= end {
		return nil
	}
	if err := madvise(f.data[start:end], unix.MADV_WILLNEED); err != nil {
		return pathError(f.path, "madvise", err)
	}
	return nil
}

// DropPages takes the pages of [off, off+n) (off rounded up and the end
// down to whole pages, clamped to Size) out of f's mapping
// (MADV_DONTNEED), so that they no longer count in the process's
// resident memory. Nothing is lost: the mapping is shared, so the
// pages' contents stay in the page cache (a dirty page is still written
// back), and the next access maps the same page again. A prefault worker
// worker calls it for pages it populated ahead of a writer that stopped
// appending. It returns ErrClosed if the File is closing.
func (f *File) DropPages(off, n int64) error {
	if !f.Acquire() {
		return pathError(f.path, "madvise", ErrClosed)
	}
	defer f.Release()
	if n <= 0 {
		return nil
	}
	start := (max(off, 0) + pageSize - 1) &^ (pageSize - 1)
	end := min(off+n, f.size.Load(), int64(len(f.data))) &^ (pageSize - 1)
	if start >= end {
		return nil
	}
	if err := madvise(f.data[start:end], unix.MADV_DONTNEED); err != nil {
		return pathError(f.path, "madvise", err)
	}
	return nil
}

// alignRange widens [off, off+n) to page boundaries and clamps it to
// [0, limit). It returns start ≥ end for an empty result.
func alignRange(off, n, limit int64) (start, end int64) {
	if n <= 0 || off >= limit {
		return 0, 0
	}
	start = max(off, 0) &^ (pageSize - 1)
	end = off + n
	if end > limit || end < off {
		end = limit
	}
	end = min((end+pageSize-1)&^(pageSize-1), limit)
	return start, end
}

// noFaultReadahead advises a writable mapping MADV_RANDOM (see
// "Read-ahead" in the package doc). It is advice: an error changes
// nothing the caller relies on, so it is dropped.
func noFaultReadahead(data []byte) {
	_ = madvise(data, unix.MADV_RANDOM)
}
