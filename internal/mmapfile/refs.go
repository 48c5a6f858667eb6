package mmapfile

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

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
