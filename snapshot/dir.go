package snapshot

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/partlog/partlog/internal/crc32c"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/fsutil"
)

// File is one snapshot file found in a directory.
type File struct {
	// Offset is the offset in the file name: the snapshot reflects every
	// batch with offset < Offset.
	Offset int64
	// Path is the directory joined with the file name.
	Path string
}

// chunkEntries is how many entries Write and Read move per system call
// (736 KiB). Streaming through one small buffer, instead of materialising
// the whole file, avoids faulting in a second 46 MB buffer for a
// 1M-producer snapshot, which costs more than the encoding itself.
const chunkEntries = 16384

// Write stores entries as the snapshot for offset in dir, atomically: it
// writes the file to `<name>.snapshot.tmp` (see filenames.Temp), fsyncs it,
// renames it over `<name>.snapshot` and fsyncs dir. A crash leaves either
// the old file (or none) or the complete new one, plus at worst a stray
// temporary file. An existing snapshot at offset is replaced. The bytes are
// exactly Encode(nil, entries).
func Write(dir string, offset int64, entries []Entry) error {
	if offset < 0 {
		return fmt.Errorf("%w: snapshot offset %d is negative", ErrInvalidArgument, offset)
	}
	if len(entries) > MaxEntries {
		return fmt.Errorf("%w: %d entries exceed the int32 count", ErrInvalidArgument, len(entries))
	}
	return fsutil.WriteFileAtomicFunc(filepath.Join(dir, filenames.Make(offset, filenames.Snapshot)), func(f *os.File) error { return writeEntries(f, entries) })
}

// writeEntries streams the encoding of entries to f, which must be empty
// and positioned at 0: header and entries chunk by chunk while the CRC is
// accumulated, then the CRC is stored at its position.
func writeEntries(f *os.File, entries []Entry) error {
	buf := make([]byte, HeaderSize+EntrySize*min(len(entries), chunkEntries))
	putHeader(buf, len(entries))
	crc := crc32c.Update(0, buf[countPos:HeaderSize])
	filled := HeaderSize // the first chunk carries the header
	rest := entries
	for {
		k := min(len(rest), chunkEntries)
		p := buf[filled : filled+EntrySize*k]
		putEntries(p, rest[:k])
		crc = crc32c.Update(crc, p)
		if _, err := f.Write(buf[:filled+len(p)]); err != nil {
			return err
		}
		rest = rest[k:]
		if len(rest) == 0 {
			break
		}
		filled = 0
	}
	var stored [4]byte
	binary.BigEndian.PutUint32(stored[:], crc)
	_, err := f.WriteAt(stored[:], crcPos)
	return err
}

// Read reads and decodes the snapshot file at path, with the checks and
// results of Decode. Invalid contents give a *CorruptionError whose Path is
// path (errors.Is(err, ErrCorrupt)); I/O errors are returned wrapped and are
// not ErrCorrupt. The distinction matters: Kafka deletes a corrupt snapshot
// and tries an older one, but treats an I/O error as a failed log
// directory.
//
// A regular file is read in one pass through a small buffer: the header is
// checked against the file size, the entry slice is allocated once, and
// each chunk is added to the CRC and decoded; the entries are returned only
// if the CRC matches at the end.
func Read(path string) ([]Entry, error) {
	f, err := fsutil.Open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("partlog/snapshot: read: %w", err)
	}
	defer f.Close()
	entries, err := readEntries(f)
	if err != nil {
		var ce *CorruptionError
		if errors.As(err, &ce) {
			ce.Path = path
			return nil, ce
		}
		return nil, fmt.Errorf("partlog/snapshot: read %s: %w", path, err)
	}
	return entries, nil
}

func readEntries(f *os.File) ([]Entry, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		b, err := io.ReadAll(f)
		if err != nil {
			return nil, err
		}
		return Decode(b)
	}
	size := fi.Size()
	var hdr [HeaderSize]byte
	h := hdr[:min(size, HeaderSize)]
	if _, err := io.ReadFull(f, h); err != nil {
		return nil, shrunk(err, 0)
	}
	count, err := checkHeader(h, size)
	if err != nil {
		return nil, err
	}
	entries := make([]Entry, count)
	crc := crc32c.Update(0, hdr[countPos:])
	buf := make([]byte, EntrySize*min(count, chunkEntries))
	for done := 0; done < count; {
		k := min(count-done, chunkEntries)
		p := buf[:EntrySize*k]
		if _, err := io.ReadFull(f, p); err != nil {
			return nil, shrunk(err, HeaderSize+EntrySize*int64(done))
		}
		crc = crc32c.Update(crc, p)
		getEntries(entries[done:done+k], p)
		done += k
	}
	if stored := binary.BigEndian.Uint32(hdr[crcPos:]); stored != crc {
		return nil, crcMismatch(stored, crc)
	}
	return entries, nil
}

// shrunk turns an early end of file (the file was cut while being read)
// into corruption, like any truncated snapshot; other errors pass through.
func shrunk(err error, at int64) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corruptf(at, "file ended while reading (%v)", err)
	}
	return err
}

// List returns the snapshot files of dir, sorted by offset. Only regular
// files with canonical names (filenames.ParseSnapshot) are listed; temporary files,
// `.deleted` files, sub-directories and foreign names are skipped.
func List(dir string) ([]File, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("partlog/snapshot: list: %w", err)
	}
	var files []File
	for _, de := range des {
		offset, ok := filenames.ParseSnapshot(de.Name())
		if usable, _ := fsutil.Usable(de); !ok || !usable {
			continue
		}
		files = append(files, File{Offset: offset, Path: filepath.Join(dir, de.Name())})
	}
	slices.SortFunc(files, func(a, b File) int { return cmp.Compare(a.Offset, b.Offset) })
	return files, nil
}

// Latest returns the snapshot with the highest offset in dir; ok is false
// if there is none.
func Latest(dir string) (f File, ok bool, err error) {
	files, err := List(dir)
	if err != nil || len(files) == 0 {
		return File{}, false, err
	}
	return files[len(files)-1], true, nil
}

// NewestAtOrBelow returns the snapshot with the highest offset <= offset;
// ok is false if there is none. This is the snapshot a rebuild to offset
// starts from (after DeleteAbove/DeleteAtOrBelow, it is simply the newest).
func NewestAtOrBelow(dir string, offset int64) (f File, ok bool, err error) {
	files, err := List(dir)
	if err != nil {
		return File{}, false, err
	}
	for i := len(files) - 1; i >= 0; i-- {
		if files[i].Offset <= offset {
			return files[i], true, nil
		}
	}
	return File{}, false, nil
}

// DeleteAbove deletes every snapshot in dir whose offset is > offset and
// fsyncs dir if it deleted any. It returns the files it deleted. Kafka runs
// this with the rebuild target T (truncation, recovery: "offset > T").
func DeleteAbove(dir string, offset int64) ([]File, error) {
	return deleteWhere(dir, func(o int64) bool { return o > offset })
}

// DeleteBelow deletes every snapshot in dir whose offset is < offset
// (strictly) and fsyncs dir if it deleted any. It returns the files it
// deleted. Note that Kafka's rebuild removes snapshots at or below the log
// start offset; use DeleteAtOrBelow for that rule.
func DeleteBelow(dir string, offset int64) ([]File, error) {
	return deleteWhere(dir, func(o int64) bool { return o < offset })
}

// DeleteAtOrBelow deletes every snapshot in dir whose offset is <= offset
// and fsyncs dir if it deleted any. It returns the files it deleted. This is
// Kafka's rule for the log start offset (recovery.md §2.11 step 3.1): a
// snapshot at exactly the log start describes no batch of the log and is
// removed.
func DeleteAtOrBelow(dir string, offset int64) ([]File, error) {
	return deleteWhere(dir, func(o int64) bool { return o <= offset })
}

// deleteWhere removes the listed snapshots whose offset satisfies match. A
// file that is already gone counts as deleted. The directory is fsynced
// when at least one file was removed, also when a later removal fails.
func deleteWhere(dir string, match func(int64) bool) ([]File, error) {
	files, err := List(dir)
	if err != nil {
		return nil, err
	}
	var deleted []File
	var firstErr error
	for _, f := range files {
		if !match(f.Offset) {
			continue
		}
		if err := os.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			firstErr = fmt.Errorf("partlog/snapshot: delete: %w", err)
			break
		}
		deleted = append(deleted, f)
	}
	if len(deleted) > 0 {
		if err := fsutil.SyncDir(dir); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return deleted, firstErr
}

// RemoveTempFiles deletes the temporary files a crashed Write left in dir
// (`<20 digits>.snapshot.tmp`), fsyncs dir if it removed any, and returns
// their paths. Kafka leaves such files alone, so this is our loader's job.
// It must not run concurrently with Write on the same directory.
func RemoveTempFiles(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("partlog/snapshot: list: %w", err)
	}
	var removed []string
	var firstErr error
	for _, de := range des {
		base, ok := strings.CutSuffix(de.Name(), filenames.Temp)
		if usable, _ := fsutil.Usable(de); !ok || !usable {
			continue
		}
		if _, ok := filenames.ParseSnapshot(base); !ok {
			continue
		}
		p := filepath.Join(dir, de.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			firstErr = fmt.Errorf("partlog/snapshot: delete: %w", err)
			break
		}
		removed = append(removed, p)
	}
	if len(removed) > 0 {
		if err := fsutil.SyncDir(dir); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return removed, firstErr
}
