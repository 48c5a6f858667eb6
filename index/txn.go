package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/partlog/partlog/internal/mmapfile"
)

// txnReadChunk is how many entries are read per pread.
const txnReadChunk = 64

// TxnIndex is a segment's .txnindex file: the aborted transactions whose
// ABORT marker is in the segment (formats.md §4.6). It is a plain file
// written with pwrite, not mapped, and created on the first Append: a
// missing file means "no aborted transaction here". See the package comment
// for the concurrency rules.
type TxnIndex struct {
	path       string
	baseOffset int64
	writable   bool

	// mu is held exclusively while the file is created, cut or closed, and
	// shared by readers. Append holds it shared: it only writes past the
	// published size.
	mu     sync.RWMutex
	f      *os.File // guarded by mu; nil until the file exists
	closed bool     // guarded by mu

	// size is the published length in bytes, a multiple of TxnEntrySize
	// except for a partial trailing entry found at open.
	size atomic.Int64

	// lastOffset is the LastOffset of the last entry, valid if hasLast.
	// Writer only.
	lastOffset int64
	hasLast    bool
}

// OpenTxnIndex opens the transaction index at path. A writable index whose
// file does not exist starts empty and creates the file on the first Append.
// A read-only open of a missing file fails with an error satisfying
// errors.Is(err, fs.ErrNotExist).
func OpenTxnIndex(path string, baseOffset int64, readOnly bool) (*TxnIndex, error) {
	// Never through a symbolic link; a non-regular file is refused.
	f, size, err := mmapfile.OpenRegular(path, !readOnly)
	if err != nil {
		if !readOnly && errors.Is(err, fs.ErrNotExist) {
			return NewTxnIndex(path, baseOffset), nil
		}
		return nil, fmt.Errorf("partlog/index: open transaction index: %w", err)
	}
	t := &TxnIndex{path: path, baseOffset: baseOffset, writable: !readOnly}
	t.f = f
	t.size.Store(size)
	if n := size / TxnEntrySize; n > 0 {
		var b [TxnEntrySize]byte
		if _, err := f.ReadAt(b[:], (n-1)*TxnEntrySize); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("partlog/index: read transaction index %s: %w", path, err)
		}
		t.lastOffset = int64(binary.BigEndian.Uint64(b[18:]))
		t.hasLast = true
	}
	return t, nil
}

// NewTxnIndex returns the writable transaction index at path of a
// segment known to have no .txnindex file yet (a new segment, or one whose
// directory listing lacks it): it starts empty and creates the file on the
// first Append, as OpenTxnIndex does for a missing file, without looking.
func NewTxnIndex(path string, baseOffset int64) *TxnIndex {
	return &TxnIndex{path: path, baseOffset: baseOffset, writable: true}
}

// Path returns the file's path.
func (t *TxnIndex) Path() string { return t.path }

// BaseOffset returns the base offset of the segment.
func (t *TxnIndex) BaseOffset() int64 { return t.baseOffset }

// Entries returns the number of complete entries.
func (t *TxnIndex) Entries() int64 { return t.size.Load() / TxnEntrySize }

// FileSize returns the length of the file (0 if it does not exist).
func (t *TxnIndex) FileSize() int64 { return t.size.Load() }

// Append writes e at the end of the index. Its LastOffset must be greater
// than the previous entry's (ErrOffsetOrder) and not below the base offset
// (ErrOffsetOverflow). A partial trailing entry left by a crash is
// overwritten. Writer only.
func (t *TxnIndex) Append(e AbortedTxn) error {
	if !t.writable {
		return fmt.Errorf("%w: %s", ErrReadOnly, t.path)
	}
	if e.LastOffset < t.baseOffset {
		return fmt.Errorf("%w: last offset %d below base offset %d in %s", ErrOffsetOverflow, e.LastOffset, t.baseOffset, t.path)
	}
	if t.hasLast && e.LastOffset <= t.lastOffset {
		return fmt.Errorf("%w: aborted transaction with last offset %d after %d in %s", ErrOffsetOrder, e.LastOffset, t.lastOffset, t.path)
	}
	if err := t.ensureFile(); err != nil {
		return err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return fmt.Errorf("%w: %s", ErrClosed, t.path)
	}
	var b [TxnEntrySize]byte
	AppendAbortedTxn(b[:0], e)
	pos := t.size.Load() / TxnEntrySize * TxnEntrySize
	if _, err := t.f.WriteAt(b[:], pos); err != nil {
		return fmt.Errorf("partlog/index: append to transaction index %s: %w", t.path, err)
	}
	t.size.Store(pos + TxnEntrySize)
	t.lastOffset, t.hasLast = e.LastOffset, true
	return nil
}

func (t *TxnIndex) ensureFile() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("%w: %s", ErrClosed, t.path)
	}
	if t.f != nil {
		return nil
	}
	f, err := os.OpenFile(t.path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("partlog/index: create transaction index: %w", err)
	}
	t.f = f
	return nil
}

// scan calls fn for each complete entry in file order with its byte
// position, until fn returns false. It holds the read lock throughout; fn
// must not call other methods of t. An entry with a bad version stops the
// scan with a *CorruptionError.
func (t *TxnIndex) scan(fn func(pos int64, e AbortedTxn) bool) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return fmt.Errorf("%w: %s", ErrClosed, t.path)
	}
	if t.f == nil {
		return nil
	}
	end := t.size.Load() / TxnEntrySize * TxnEntrySize
	var buf [txnReadChunk * TxnEntrySize]byte
	for pos := int64(0); pos < end; {
		chunk := buf[:min(int64(len(buf)), end-pos)]
		if _, err := t.f.ReadAt(chunk, pos); err != nil {
			if errors.Is(err, io.EOF) {
				return corruptf(t.path, pos, "file shorter than its %d published bytes", end)
			}
			return fmt.Errorf("partlog/index: read transaction index %s: %w", t.path, err)
		}
		for off := 0; off < len(chunk); off += TxnEntrySize {
			e, err := DecodeAbortedTxn(chunk[off:])
			if err != nil {
				return corruptf(t.path, pos+int64(off), "unexpected aborted transaction version %d", e.Version)
			}
			if !fn(pos+int64(off), e) {
				return nil
			}
		}
		pos += int64(len(chunk))
	}
	return nil
}

// CollectAbortedTxns appends to dst the entries that overlap the fetch range
// [fetchOffset, upperBoundOffset): LastOffset ≥ fetchOffset and
// FirstOffset < upperBoundOffset, in file order. complete is true when an
// entry with LastStableOffset ≥ upperBoundOffset was seen, meaning later
// segments cannot hold a relevant abort and the caller can stop searching
// (Kafka's TransactionIndex.collectAbortedTxns; recovery.md §4.4).
func (t *TxnIndex) CollectAbortedTxns(dst []AbortedTxn, fetchOffset, upperBoundOffset int64) (txns []AbortedTxn, complete bool, err error) {
	err = t.scan(func(_ int64, e AbortedTxn) bool {
		if e.LastOffset >= fetchOffset && e.FirstOffset < upperBoundOffset {
			dst = append(dst, e)
		}
		if e.LastStableOffset >= upperBoundOffset {
			complete = true
			return false
		}
		return true
	})
	return dst, complete, err
}

// All returns every complete entry in file order. A bad version ends the
// list with a *CorruptionError; a partial trailing entry is skipped as Kafka
// does (Sanity reports it).
func (t *TxnIndex) All() ([]AbortedTxn, error) {
	out := make([]AbortedTxn, 0, t.Entries())
	err := t.scan(func(_ int64, e AbortedTxn) bool {
		out = append(out, e)
		return true
	})
	return out, err
}

// TruncateTo removes the first entry whose LastOffset is ≥ offset and every
// entry after it (formats.md §4.6). Writer only.
func (t *TxnIndex) TruncateTo(offset int64) error {
	if !t.writable {
		return fmt.Errorf("%w: %s", ErrReadOnly, t.path)
	}
	cut := int64(-1)
	var prev AbortedTxn
	hasPrev := false
	err := t.scan(func(pos int64, e AbortedTxn) bool {
		if e.LastOffset >= offset {
			cut = pos
			return false
		}
		prev, hasPrev = e, true
		return true
	})
	if err != nil {
		return err
	}
	if cut < 0 {
		return nil
	}
	if err := t.cut(cut); err != nil {
		return err
	}
	t.lastOffset, t.hasLast = prev.LastOffset, hasPrev
	return nil
}

// Reset empties the index (the file stays, with length 0). Writer only.
func (t *TxnIndex) Reset() error {
	if !t.writable {
		return fmt.Errorf("%w: %s", ErrReadOnly, t.path)
	}
	if err := t.cut(0); err != nil {
		return err
	}
	t.hasLast = false
	return nil
}

func (t *TxnIndex) cut(n int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("%w: %s", ErrClosed, t.path)
	}
	if t.f == nil {
		return nil
	}
	if err := t.f.Truncate(n); err != nil {
		return fmt.Errorf("partlog/index: truncate transaction index: %w", err)
	}
	t.size.Store(n)
	return nil
}

// Sync makes the entries and the file length durable. Writer only.
func (t *TxnIndex) Sync() error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return fmt.Errorf("%w: %s", ErrClosed, t.path)
	}
	if t.f == nil || !t.writable {
		return nil
	}
	if err := t.f.Sync(); err != nil {
		return fmt.Errorf("partlog/index: sync transaction index: %w", err)
	}
	return nil
}

// Close closes the file. Writer only.
func (t *TxnIndex) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("%w: %s", ErrClosed, t.path)
	}
	t.closed = true
	if t.f == nil {
		return nil
	}
	if err := t.f.Close(); err != nil {
		return fmt.Errorf("partlog/index: close transaction index: %w", err)
	}
	return nil
}

// Sanity checks the file and returns a *CorruptionError on the first
// problem: the length is a multiple of 34; every version is 0; every
// LastOffset is ≥ the base offset (Kafka's check, formats.md §4.5 item 3);
// FirstOffset ≤ LastOffset; LastOffset strictly increases.
func (t *TxnIndex) Sanity() error {
	if size := t.size.Load(); size%TxnEntrySize != 0 {
		return corruptf(t.path, size/TxnEntrySize*TxnEntrySize, "partial trailing entry of %d bytes", size%TxnEntrySize)
	}
	var bad error
	var prevLast int64
	first := true
	err := t.scan(func(pos int64, e AbortedTxn) bool {
		bad = checkAbortedTxn(t.path, pos, t.baseOffset, e, prevLast, first)
		prevLast, first = e.LastOffset, false
		return bad == nil
	})
	if err != nil {
		return err
	}
	return bad
}

func checkAbortedTxn(path string, pos, baseOffset int64, e AbortedTxn, prevLast int64, first bool) error {
	switch {
	case e.LastOffset < baseOffset:
		return corruptf(path, pos, "last offset %d below the base offset %d", e.LastOffset, baseOffset)
	case e.FirstOffset > e.LastOffset:
		return corruptf(path, pos, "first offset %d after last offset %d", e.FirstOffset, e.LastOffset)
	case !first && e.LastOffset <= prevLast:
		return corruptf(path, pos, "last offsets not increasing: %d after %d", e.LastOffset, prevLast)
	}
	return nil
}
