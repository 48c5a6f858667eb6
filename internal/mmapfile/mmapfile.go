// Package mmapfile maps a preallocated file into memory for the segment and
// index writers of partlog.
//
// A File is created or opened at a fixed mapping length. Writable files have
// their blocks reserved with fallocate(2) (mode 0) before they are mapped, so a
// full disk surfaces as an error from Create, Open or Grow rather than as a
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
//     (CreateReserved, OpenReserved) is mapped at its full capacity from the
//     start, with only the reserved prefix backed by the file; the rest of
//     the mapping is address space that Bytes never reaches. A file made
//     "ahead" (CreateAhead, OpenAhead, MapAhead) is mapped only over its
//     reserved prefix (CreateAheadMapped: a given length past it, over
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
// cache nobody asked for: 8 MiB for each partition's first fault, ~30 ms
// of a writer's time on the reference VM, and 8 GiB of page cache for
// 1 000 partitions that write a few KiB each. Prefault reads its range in
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
	"github.com/partlog/partlog/internal/testhook"
	"github.com/partlog/partlog/internal/unsafeutil"
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

// fallocate reserves blocks for a file. It is a variable so tests can inject
// failures such as ENOSPC, which cannot be produced on demand without mounting
// a small file system; tests of other packages set testhook.Fallocate.
var fallocate = func(fd int, mode uint32, off, n int64) error {
	if f := testhook.Fallocate.Load(); f != nil {
		if err := (*f)(fd, off, n); err != nil {
			return err
		}
	}
	return unix.Fallocate(fd, mode, off, n)
}

// madvise is the madvise(2) call used by Prefault; tests replace it to
// exercise the fallback taken on kernels older than 5.14.
var madvise = unix.Madvise

// pageSize is the system page size, used to align msync and madvise ranges.
var pageSize = int64(os.Getpagesize())

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
	// before it reserves (OpenAhead, MapAhead). Owner only.
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

// allocatedTo returns how far the file's blocks are known to be allocated
// (see File.allocated).
func (f *File) allocatedTo() int64 {
	f.allocMu.Lock()
	defer f.allocMu.Unlock()
	return max(f.allocated, f.size.Load())
}

// noteAllocated records that [off, end) was allocated by a call that
// started when allocGen was gen: it extends allocated unless a Truncate
// came in between or the range leaves a gap after it.
func (f *File) noteAllocated(off, end int64, gen uint64) {
	f.allocMu.Lock()
	if gen == f.allocGen && off <= max(f.allocated, f.size.Load()) {
		f.allocated = max(f.allocated, end)
	}
	f.allocMu.Unlock()
}

// allocGeneration returns allocGen, for noteAllocated.
func (f *File) allocGeneration() uint64 {
	f.allocMu.Lock()
	defer f.allocMu.Unlock()
	return f.allocGen
}

// Create creates a new file at path (failing if it exists), preallocates size
// bytes with fallocate and maps them read-write. A size of 0 creates an empty
// file and no mapping. On failure the new file is removed.
func Create(path string, size int64) (*File, error) {
	if size < 0 {
		return nil, pathError(path, "create", fmt.Errorf("negative size %d", size))
	}
	return createNew(path, size, size, func(fd *os.File) (*File, error) {
		return mapFile(path, fd, 0, size, true)
	})
}

// CreateReserved creates a new file at path (failing if it exists) whose
// mapping is capacity bytes long but whose blocks are reserved with fallocate
// only for the first reserve bytes (reserve ≤ capacity): the file is reserve
// bytes long, Size is reserve and Cap is capacity. Grow later extends the
// reservation inside the mapping without moving it.
//
// Mapping past the end of the file is legal (MAP_SHARED of a file never
// costs memory for pages nobody touches, and file mappings are not charged
// against the overcommit limit); touching a page wholly past the end raises
// SIGBUS, which is why Bytes never hands out more than Size bytes and every
// store goes through a slice from Bytes. On failure the new file is removed.
func CreateReserved(path string, capacity, reserve int64) (*File, error) {
	return createNew(path, capacity, reserve, func(fd *os.File) (*File, error) {
		return mapFileReserved(path, fd, 0, reserve, capacity, true)
	})
}

// createNew creates path exclusively (O_EXCL fails on any existing name, a
// symbolic link included) and
// maps it with mapFD (which owns fd); on failure the new file is removed.
func createNew(path string, capacity, reserve int64, mapFD func(fd *os.File) (*File, error)) (*File, error) {
	if reserve < 0 || capacity < reserve {
		return nil, pathError(path, "create", fmt.Errorf("reserve %d outside [0, capacity %d]", reserve, capacity))
	}
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

// openRegular opens an existing file with flag, never through a symbolic
// link, and refuses a path that is not a regular file; it returns the
// file's length.
func openRegular(path string, flag int) (*os.File, int64, error) {
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

// OpenReserved maps an existing file read-write over max(capacity, length)
// bytes and makes sure max(reserve, length) bytes are backed by fallocate
// (the whole range, so holes left by another tool cannot fault). Size is the
// resulting file length; Grow extends it up to Cap.
func OpenReserved(path string, capacity, reserve int64) (*File, error) {
	fd, size, err := openRegular(path, os.O_RDWR)
	if err != nil {
		return nil, err
	}
	return MapReserved(path, fd, size, capacity, reserve)
}

// MapReserved is OpenReserved for fd, the file at path opened read-write
// with OpenRegular, whose length is size. It takes ownership of fd
// (closing it on failure).
func MapReserved(path string, fd *os.File, size, capacity, reserve int64) (*File, error) {
	length := max(size, reserve)
	return mapFileReserved(path, fd, size, length, max(capacity, length), true)
}

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

// CreateAhead is CreateReserved with the file's length set to capacity at
// once (ftruncate: the part past the reservation is a hole that takes no
// disk). Blocks are still reserved with fallocate only for the first
// reserve bytes, and Size, Bytes and WriteAt stay within them, so no
// store ever reaches the hole (whose blocks would be allocated at
// writeback, where a full disk could no longer be reported). Growing the
// reservation then never changes the file's length. On the reference VM
// (1 KiB stores into a fresh mapping, 256 MiB, 16 MiB steps, six
// interleaved rounds, two runs) stores into a file reserved in steps that
// extend its length cost 1.5x (1.52, 1.44) those into a file reserved
// whole, and 1.14 and 0.83x with the length set once. A crash leaves the
// file at capacity, ending in zeros, which recovery cuts.
//
// Only the reserved prefix is mapped (Cap is capacity, MapLen is reserve):
// growing past the mapping takes a Remap first. Thousands of files mapped
// at a capacity of 1 GiB each spread their pages over a terabyte of
// address space, a page-table page or two of their own for each file's
// written tail; mapped at what they hold they lie side by side.
func CreateAhead(path string, capacity, reserve int64) (*File, error) {
	return CreateAheadMapped(path, capacity, reserve, reserve)
}

// CreateAheadMapped is CreateAhead with a mapping mapLen bytes long
// (reserve ≤ mapLen ≤ capacity; MapLen is mapLen), so Grow up to mapLen
// needs no Remap. The part of the mapping past the reservation lies over
// the file's hole: address space only, which Bytes, Prefault and WriteAt
// never reach (they stay within Size), so no store allocates a block
// there and none can fault with SIGBUS.
func CreateAheadMapped(path string, capacity, reserve, mapLen int64) (*File, error) {
	if mapLen < reserve || mapLen > capacity {
		return nil, pathError(path, "create", fmt.Errorf("mapping %d outside [reserve %d, capacity %d]", mapLen, reserve, capacity))
	}
	return createNew(path, capacity, reserve, func(fd *os.File) (*File, error) {
		return mapFileAhead(path, fd, 0, reserve, mapLen, capacity)
	})
}

// OpenAhead is OpenReserved with the file's length set to the capacity
// (see CreateAhead). The reserved prefix is max(reserve, current length).
// When nothing is to be reserved beyond the current length (a segment
// reopened after a clean close), the length is set by the first Grow
// instead: an idle reopened file is not changed at all (no ftruncate at
// the open, none back at the close).
func OpenAhead(path string, capacity, reserve int64) (*File, error) {
	fd, size, err := OpenRegular(path, true)
	if err != nil {
		return nil, err
	}
	return MapAhead(path, fd, size, capacity, reserve)
}

// OpenRegular opens the existing regular file at path (never through a
// symbolic link; read-write when writable) without mapping it, and
// returns it with its length, for a caller that reads it before mapping
// it with MapAhead (one open for both).
func OpenRegular(path string, writable bool) (*os.File, int64, error) {
	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR
	}
	return openRegular(path, flag)
}

// MapAhead is OpenAhead for fd, the file at path opened read-write with
// OpenRegular, whose length is size. It takes ownership of fd (closing it
// on failure).
func MapAhead(path string, fd *os.File, size, capacity, reserve int64) (*File, error) {
	length := max(size, reserve)
	capacity = max(capacity, length)
	if length > size || capacity == size {
		return mapFileAhead(path, fd, size, length, length, capacity)
	}
	f, err := mapFileReserved(path, fd, size, size, size, true)
	if err != nil {
		return nil, err
	}
	f.capacity = capacity
	f.lengthAt = capacity
	return f, nil
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

// Open maps an existing file. A symbolic link is never followed (its
// target may lie outside the directory, and a writable open preallocates
// it) and a path that is not a regular file is refused.
//
// A writable file is mapped read-write over max(mapSize, current length); if
// mapSize is larger than the file, the file is first extended with fallocate
// to mapSize bytes. A read-only file is mapped over its current length, and
// mapSize is ignored. A zero length yields a File with no mapping and an empty
// Bytes.
func Open(path string, mapSize int64, writable bool) (*File, error) {
	fd, size, err := OpenRegular(path, writable)
	if err != nil {
		return nil, err
	}
	length := size
	if writable {
		length = max(length, mapSize)
	}
	return mapFile(path, fd, size, length, writable)
}

// mapFile reserves blocks up to length (writable only) and maps length bytes.
// It takes ownership of fd and closes it on failure.
func mapFile(path string, fd *os.File, current, length int64, writable bool) (*File, error) {
	return mapFileReserved(path, fd, current, length, length, writable)
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
// or for CreateAhead and OpenAhead the reserved prefix of it; the mapped
// length at open, lowered by Truncate and raised by Grow.
func (f *File) Size() int64 { return f.size.Load() }

// Cap returns the largest size the file may grow to: the length of the
// mapping, or for a file made ahead (CreateAhead) its capacity, which
// growth past MapLen reaches through Remap.
func (f *File) Cap() int64 { return f.capacity }

// MapLen returns the length of the mapping, the largest size Grow accepts
// without a Remap.
func (f *File) MapLen() int64 { return int64(len(f.data)) }

// Grow extends the file to n bytes (n ≤ MapLen) with fallocate, making the
// mapping usable up to n. A smaller or equal n is a no-op.
func (f *File) Grow(n int64) error {
	if err := f.checkWritable("grow"); err != nil {
		return err
	}
	cur := f.size.Load()
	if n <= cur {
		return nil
	}
	if n > f.MapLen() {
		return pathError(f.path, "grow", fmt.Errorf("%w: %d > mapped %d (capacity %d)", ErrCapacity, n, f.MapLen(), f.Cap()))
	}
	// Only the new range: the part below cur is already backed (Create,
	// Open and the previous Grow reserved it), and so is the part a
	// Preallocate allocated (a prefault worker's, off the append path).
	start := max(cur, f.allocatedTo())
	if start >= n && f.lengthAt == 0 {
		f.size.Store(n)
		return nil
	}
	err := f.withFD(func(fd int) error {
		if f.lengthAt > 0 {
			// The length deferred by OpenAhead (a hole past the
			// reservation, as CreateAhead leaves it).
			if err := unix.Ftruncate(fd, f.lengthAt); err != nil {
				return fmt.Errorf("truncate: %w", err)
			}
			f.lengthAt = 0
		}
		if start >= n {
			return nil
		}
		return fallocate(fd, 0, start, n-start)
	})
	if err != nil {
		return pathError(f.path, "fallocate", err)
	}
	f.size.Store(n)
	return nil
}

// Remap maps the file again over mapLen bytes (Size ≤ mapLen ≤ Cap) and
// returns the new File, which takes over f's descriptor (a parked one
// stays parked), its reserved size and its deferred length: the owner
// goes on with it, and closes f once nothing else uses f (a prefault.Writer is
// moved with Retarget first). The old mapping then goes when its last
// reader releases it, so slices readers took from it stay valid until
// then (both mappings share the page cache: what is stored through one is
// seen through the other). Only Close, Bytes, Size, Cap, MapLen, Acquire,
// Release and Prefault may be called on f after Remap. On failure f is
// unchanged. Owner only, not concurrently with any other method of f but
// those.
func (f *File) Remap(mapLen int64) (*File, error) {
	if err := f.checkWritable("remap"); err != nil {
		return nil, err
	}
	if mapLen < f.size.Load() || mapLen > f.capacity {
		return nil, pathError(f.path, "remap", fmt.Errorf("%w: %d not in [%d, %d]", ErrCapacity, mapLen, f.size.Load(), f.capacity))
	}
	if mapLen != int64(int(mapLen)) {
		return nil, pathError(f.path, "remap", fmt.Errorf("length %d does not fit in memory", mapLen))
	}
	g := &File{path: f.path, writable: true, reopen: f.reopen, lengthAt: f.lengthAt, capacity: f.capacity}
	// Blocks a Preallocate allocated for f are g's file's too (one that
	// is still running on f and finishes later is not counted: Grow then
	// allocates its range again, which only costs the call).
	g.allocated = f.allocatedTo()
	if mapLen > 0 {
		fd := f.fd.Load()
		if fd == nil {
			// Parked or released: a descriptor for the mmap only.
			tmp, err := fsutil.Open(f.path, os.O_RDWR|unix.O_NOFOLLOW, 0)
			if err != nil {
				return nil, pathError(f.path, "remap", err)
			}
			defer tmp.Close()
			fd = tmp
		}
		data, err := unix.Mmap(int(fd.Fd()), 0, int(mapLen), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return nil, pathError(f.path, "mmap", err)
		}
		noFaultReadahead(data)
		g.data = data
	}
	g.noPopulate.Store(f.noPopulate.Load())
	g.size.Store(f.size.Load())
	g.refs.Store(1)
	g.fd.Store(f.fd.Swap(nil))
	f.reopen = false
	return g, nil
}

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

// Truncate cuts the file to n bytes (n ≤ Size), typically to the written
// length when a segment rolls or closes. The mapping keeps its length; see the
// package comment for what that means for readers. Truncate does not sync the
// new length; call SyncFile for that.
func (f *File) Truncate(n int64) error {
	if err := f.checkWritable("truncate"); err != nil {
		return err
	}
	if n < 0 || n > f.size.Load() {
		return pathError(f.path, "truncate", fmt.Errorf("%w: %d not in [0, %d]", ErrCapacity, n, f.size.Load()))
	}
	// Publish the smaller size first so that no new Bytes call hands out the
	// region that is about to lose its backing.
	f.size.Store(n)
	err := f.withFD(func(fd int) error { return unix.Ftruncate(fd, n) })
	// After the ftruncate, even a failed one: blocks past n may be gone,
	// and a Preallocate that ran before it must not count them.
	f.allocMu.Lock()
	f.allocGen++
	f.allocated = min(f.allocated, n)
	f.allocMu.Unlock()
	if err != nil {
		return pathError(f.path, "truncate", err)
	}
	return nil
}

// Sync makes the bytes stored into [off, off+n) durable, together with the
// file length if it changed.
//
// It calls fdatasync on the descriptor rather than msync(MS_SYNC) on the
// page-aligned range. Both write back the pages dirtied through the shared
// mapping (Linux shares one page cache between the two paths). On the
// reference VM (2 vCPU, ext4 on virtio; BenchmarkSync in
// mmapfile_bench_test.go, 5 runs of 1000 syncs, medians):
//
//	4 KiB dirtied per sync:    msync 531 µs/op   fdatasync 541 µs/op  (a tie, within noise)
//	64 KiB dirtied per sync:   msync 2.36 ms/op  fdatasync 1.21 ms/op
//
// fdatasync is never slower beyond noise, is faster for larger flushes, and
// also persists a length change made by Truncate or Grow, which msync is not
// guaranteed to do. The off and n arguments are validated but do not narrow
// the flush: every dirty page of the file is written back.
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

// Preallocate allocates the blocks of [off, off+n) (clamped to Cap)
// ahead of a Grow that will reserve them, with fallocate(2) in
// FALLOC_FL_KEEP_SIZE mode on a descriptor of its own, so that the
// Grow that takes them has nothing to allocate and makes no system call
// (File.allocated records them; a Truncate forgets what lies past it).
// Allocating can wait on the disk (the file system reads the bitmaps of the block
// groups it moves to: milliseconds on the reference VM), which is why a
// prefault worker calls it, off the append path. It changes neither
// the file's contents nor its length nor Size: the blocks read as zeros
// and count as reserved only once Grow takes them (a failure here, a full
// disk, is left for that Grow to report), and truncating the file to its
// data frees them with the rest of the reservation. It returns ErrClosed
// if the File is closing. Safe beside the owner.
func (f *File) Preallocate(off, n int64) error {
	if !f.writable {
		return pathError(f.path, "preallocate", ErrReadOnly)
	}
	if !f.Acquire() {
		return pathError(f.path, "preallocate", ErrClosed)
	}
	defer f.Release()
	n = min(off+n, f.capacity) - off
	if off < 0 || n <= 0 {
		return nil
	}
	gen := f.allocGeneration()
	tmp, err := fsutil.Open(f.path, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return pathError(f.path, "preallocate", err)
	}
	err = fallocate(int(tmp.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return pathError(f.path, "fallocate", err)
	}
	f.noteAllocated(off, off+n, gen)
	return nil
}

// Acquire takes a reference that keeps the mapping alive. It returns false if
// Close has already been called; the caller must then not use Bytes.
func (f *File) Acquire() bool {
	for {
		r := f.refs.Load()
		if r == 0 || f.closed.Load() {
			return false
		}
		if f.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// Release drops a reference taken by Acquire. The last Release after Close
// unmaps the file. Calling Release more often than Acquire panics, like an
// unbalanced sync.WaitGroup.
func (f *File) Release() {
	f.release()
}

func (f *File) release() error {
	r := f.refs.Add(-1)
	switch {
	case r > 0:
		return nil
	case r < 0:
		panic("partlog/mmapfile: Release without matching Acquire")
	}
	if f.data == nil {
		return nil
	}
	// munmap only fails for invalid arguments, which would be a bug here; the
	// error is still reported when Close is the one dropping the last ref.
	if err := unix.Munmap(f.data); err != nil {
		return pathError(f.path, "munmap", err)
	}
	return nil
}

// Close closes the descriptor and drops the owner's reference. The mapping
// is unmapped now if no reader holds a reference, or else by the last
// Release. A second Close returns ErrClosed.
func (f *File) Close() error {
	if !f.closed.CompareAndSwap(false, true) {
		return pathError(f.path, "close", ErrClosed)
	}
	var err error
	if fd := f.fd.Swap(nil); fd != nil {
		if err = fd.Close(); err != nil {
			err = pathError(f.path, "close", err)
		}
	}
	return errors.Join(err, f.release())
}

// Mapped reports whether the mapping is still in place (it is false once the
// last reference has been dropped, and for a zero-length File after Close).
func (f *File) Mapped() bool { return f.refs.Load() > 0 }

func (f *File) checkWritable(op string) error {
	if f.closed.Load() {
		return pathError(f.path, op, ErrClosed)
	}
	if !f.writable {
		return pathError(f.path, op, ErrReadOnly)
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

// pathError wraps err with the operation and the path, keeping it
// inspectable with errors.Is and errors.As.
func pathError(path, op string, err error) error {
	return &os.PathError{Op: "partlog/mmapfile: " + op, Path: path, Err: err}
}

// Retire is Close for a File whose descriptor has gone to another (after
// Remap), with the owner's reference dropped on another goroutine: Acquire
// fails from the moment Retire returns, and the munmap, when no reader
// holds a reference, runs off the caller's path. Unmapping pages that
// were written through the mapping costs about a microsecond each here
// (each page's dirty bit moves to the page cache, the other CPUs' TLBs
// are shot down), which an append that outgrew its mapping would
// otherwise pay for the whole old mapping. One goroutine serves every
// retired File, started on demand and gone when none is left. munmap
// fails only on arguments that would be a bug here; such an error is
// dropped. Owner only.
func (f *File) Retire() {
	if !f.closed.CompareAndSwap(false, true) {
		return
	}
	if fd := f.fd.Swap(nil); fd != nil {
		_ = fd.Close()
	}
	retired.mu.Lock()
	retired.files = append(retired.files, f)
	start := !retired.running
	retired.running = true
	retired.mu.Unlock()
	if start {
		go unmapRetired()
	}
}

// retired is the queue of Files whose owner's reference Retire drops.
var retired struct {
	mu      sync.Mutex
	files   []*File
	running bool
}

func unmapRetired() {
	for {
		retired.mu.Lock()
		files := retired.files
		retired.files = nil
		if len(files) == 0 {
			retired.running = false
			retired.mu.Unlock()
			return
		}
		retired.mu.Unlock()
		for _, f := range files {
			_ = f.release()
		}
	}
}
