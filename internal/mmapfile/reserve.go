package mmapfile

import (
	"fmt"
	"os"

	"github.com/partlog/partlog/internal/fsutil"
	"github.com/partlog/partlog/internal/testhook"
	"golang.org/x/sys/unix"
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
	// Only the new range: the part below cur is already backed (Open
	// and the previous Grow reserved it), and so is the part a
	// Preallocate allocated (a prefault worker's, off the append path).
	start := max(cur, f.allocatedTo())
	if start >= n && f.lengthAt == 0 {
		f.size.Store(n)
		return nil
	}
	err := f.withFD(func(fd int) error {
		if f.lengthAt > 0 {
			// The length deferred by an Ahead open (a hole past the
			// reservation, as an Ahead create leaves it).
			if err := unix.Ftruncate(fd, f.lengthAt); err != nil {
				return fmt.Errorf("truncate: %w", err)
			}
			f.lengthAt = 0
		}
		if start >= n {
			return nil
		}
		if err := fallocate(fd, 0, start, n-start); err != nil {
			return err
		}
		// And the rest of n's page, the length kept: a store into the
		// mapping makes the file system reserve blocks for its whole
		// page, so on a file system of blocks smaller than a page (ext4
		// under 512 MiB) a full disk faulted the store (SIGBUS) for
		// blocks past n no call had allocated.
		if pg := int64(os.Getpagesize()); n%pg != 0 {
			return fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, n, pg-n%pg)
		}
		return nil
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
