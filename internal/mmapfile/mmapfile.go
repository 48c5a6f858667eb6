// Package mmapfile maps a preallocated file into memory for the segment and
// index writers of partlog.
//
// A File is created or opened at a fixed mapping length. Writable files have
// their blocks reserved with fallocate(2) (mode 0) before they are mapped, so a
// full disk surfaces as an error from Open or Grow rather than as a
// SIGBUS on a later store into the mapping. The package is Linux-only: it relies
// on fallocate and on madvise(MADV_POPULATE_WRITE).
//
// # Lifetime of the mapping
//
// A File starts with one reference, owned by whoever created or opened it.
// Any other goroutine that wants to keep slices into the mapping beyond the
// owner's control calls Acquire first and Release when it no longer holds any
// slice obtained from Bytes. The rules are:
//
//  1. Slices returned by Bytes are valid until the owner has called Close and
//     every successful Acquire has been matched by a Release. Only holders of
//     a reference (the owner before Close, or an Acquire-r before Release) may
//     keep or dereference such slices.
//  2. Close marks the File as closing and closes the descriptor at once; it
//     does not wait for readers. The munmap happens when the reference count
//     drops to zero, on whichever goroutine drops it (Close or the last
//     Release).
//  3. Acquire fails (returns false) once Close has been called, so no new
//     reader can start on a File that is going away.
//  4. Truncate shortens the file while the mapping keeps its length: pages
//     wholly past the new end of file raise SIGBUS when touched. The caller
//     must make sure nobody holds slices past the new size (readers only look
//     at the published, written part, which Truncate never cuts into). Bytes
//     returns at most Size bytes, so fresh slices never reach that region.
//  5. The mapping is never moved or resized in place, so a slice obtained
//     under a reference never dangles while that reference is held; Grow only
//     reserves more blocks inside the existing mapping. A growable file
//     (Options.Capacity) is mapped at its full capacity from the
//     start, with only the reserved prefix backed by the file; the rest of
//     the mapping is address space that Bytes never reaches. A file made
//     "ahead" (Options.Ahead) is mapped only over its
//     reserved prefix (Options.MapLen: a given length past it, over
//     the file's hole, which Bytes never reaches either); Remap maps it
//     again, longer, as a new File that takes over the descriptor and the
//     owner's role; the owner closes the old one, whose readers keep their
//     slices until they release them (the file is never shortened under
//     them: Truncate is the owner's, after the readers of that range are
//     gone, as above).
//
// # Read-ahead
//
// A writable mapping is advised MADV_RANDOM (noFaultReadahead), unless
// its owner says otherwise (FaultReadahead): a page fault on it reads
// that page only. By default the kernel answers a fault on a page not in
// the page cache with read-ahead around it, up to the
// device's read_ahead_kb (8 MiB on the reference VM), and past the write
// position of an active segment, whose file is long with a hole or
// unwritten blocks, that means allocating and zeroing megabytes of page
// cache nobody asked for, on the writer's time, for each partition's
// first fault (bench/RESULTS.md, mmapfile read-ahead). Prefault reads its range in
// first with MADV_WILLNEED (read-ahead of exactly that range), so pages
// provided ahead of the writer still come in large folios. Readers of a
// writable mapping's older data (an active segment reopened with data in
// it, or whose pages reclaim took after they were written) call WillNeed
// for their range when Cached says its pages are not there. Read-only
// mappings keep the default. The segment gives the read-ahead back to an
// active .log written past its first mapping (a fast writer, which may
// outrun Prefault: one fault then brings the megabytes it is about to
// write, instead of a major fault per page).
//
// Mutating methods (Grow, Truncate, Sync, Close) belong to the owner and must
// not run concurrently with each other. Bytes, Size, Cap, Acquire, Release and
// Prefault are safe for concurrent use.
package mmapfile

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/partlog/partlog/internal/fsutil"
	"golang.org/x/sys/unix"
)

var (
	// ErrClosed is returned by operations on a File after Close has been
	// called, and by Prefault once the mapping has gone away.
	ErrClosed = errors.New("partlog/mmapfile: file is closed")
	// ErrReadOnly is returned by mutating methods of a File opened read-only.
	ErrReadOnly = errors.New("partlog/mmapfile: file is read-only")
	// ErrCapacity is returned by Grow when the requested size exceeds the
	// length of the mapping, and by Truncate when asked to lengthen the file.
	ErrCapacity = errors.New("partlog/mmapfile: size outside the mapping")
	// ErrNotRegular is returned by Open for a path that is not a regular
	// file (a directory, a device, a FIFO).
	ErrNotRegular = errors.New("partlog/mmapfile: not a regular file")
)

// File is a file of fixed maximum length mapped MAP_SHARED into memory.
// See the package comment for who may hold slices into the mapping.
type File struct {
	path     string
	writable bool

	// fd is the open file, nil after Close or ReleaseDescriptor. It is
	// atomic because a parked File (ParkDescriptor) opens it again on first
	// use, which may be a Sync running beside the owner.
	fd atomic.Pointer[os.File]
	// reopen, set by ParkDescriptor before the File is shared, makes the
	// first call that needs a descriptor open one and keep it.
	reopen bool
	// data is the whole mapping as returned by mmap (nil for a zero-length
	// mapping). It never changes until it is unmapped; munmap needs the
	// original slice.
	data []byte

	// size is the usable length: the part of the mapping backed by the file.
	size atomic.Int64
	// refs counts the owner's reference (until Close) plus every Acquire not
	// yet released. The mapping is unmapped when it reaches zero.
	refs atomic.Int64
	// closed is set by Close; Acquire fails once it is set.
	closed atomic.Bool
	// noPopulate records that the kernel rejected MADV_POPULATE_*, so
	// Prefault goes straight to MADV_WILLNEED.
	noPopulate atomic.Bool
	// lengthAt, when not 0, is the length the first Grow sets the file to
	// before it reserves (Options.Ahead, opening). Owner only.
	lengthAt int64
	// capacity is the largest size Grow (after a Remap, for a file made
	// ahead) may give the file: len(data), or more for a file made ahead.
	capacity int64

	// allocMu guards allocated and allocGen. allocated is how far past
	// the reserved prefix (size, always backed) the file's blocks are
	// known to be allocated: by a Preallocate that starts within
	// max(allocated, size) and that no Truncate overtook (Truncate bumps
	// allocGen and lowers allocated to its length). A Grow that stays
	// within it has nothing to allocate and makes no system call: the
	// blocks it reserves are already the file's, so stores into them
	// cannot meet a full disk at writeback.
	allocMu   sync.Mutex
	allocated int64
	allocGen  uint64
}

// Options say how Open makes or opens a file and maps it.
type Options struct {
	// Create makes a new file at path (O_EXCL: an existing name fails, a
	// symbolic link included; on failure the new file is removed).
	// Otherwise the regular file at path is opened, never through a
	// symbolic link (its target may lie outside the directory, and a
	// writable open preallocates it); any other entry is ErrNotRegular.
	Create bool
	// ReadOnly maps an existing file read-only over its length; the sizes
	// below are ignored.
	ReadOnly bool
	// Reserve is how many bytes from the start are backed by fallocate
	// (for an existing file, at least its length: the whole range, so a
	// hole another tool left cannot fault on a store): the File's Size.
	Reserve int64
	// Capacity is the largest Size Grow may reach (0: Reserve). Without
	// Ahead the file is Reserve bytes long and mapped over Capacity
	// (Grow extends the reservation inside the mapping).
	//
	// Mapping past the end of the file is legal (MAP_SHARED of a file
	// never costs memory for pages nobody touches, and file mappings are
	// not charged against the overcommit limit); touching a page wholly
	// past the end raises SIGBUS, which is why Bytes never hands out more
	// than Size bytes and every store goes through a slice from Bytes.
	Capacity int64
	// Ahead sets the file's length to Capacity at once (ftruncate: the
	// part past the reservation is a hole that takes no disk) and maps
	// only MapLen bytes (0: the reserved prefix; growing past the mapping
	// takes a Remap). Blocks are still reserved only for the reserved
	// prefix, and Size, Bytes and WriteAt stay within it, so no store ever
	// reaches the hole (whose blocks would be allocated at writeback,
	// where a full disk could no longer be reported); the mapping past the
	// reservation lies over the hole, address space only. Growing the
	// reservation then never changes the file's length, and thousands of
	// files mapped at what they hold lie side by side in the address
	// space instead of a page-table page or two each at a capacity of
	// 1 GiB. A crash leaves the file at capacity, ending in zeros, which
	// recovery cuts. An existing file with nothing to reserve beyond its
	// length (a segment reopened after a clean close) gets its length set
	// by the first Grow instead: an idle reopened file is not changed.
	Ahead  bool
	MapLen int64
	// FD, when set, is path already opened with OpenRegular (read-write
	// unless ReadOnly) and Length its length: Open maps it and takes it
	// over (closing it on failure), for a caller that read the file first.
	FD     *os.File
	Length int64
}

// Open makes or opens the file at path and maps it as o says. A zero
// length yields a File with no mapping and an empty Bytes.
func Open(path string, o Options) (*File, error) {
	capacity := o.Capacity
	if capacity == 0 {
		capacity = o.Reserve
	}
	if o.Create {
		if o.Reserve < 0 || capacity < o.Reserve {
			return nil, pathError(path, "create", fmt.Errorf("reserve %d outside [0, capacity %d]", o.Reserve, capacity))
		}
		if !o.Ahead {
			return createNew(path, func(fd *os.File) (*File, error) {
				return mapFileReserved(path, fd, 0, o.Reserve, capacity, true)
			})
		}
		mapLen := o.MapLen
		if mapLen == 0 {
			mapLen = o.Reserve
		}
		if mapLen < o.Reserve || mapLen > capacity {
			return nil, pathError(path, "create", fmt.Errorf("mapping %d outside [reserve %d, capacity %d]", mapLen, o.Reserve, capacity))
		}
		return createNew(path, func(fd *os.File) (*File, error) {
			return mapFileAhead(path, fd, 0, o.Reserve, mapLen, capacity)
		})
	}
	fd, size := o.FD, o.Length
	if fd == nil {
		var err error
		if fd, size, err = OpenRegular(path, !o.ReadOnly); err != nil {
			return nil, err
		}
	}
	if o.ReadOnly {
		return mapFileReserved(path, fd, size, size, size, false)
	}
	length := max(size, o.Reserve)
	capacity = max(capacity, length)
	if !o.Ahead {
		return mapFileReserved(path, fd, size, length, capacity, true)
	}
	if length > size || capacity == size {
		return mapFileAhead(path, fd, size, length, max(length, o.MapLen), capacity)
	}
	f, err := mapFileReserved(path, fd, size, size, size, true)
	if err != nil {
		return nil, err
	}
	f.capacity = capacity
	f.lengthAt = capacity
	return f, nil
}

// createNew creates path exclusively (O_EXCL fails on any existing name, a
// symbolic link included) and maps it with mapFD (which owns fd); on
// failure the new file is removed.
func createNew(path string, mapFD func(fd *os.File) (*File, error)) (*File, error) {
	fd, err := fsutil.Open(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, pathError(path, "create", err)
	}
	f, err := mapFD(fd)
	if err != nil {
		_ = os.Remove(path)
		return nil, err
	}
	return f, nil
}

// OpenRegular opens the existing regular file at path (never through a
// symbolic link; read-write when writable) without mapping it, and
// returns it with its length, for a caller that reads it before mapping
// it (Options.FD: one open for both).
func OpenRegular(path string, writable bool) (*os.File, int64, error) {
	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR
	}
	fd, err := fsutil.Open(path, flag|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, 0, pathError(path, "open", err)
	}
	st, err := fd.Stat()
	if err != nil {
		_ = fd.Close()
		return nil, 0, pathError(path, "stat", err)
	}
	if !st.Mode().IsRegular() {
		_ = fd.Close()
		return nil, 0, pathError(path, "open", ErrNotRegular)
	}
	return fd, st.Size(), nil
}

// mapFileAhead reserves [0, length), sets the file's length to capacity
// and maps mapLen ≥ length bytes. It takes ownership of fd and closes it
// on failure.
func mapFileAhead(path string, fd *os.File, current, length, mapLen, capacity int64) (*File, error) {
	if length > current {
		if err := fallocate(int(fd.Fd()), 0, 0, length); err != nil {
			_ = fd.Close()
			return nil, pathError(path, "fallocate", err)
		}
		current = length
	}
	if capacity > current {
		if err := fd.Truncate(capacity); err != nil {
			_ = fd.Close()
			return nil, pathError(path, "truncate", err)
		}
	}
	f, err := mapFileReserved(path, fd, capacity, length, mapLen, true)
	if err != nil {
		return nil, err
	}
	f.capacity = capacity
	return f, nil
}

// mapFileReserved reserves blocks up to length (writable only) and maps
// mapLen ≥ length bytes. It takes ownership of fd and closes it on failure.
func mapFileReserved(path string, fd *os.File, current, length, mapLen int64, writable bool) (*File, error) {
	if mapLen != int64(int(mapLen)) {
		_ = fd.Close()
		return nil, pathError(path, "mmap", fmt.Errorf("length %d does not fit in memory", length))
	}
	if writable && length > current {
		// Reserve the whole range, not only the new tail: an existing file
		// may be sparse (extended with ftruncate by another tool), and any
		// hole in it would fault on a store.
		if err := fallocate(int(fd.Fd()), 0, 0, length); err != nil {
			_ = fd.Close()
			return nil, pathError(path, "fallocate", err)
		}
	}
	f := &File{path: path, writable: writable}
	f.fd.Store(fd)
	if mapLen > 0 {
		prot := unix.PROT_READ
		if writable {
			prot |= unix.PROT_WRITE
		}
		data, err := unix.Mmap(int(fd.Fd()), 0, int(mapLen), prot, unix.MAP_SHARED)
		if err != nil {
			_ = fd.Close()
			return nil, pathError(path, "mmap", err)
		}
		if writable {
			noFaultReadahead(data)
		}
		f.data = data
	}
	f.capacity = mapLen
	f.size.Store(length)
	f.refs.Store(1)
	return f, nil
}

// Path returns the path the File was created or opened with.
func (f *File) Path() string { return f.path }

// Rename renames the File's file to path and makes the File go by that
// name: its errors name it, and a parked or released descriptor is opened
// again by it. It is how a file built under a temporary name (a truncated
// segment's copy) takes the name it replaces. Owner only, before the File
// is shared.
func (f *File) Rename(path string) error {
	if err := os.Rename(f.path, path); err != nil {
		return err
	}
	f.path = path
	return nil
}

// Writable reports whether the File is mapped read-write.
func (f *File) Writable() bool { return f.writable }

// Bytes returns the usable part of the mapping, Size bytes long (its capacity
// is limited to Size as well). The slice stays valid under the rules of the
// package comment; it is nil once the mapping is gone.
func (f *File) Bytes() []byte {
	if f.refs.Load() == 0 {
		return nil
	}
	n := f.size.Load()
	return f.data[:n:n]
}

// Size returns the usable length of the mapping: the length of the file,
// or for a file made ahead the reserved prefix of it; the mapped
// length at open, lowered by Truncate and raised by Grow.
func (f *File) Size() int64 { return f.size.Load() }

// Cap returns the largest size the file may grow to: the length of the
// mapping, or for a file made ahead its capacity, which
// growth past MapLen reaches through Remap.
func (f *File) Cap() int64 { return f.capacity }

// MapLen returns the length of the mapping, the largest size Grow accepts
// without a Remap.
func (f *File) MapLen() int64 { return int64(len(f.data)) }

func (f *File) checkWritable(op string) error {
	if f.closed.Load() {
		return pathError(f.path, op, ErrClosed)
	}
	if !f.writable {
		return pathError(f.path, op, ErrReadOnly)
	}
	return nil
}

// pathError wraps err with the operation and the path, keeping it
// inspectable with errors.Is and errors.As.
func pathError(path, op string, err error) error {
	return &os.PathError{Op: "partlog/mmapfile: " + op, Path: path, Err: err}
}
