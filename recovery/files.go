package recovery

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/fsutil"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/segment"
)

// sprintf is fmt.Sprintf without arguments being formatted when there are
// none.
func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

// run is the state of one Run.
type run struct {
	o   Options
	r   *Report
	dir string
	// files maps the live base names of the directory (as they are once
	// the leftover step is done) to the path holding their bytes. Under
	// DryRun a .swap file that would be renamed keeps its real path here.
	files    map[string]string
	dirDirty bool
	// swapped holds the base offsets of segments completed from .swap
	// files; they are validated like unflushed segments.
	swapped map[int64]bool
	// createAt is where an empty segment replaces an empty one found below
	// its predecessor's end (E5), or -1.
	createAt int64
	// all is every segment found, kept or dropped.
	all []*seg
	// What the log that opens the directory adopts (Load).
	state     *producerstate.Manager
	epochList []checkpoint.EpochEntry
	// epochDrops: a kept batch's leader epoch is below its predecessor's.
	epochDrops bool
	// epochFile is what the listing says of leader-epoch-checkpoint.
	epochFile epochListing
	// active is the active segment made from the pending files
	// (Options.OpenActive), returned in Loaded.Active.
	active *segment.Segment
}

func (x *run) path(name string) string {
	if p, ok := x.files[name]; ok {
		return p
	}
	return filepath.Join(x.dir, name)
}

func (x *run) exists(name string) bool { _, ok := x.files[name]; return ok }

// step reports a finished step to the crash hook.
func (x *run) step(name string) error {
	if x.o.DryRun || x.o.hooks == nil || x.o.hooks.step == nil {
		return nil
	}
	return x.o.hooks.step(name)
}

// syncDir fsyncs the directory if something in it changed.
func (x *run) syncDir() error {
	if !x.dirDirty || x.o.DryRun {
		return nil
	}
	if err := fsutil.SyncDir(x.dir); err != nil {
		return fmt.Errorf("partlog/recovery: %w", err)
	}
	x.dirDirty = false
	return nil
}

// quarantinePath returns a free path for name in the quarantine directory,
// creating the directory.
func (x *run) quarantinePath(name string) (string, error) {
	if err := mkdirSynced(x.o.Quarantine); err != nil {
		return "", fmt.Errorf("partlog/recovery: quarantine: %w", err)
	}
	q := x.o.Quarantine
	x.r.Quarantine = &q
	p := filepath.Join(q, name)
	for i := 1; ; i++ {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			return p, nil
		}
		p = filepath.Join(q, name+"."+strconv.Itoa(i))
	}
}

// mkdirSynced creates dir and its missing parents, fsyncing the parent of
// each directory it creates: a quarantine copy is synced with its own
// directory's entries before the bytes it saves are cut, and that is
// durable only if the directories leading to it are too.
func mkdirSynced(dir string) error {
	var missing []string
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := fsutil.SyncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes the live file name (moving it to the quarantine when one
// is set) and records it as a change of the given kind and reason. Under
// DryRun it only records.
func (x *run) remove(name, kind, reason string) error {
	p, ok := x.files[name]
	if !ok {
		return nil
	}
	return x.removePath(name, p, kind, reason)
}

func (x *run) removePath(name, p, kind, reason string) error {
	x.r.RemovedFiles = append(x.r.RemovedFiles, name)
	delete(x.files, name)
	c := Change{File: name, Action: ActionRemove, Kind: kind, Reason: reason}
	if x.o.DryRun {
		x.r.change(c)
		return nil
	}
	x.dirDirty = true
	if x.o.Quarantine != "" {
		dst, err := x.quarantinePath(name)
		if err != nil {
			return err
		}
		c.Saved = filepath.Base(dst)
		if err := os.Rename(p, dst); err == nil {
			x.r.change(c)
			return nil
		} else if !errors.Is(err, syscall.EXDEV) {
			return fmt.Errorf("partlog/recovery: quarantine %s: %w", p, err)
		}
		if err := x.copyFile(p, dst, 0, -1); err != nil {
			return err
		}
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("partlog/recovery: remove %s: %w", p, err)
	}
	x.r.change(c)
	return nil
}

// copyFile copies [from, from+n) of src (n < 0: to the end) to a new file
// dst with fsutil.WriteFileAtomicFunc (a temporary file, fsynced, then
// renamed): a copy cut short by a full disk or a crash leaves no partial
// file under dst's name beside the complete copy of the next run.
func (x *run) copyFile(src, dst string, from, n int64) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("partlog/recovery: quarantine %s: %w", src, err)
	}
	defer in.Close()
	var r io.Reader = io.NewSectionReader(in, from, 1<<62)
	if n >= 0 {
		r = io.NewSectionReader(in, from, n)
	}
	err = fsutil.WriteFileAtomicFunc(dst, func(f *os.File) error {
		if x.o.hooks != nil && x.o.hooks.copy != nil {
			_, err := io.Copy(&hookedWriter{w: f, hook: x.o.hooks.copy, path: dst}, r)
			return err
		}
		return sparseCopy(f, r)
	})
	if err != nil {
		return fmt.Errorf("partlog/recovery: quarantine %s: %w", dst, err)
	}
	return nil
}

// sparseCopy copies r into f leaving holes where r has runs of zeros of
// a whole chunk: the zero tail of a preallocated active segment (up to a
// segment's size) is kept byte for byte in the quarantine without
// allocating disk for it.
func sparseCopy(f *os.File, r io.Reader) error {
	buf := make([]byte, 1<<20)
	var size int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			chunk := buf[:n]
			if batch.IsZero(chunk) {
				if _, serr := f.Seek(int64(n), io.SeekCurrent); serr != nil {
					return serr
				}
			} else if _, werr := f.Write(chunk); werr != nil {
				return werr
			}
			size += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return err
		}
	}
	// A hole at the end needs the length set.
	return f.Truncate(size)
}

// hookedWriter calls the copy hook after each write that succeeded.
type hookedWriter struct {
	w    io.Writer
	hook func(path string) error
	path string
}

func (h *hookedWriter) Write(p []byte) (int, error) {
	n, err := h.w.Write(p)
	if err == nil {
		err = h.hook(h.path)
	}
	return n, err
}

// livePath returns the path holding the bytes of the file name of the
// partition directory, or "" when there is none: the listed path of a
// segment-family file, else the file of that name in the directory (a
// checkpoint), when it exists.
func (x *run) livePath(name string) string {
	if p, ok := x.files[name]; ok {
		return p
	}
	if _, err := filenames.Parse(name); err == nil {
		return "" // listed in x.files while it is live
	}
	p := filepath.Join(x.dir, name)
	if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
		return p
	}
	return ""
}

// quarantineCopy copies the bytes of the file name from position from to
// its end into the quarantine (when one is set), before they are cut or
// replaced, and returns the copy's base name ("" when nothing was
// copied).
func (x *run) quarantineCopy(name string, from int64, label string) (string, error) {
	if x.o.Quarantine == "" || x.o.DryRun {
		return "", nil
	}
	p := x.livePath(name)
	if p == "" {
		return "", nil
	}
	dst, err := x.quarantinePath(name + label)
	if err != nil {
		return "", err
	}
	if err := x.copyFile(p, dst, from, -1); err != nil {
		return "", err
	}
	return filepath.Base(dst), nil
}

// rewrite records, and unless DryRun makes, the replacement of the file
// name by write (which must write it atomically): the old content, when
// there is one, is copied to the quarantine first and the write hook runs.
func (x *run) rewrite(name, kind, reason string, write func(target string) error) error {
	c := Change{File: name, Action: ActionCreate, Kind: kind, Reason: reason}
	if x.livePath(name) != "" {
		c.Action = ActionWrite
	}
	target := filepath.Join(x.dir, name)
	if x.o.DryRun {
		x.r.change(c)
		return nil
	}
	saved, err := x.quarantineCopy(name, 0, ".replaced")
	if err != nil {
		return err
	}
	c.Saved = saved
	if x.o.hooks != nil && x.o.hooks.write != nil {
		if err := x.o.hooks.write(target); err != nil {
			return fmt.Errorf("partlog/recovery: write %s: %w", target, err)
		}
	}
	if err := write(target); err != nil {
		return err
	}
	x.dirDirty = true
	x.r.change(c)
	return nil
}

// replace writes data as the live file name: a temporary file beside it,
// fsynced, renamed over it (see rewrite). Under DryRun it only records
// the change.
func (x *run) replace(name string, data []byte, kind, reason string) error {
	err := x.rewrite(name, kind, reason, func(target string) error {
		// The directory is synced once, after every change (dirDirty).
		if err := fsutil.ReplaceFile(target, data); err != nil {
			return fmt.Errorf("partlog/recovery: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	x.files[name] = filepath.Join(x.dir, name)
	return nil
}

// truncate cuts the live file name to size (after copying the tail to the
// quarantine) and fsyncs it.
func (x *run) truncate(name string, size int64, kind, reason string) error {
	c := Change{File: name, Action: ActionTruncate, Kind: kind, Reason: reason}
	if x.o.DryRun {
		x.r.change(c)
		return nil
	}
	saved, err := x.quarantineCopy(name, size, ".tail@"+strconv.FormatInt(size, 10))
	if err != nil {
		return err
	}
	c.Saved = saved
	p := x.path(name)
	f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("partlog/recovery: truncate %s: %w", p, err)
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("partlog/recovery: truncate %s: %w", p, err)
	}
	x.r.change(c)
	return nil
}

// readFile reads a whole index file through the open hook, if it holds at
// most limit bytes; a longer one is not read (fits is false), so a damaged
// file of any length costs no more memory than what it is compared with.
func (x *run) readFile(name string, limit int64) (b []byte, fits bool, err error) {
	p := x.path(name)
	if x.o.hooks != nil && x.o.hooks.open != nil {
		if err := x.o.hooks.open(p); err != nil {
			return nil, false, fmt.Errorf("partlog/recovery: read %s: %w", p, err)
		}
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, false, fmt.Errorf("partlog/recovery: read %s: %w", p, err)
	}
	defer f.Close()
	b, err = io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, false, fmt.Errorf("partlog/recovery: read %s: %w", p, err)
	}
	if int64(len(b)) > limit {
		return nil, false, nil
	}
	return b, true, nil
}

// IsNew reports whether dir holds no file of the segment family at all
// (no segment, index, snapshot or transient file of one, whatever its
// type): a new partition, which a log creates instead of loading. Any
// such name makes the directory one that Load must decide about.
func IsNew(dir string) (bool, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("partlog/recovery: list %s: %w", dir, err)
	}
	return NewEntries(des), nil
}

// NewEntries is IsNew for a listing already read (pass it on to Load in
// Options.Entries).
func NewEntries(des []fs.DirEntry) bool {
	for _, de := range des {
		name := strings.TrimSuffix(de.Name(), filenames.Temp)
		if _, err := filenames.Parse(name); err == nil || looksLikeSegmentFile(name) {
			return false
		}
	}
	return true
}
