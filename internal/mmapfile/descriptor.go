package mmapfile

import (
	"errors"
	"os"

	"github.com/partlog/partlog/internal/fsutil"
	"golang.org/x/sys/unix"
)

// ReleaseDescriptor closes the File's descriptor and keeps the mapping
// (a shared mapping does not need it). Later Grow, Truncate, Sync and
// WriteAt calls open the file again by its path for the call. Indexes do
// this, as Kafka's do: their file is changed only at growth steps and at
// roll, and a broker with thousands of partitions would otherwise hold two
// descriptors more per partition. Owner only.
func (f *File) ReleaseDescriptor() error {
	fd := f.fd.Load()
	if fd == nil || f.closed.Load() {
		return nil
	}
	f.fd.Store(nil)
	if err := fd.Close(); err != nil {
		return pathError(f.path, "close", err)
	}
	return nil
}

// ParkDescriptor is ReleaseDescriptor for a file that is written through
// its descriptor once it is in use (an active .log: pwritev, fallocate
// steps, fdatasync): the first call that needs a descriptor opens the file
// again by its path and keeps it until Close. An idle partition then holds
// no descriptor for its active segment (10 000 partitions open within a
// 20 000-descriptor limit). The path must keep naming this file while it
// is parked. Owner only, before the File is shared.
func (f *File) ParkDescriptor() error {
	if err := f.ReleaseDescriptor(); err != nil {
		return err
	}
	f.reopen = true
	return nil
}

// Descriptors reports whether the File holds an open descriptor.
func (f *File) Descriptors() bool { return f.fd.Load() != nil }

// descriptor returns the File's descriptor, opening it again when the
// File is parked; nil (and no error) when it was released for good.
func (f *File) descriptor() (*os.File, error) {
	if fd := f.fd.Load(); fd != nil || !f.reopen {
		return fd, nil
	}
	fd, err := fsutil.Open(f.path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	if !f.fd.CompareAndSwap(nil, fd) {
		// Another caller opened it first (a Sync beside the owner).
		_ = fd.Close()
		return f.fd.Load(), nil
	}
	if f.closed.Load() {
		// Close ran meanwhile and may have missed this descriptor.
		if f.fd.CompareAndSwap(fd, nil) {
			_ = fd.Close()
		}
		return nil, ErrClosed
	}
	return fd, nil
}

// withFD calls fn with the File's descriptor, or with one opened for the
// call when the descriptor was released.
func (f *File) withFD(fn func(fd int) error) error {
	fd, err := f.descriptor()
	if err != nil {
		return err
	}
	if fd != nil {
		return fn(int(fd.Fd()))
	}
	tmp, err := fsutil.Open(f.path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	return errors.Join(fn(int(tmp.Fd())), tmp.Close())
}
