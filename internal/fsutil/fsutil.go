// Package fsutil holds the few file-system rules every package of partlog
// applies the same way: which directory entries are files it may use
// (Usable), how a small file is read whole (ReadSmall, bounded), and how
// much of bad input an error message quotes (Excerpt, Clip).
package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"syscall"
)

// Usable reports whether a directory entry (from os.ReadDir, which never
// follows symbolic links) is a regular file that partlog may read, map,
// rename or write. Symbolic links, directories, devices, FIFOs and sockets
// are not: a symbolic link named like a segment could make a write,
// preallocation or zero-fill land outside the directory, and a directory
// named like one cannot be mapped. why names what the entry is when ok is
// false ("directory", "symbolic link", "not a regular file").
//
// This is the one place that decides it: every listing of a partition
// directory (recovery, the Log's load, snapshots) calls it.
func Usable(de fs.DirEntry) (ok bool, why string) {
	t := de.Type()
	switch {
	case t.IsRegular():
		return true, ""
	case t&fs.ModeSymlink != 0:
		return false, "symbolic link"
	case t.IsDir():
		return false, "directory"
	}
	return false, "not a regular file"
}

// SmallFileLimit is the largest file ReadSmall reads: far above any
// checkpoint, metadata file or marker a broker writes, far below what
// would exhaust memory. A file larger than this is damage (a crashed file
// system leaves zero-filled files of any length).
const SmallFileLimit = 16 << 20

// ErrTooLarge is returned (wrapped) by ReadSmall for a file above its
// limit, before anything is read.
var ErrTooLarge = errors.New("file too large")

// ErrNotRegular is returned (wrapped) by ReadSmall for a path that is not a
// regular file (a directory, a FIFO, a device).
var ErrNotRegular = errors.New("not a regular file")

// ReadSmall reads the whole file at path if it is a regular file of at
// most SmallFileLimit bytes. A missing file gives an error satisfying
// errors.Is(err, fs.ErrNotExist); a larger one fails with ErrTooLarge
// after a stat, without reading it; a FIFO or device is refused without
// blocking on it (ErrNotRegular).
func ReadSmall(path string) ([]byte, error) {
	return readLimit(path, SmallFileLimit)
}

func readLimit(path string, limit int64) ([]byte, error) {
	// Plain syscalls, no *os.File: the runtime poller's fcntl and epoll
	// calls would double the cost of reading a checkpoint, twice per
	// partition at a broker's start. O_NONBLOCK: a FIFO is refused below
	// instead of blocking the open.
	fd, err := openFD(path, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, &fs.PathError{Op: "read", Path: path, Err: ErrNotRegular}
	}
	if st.Size > limit {
		return nil, &fs.PathError{Op: "read", Path: path,
			Err: fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, st.Size, limit)}
	}
	// The file may grow while it is read: never read past the limit.
	b := make([]byte, 0, min(st.Size, limit)+1)
	for {
		if int64(len(b)) > limit {
			return nil, &fs.PathError{Op: "read", Path: path,
				Err: fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)}
		}
		if len(b) == cap(b) {
			b = slices.Grow(b, min(int(limit+1)-len(b), max(len(b), 512)))
		}
		n, err := syscall.Read(fd, b[len(b):min(cap(b), int(limit+1))])
		if err == syscall.EINTR || err == syscall.EAGAIN {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// Open is os.OpenFile (with O_CLOEXEC) for a regular file or directory,
// without registering the descriptor with the runtime's poller:
// os.OpenFile's attempt costs four fcntl and an epoll_ctl per open, all
// useless for such files (several per partition at a broker's start).
// flag must not hold O_NONBLOCK (os.NewFile would register it). Errors are
// *fs.PathError, so errors.Is(err, fs.ErrNotExist) and the like hold.
func Open(path string, flag int, perm uint32) (*os.File, error) {
	fd, err := openFD(path, flag, perm)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openFD is open(2) with O_CLOEXEC, retried on EINTR.
func openFD(path string, flag int, perm uint32) (int, error) {
	for {
		fd, err := syscall.Open(path, flag|syscall.O_CLOEXEC, perm)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

// ExcerptLen is the most bytes of bad input an error message quotes.
const ExcerptLen = 100

// Excerpt returns s if it is at most ExcerptLen bytes long, else its
// first ExcerptLen bytes followed by a note of the length left out.
func Excerpt(s string) string {
	if len(s) <= ExcerptLen {
		return s
	}
	return excerpt(s[:ExcerptLen], len(s))
}

// Clip returns args with every string, []byte and error argument longer
// than ExcerptLen replaced by its Excerpt (a string), for building an
// error message about bad input with fmt, so that %q of one line of a
// 16 MiB file quotes ~100 bytes of it, not all of it. args itself is not
// modified.
func Clip(args []any) []any {
	var out []any
	for i, a := range args {
		var head string
		var n int
		switch v := a.(type) {
		case string:
			head, n = v, len(v)
		case []byte:
			head, n = string(v[:min(len(v), ExcerptLen)]), len(v)
		case error:
			head = v.Error()
			n = len(head)
		default:
			continue
		}
		if n <= ExcerptLen {
			continue
		}
		if out == nil {
			out = slices.Clone(args)
		}
		out[i] = excerpt(head[:ExcerptLen], n)
	}
	if out == nil {
		return args
	}
	return out
}

func excerpt(head string, n int) string {
	return fmt.Sprintf("%s...(%d more bytes)", head, n-len(head))
}
