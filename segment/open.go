package segment

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/mmapfile"
)

// ErrNeedsRecovery is returned by OpenActive when the segment does not
// end exactly after its last batch (a torn tail, zero padding, a corrupt
// batch) or its indexes fail their sanity checks: the directory was not
// closed cleanly.
var ErrNeedsRecovery = errors.New("partlog/segment: segment needs recovery")

// Opened says what the caller of OpenActive knows of the segment.
type Opened struct {
	// Recovered: package recovery has just loaded the directory, the
	// .log holds exactly Size bytes of valid batches and its indexes were
	// checked or rebuilt, so nothing is checked again: only the batches
	// after the last offset-index entry are read, for the next offset and
	// the timestamps. Otherwise (a cleanly closed directory) the indexes
	// must pass their sanity checks and the batches after the last
	// offset-index entry must be valid up to the exact end of the file (a
	// cleanly closed .log is trimmed to its data).
	Recovered bool
	Size      int64
}

// OpenActive opens the last segment of a directory for appending, as o
// says, then preallocates the file to SegmentBytes and maps it writable.
//
// A file of the segment that is a symbolic link, a directory or another
// non-regular file fails with ErrNeedsRecovery (recovery ignores it and
// rebuilds what is missing): nothing is ever written through a link.
func OpenActive(dir string, base int64, cfg Config, now time.Time, o Opened) (*Segment, error) {
	if o.Recovered {
		return openActive(dir, base, o.Size, cfg, now, false)
	}
	st, err := os.Lstat(filepath.Join(dir, filenames.Make(base, filenames.Log)))
	if err != nil {
		return nil, err
	}
	return openActive(dir, base, st.Size(), cfg, now, true)
}

func openActive(dir string, base, dataLen int64, cfg Config, now time.Time, check bool) (*Segment, error) {
	s := newSegment(dir, base, cfg, now)
	st, err := os.Lstat(s.Path(filenames.Log))
	switch {
	case err != nil:
		return nil, err
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrNeedsRecovery, s.Path(filenames.Log))
	case st.Size() != dataLen:
		return nil, fmt.Errorf("%w: %s holds %d bytes, expected %d", ErrNeedsRecovery, s.Path(filenames.Log), st.Size(), dataLen)
	}
	if err := s.openActiveIndexes(true, true); err != nil {
		return nil, err
	}
	if check {
		if err := errors.Join(s.offsetIndex.Sanity(), s.timeIndex.Sanity(), s.txnIndex.Sanity()); err != nil {
			_ = s.closeFiles()
			return nil, fmt.Errorf("%w: %w", ErrNeedsRecovery, err)
		}
	}
	// Mapped over its data, nothing reserved beyond it until the first
	// append needs it (see "Disk reservation" in the Segment doc).
	f, err := mmapfile.Open(s.Path(filenames.Log), mmapfile.Options{Ahead: true, Reserve: dataLen, Capacity: max(cfg.SegmentBytes, dataLen)})
	if err != nil {
		_ = s.closeFiles()
		return nil, err
	}
	s.log = f
	if err := s.loadTail(dataLen, check); err != nil {
		_ = s.closeFiles()
		return nil, err
	}
	if err := s.activate(dataLen); err != nil {
		return nil, err
	}
	return s, nil
}

// openActiveIndexes opens the indexes of an active segment being opened
// (txn: whether its .txnindex may exist). They are opened without
// following a link (ELOOP) and refuse any other non-regular file, which
// fails with ErrNeedsRecovery; an absent offset or time index (Kafka makes
// them lazily: a segment too small to be indexed) is made by its first
// entry or at roll and close. An index longer than MaxIndexBytes is cut
// to it (cut), or the open fails with index.ErrPastCapacity. On failure
// nothing is left open.
func (s *Segment) openActiveIndexes(txn, cut bool) error {
	if err := s.openWritableIndexes(false, txn, cut); err != nil {
		_ = s.closeFiles()
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EISDIR) || errors.Is(err, mmapfile.ErrNotRegular) {
			return fmt.Errorf("%w: %w", ErrNeedsRecovery, err)
		}
		return err
	}
	return nil
}

// activate finishes the open of an active segment whose .log is mapped
// (s.log) and holds size bytes, and whose tail state is set: the
// descriptor is parked and the prefaulter made. On failure every file is
// closed.
func (s *Segment) activate(size int64) error {
	s.size.Store(size)
	if err := s.log.ParkDescriptor(); err != nil {
		_ = s.closeFiles()
		return err
	}
	s.active = true
	s.noteIndexes()
	s.startPrefault()
	s.noteReserved()
	return nil
}

// Pending is the last segment of a cleanly closed directory with its files
// opened for appending, before anything of its .log is read or mapped: a
// caller that checks the segment (package recovery, which decides what a
// directory holds) reads the files it needs through it, checks them, and
// then either turns it into the active segment with what its check found
// (Activate) or lets it go (Close). Each file is thus opened, read and
// checked once at a clean reopen. A Pending is owned by one goroutine.
type Pending struct {
	s    *Segment
	log  *os.File // the .log, open read-write; nil once consumed
	size int64
}

// Tail is what a check of an active segment's .log found (the batches
// after the last offset-index entry, and the first batch): what its open
// would otherwise read again.
type Tail struct {
	// NextOffset is the offset after the last batch (the base offset of
	// an empty segment).
	NextOffset int64
	// MaxTimestamp and OffsetOfMaxTimestamp are the largest timestamp of
	// the time index's last entry and the batches after the last
	// offset-index entry, and its offset (batch.NoTimestamp and the base
	// offset when there is none); the first batch with the largest
	// timestamp wins, as an append's rule.
	MaxTimestamp, OffsetOfMaxTimestamp int64
	// RollingTimestamp is the first batch's largest timestamp
	// (batch.NoTimestamp for an empty segment), for segment.ms.
	RollingTimestamp int64
}

// OpenPending opens the files of the segment at base in dir for
// appending: the .log (a regular file, never through a link) without
// mapping it, and the indexes as an active segment's (txn: whether the
// directory listing holds its .txnindex). A link or other non-regular
// file fails with ErrNeedsRecovery; an index longer than cfg.MaxIndexBytes
// with index.ErrPastCapacity, unchanged (it is not cut before its owner
// checked it).
func OpenPending(dir string, base int64, cfg Config, now time.Time, txn bool) (*Pending, error) {
	s := newSegment(dir, base, cfg, now)
	f, size, err := mmapfile.OpenRegular(s.Path(filenames.Log), true)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, mmapfile.ErrNotRegular) {
			return nil, fmt.Errorf("%w: %w", ErrNeedsRecovery, err)
		}
		return nil, err
	}
	if err := s.openActiveIndexes(txn, false); err != nil {
		_ = f.Close()
		return nil, err
	}
	return &Pending{s: s, log: f, size: size}, nil
}

// Log returns the open .log and its length, for reading (not for closing).
func (p *Pending) Log() (*os.File, int64) { return p.log, p.size }

// OffsetIndex returns the offset index opened for appending.
func (p *Pending) OffsetIndex() *index.OffsetIndex { return p.s.offsetIndex }

// TimeIndex returns the time index opened for appending.
func (p *Pending) TimeIndex() *index.TimeIndex { return p.s.timeIndex }

// TxnIndex returns the transaction index opened for appending.
func (p *Pending) TxnIndex() *index.TxnIndex { return p.s.txnIndex }

// BaseOffset is the segment's base offset.
func (p *Pending) BaseOffset() int64 { return p.s.base }

// Activate returns the active segment, its .log mapped over its data as
// OpenActive maps it (the mapping grows with the reservation), with the state t the caller's check of these
// very files found: nothing is read or checked again. The Pending is
// consumed (on failure too: every file is then closed).
func (p *Pending) Activate(t Tail) (*Segment, error) {
	s, fd := p.s, p.log
	if fd == nil {
		return nil, ErrClosed
	}
	p.log = nil
	f, err := mmapfile.Open(s.Path(filenames.Log), mmapfile.Options{Ahead: true, FD: fd, Length: p.size, Reserve: p.size, Capacity: max(s.cfg.SegmentBytes, p.size)})
	if err != nil {
		_ = s.closeFiles()
		return nil, err
	}
	s.log = f
	s.nextOffset = t.NextOffset
	s.maxTimestamp, s.offsetOfMaxTimestamp = t.MaxTimestamp, t.OffsetOfMaxTimestamp
	s.rollingTimestamp = t.RollingTimestamp
	if err := s.activate(p.size); err != nil {
		return nil, err
	}
	return s, nil
}

// Close closes the files of a Pending that was not activated; after
// Activate it does nothing.
func (p *Pending) Close() error {
	if p.log == nil {
		return nil
	}
	err := p.log.Close()
	p.log = nil
	return errors.Join(err, p.s.closeFiles())
}

// loadTail reads the batches after the last offset-index entry for the
// next offset and the timestamps of an opened active segment; with check
// it validates them (a cleanly closed directory), without it they are
// the batches recovery has just validated and are only walked.
func (s *Segment) loadTail(dataLen int64, check bool) error {
	data := s.log.Bytes()[:dataLen]
	w := batch.NewWalker(data)
	first, ok := w.Next()
	if check && ok {
		_, err := batch.Check(data)
		ok = err == nil
	}
	if ok {
		s.rollingTimestamp = first.MaxTimestamp()
	}
	last := s.offsetIndex.LastEntry()
	start := int64(0)
	if s.offsetIndex.Entries() > 0 {
		start = int64(last.Position)
	}
	if start > dataLen {
		return fmt.Errorf("%w: %s: index entry points past the data", ErrNeedsRecovery, s.Path(filenames.Index))
	}
	if te := s.timeIndex.LastEntry(); s.timeIndex.Entries() > 0 {
		s.maxTimestamp, s.offsetOfMaxTimestamp = te.Timestamp, te.Offset
	}
	tail := func(v batch.View) {
		s.nextOffset = v.NextOffset()
		if ts := v.MaxTimestamp(); ts > s.maxTimestamp {
			s.maxTimestamp, s.offsetOfMaxTimestamp = ts, v.LastOffset()
		}
	}
	if !check {
		w := batch.NewWalker(data[start:])
		for v, ok := w.Next(); ok; v, ok = w.Next() {
			tail(v)
		}
	} else {
		it := batch.NewIterator(data[start:], start)
		for v, ok := it.Next(); ok; v, ok = it.Next() {
			tail(v)
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrNeedsRecovery, s.Path(filenames.Log), err)
		}
	}
	if s.offsetIndex.Entries() > 0 && s.nextOffset <= last.Offset {
		return fmt.Errorf("%w: %s: last index entry %d beyond the data", ErrNeedsRecovery, s.Path(filenames.Index), last.Offset)
	}
	return nil
}

// CheckIndexes runs the sanity checks of a sealed segment's offset index
// (opening it read-only).
func (s *Segment) CheckIndexes() error {
	_, err := s.index()
	return err
}

// LastEntryOffset exposes the offset index's last entry (for tests and
// tools).
func (s *Segment) LastEntryOffset() (index.OffsetEntry, error) {
	x, err := s.index()
	if err != nil {
		return index.OffsetEntry{}, err
	}
	return x.LastEntry(), nil
}
