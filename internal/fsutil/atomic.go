package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/testhook"
)

// WriteFileAtomic replaces path with data (WriteFileAtomicFunc).
func WriteFileAtomic(path string, data []byte) error {
	return WriteFileAtomicFunc(path, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// WriteFileAtomicFunc replaces path with what fill writes, the way Kafka
// replaces its checkpoint files and recovery.md §1.5 requires of every
// file partlog rewrites: write `<path>.tmp` (truncating a stale one),
// fsync it, rename it over path, then fsync the directory. A crash leaves
// either the old or the new content at path, never a partial file. A
// symbolic link is never written through: a link at the temporary name
// fails the write, one at path is replaced by the rename. On failure the
// temporary file is removed (best effort) and path is untouched.
//
// fill gets the temporary file, empty and positioned at 0.
func WriteFileAtomicFunc(path string, fill func(*os.File) error) error {
	if h := testhook.WriteFile.Load(); h != nil {
		if err := (*h)(path); err != nil {
			return fmt.Errorf("partlog: write %s: %w", path, err)
		}
	}
	if err := ReplaceFileFunc(path, fill); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// ReplaceFile replaces path with data (ReplaceFileFunc).
func ReplaceFile(path string, data []byte) error {
	return ReplaceFileFunc(path, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// ReplaceFileFunc is WriteFileAtomicFunc without the directory's fsync,
// for a caller that replaces several files of one directory and syncs it
// once (recovery): until then the rename may be lost, never half done.
func ReplaceFileFunc(path string, fill func(*os.File) error) (err error) {
	tmp := path + filenames.Temp
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("partlog: create %s: %w", tmp, err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if err = fill(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("partlog: write %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("partlog: fsync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("partlog: close %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("partlog: rename %s: %w", tmp, err)
	}
	return nil
}

// SyncDir fsyncs a directory, so that the creations, renames and removals
// of entries in it survive a power failure.
func SyncDir(dir string) error {
	dir = filepath.Clean(dir)
	d, err := Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("partlog: open directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("partlog: fsync directory %s: %w", dir, err)
	}
	if h := testhook.Synced.Load(); h != nil {
		(*h)(dir)
	}
	return nil
}

// WritePrivateFileAtomic is WriteFileAtomic for a secret: the file is
// readable and writable by its owner only (0600) before a byte of it is
// written, whatever mode a stale temporary file had.
func WritePrivateFileAtomic(path string, data []byte) error {
	return WriteFileAtomicFunc(path, func(f *os.File) error {
		if err := f.Chmod(0o600); err != nil {
			return err
		}
		_, err := f.Write(data)
		return err
	})
}
