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
	"github.com/partlog/partlog/internal/mmapfile"
)

// ErrNeedsRecovery is returned by OpenActive when the segment does not
// end exactly after its last batch (a torn tail, zero padding, a corrupt
// batch) or its indexes fail their sanity checks: the directory was not
// closed cleanly.
var ErrNeedsRecovery = errors.New("partlog/segment: segment needs recovery")

// OpenActive opens the last segment of a cleanly closed directory for
// appending: the indexes must pass their sanity checks, and the batches
// after the last offset-index entry must be valid up to the exact end of
// the file (a cleanly closed .log is trimmed to its data). The file is
// then preallocated to SegmentBytes and mapped writable.
//
// A file of the segment that is a symbolic link, a directory or another
// non-regular file fails with ErrNeedsRecovery (recovery ignores it and
// rebuilds what is missing): nothing is ever written through a link.
func OpenActive(dir string, base int64, cfg Config, now time.Time) (*Segment, error) {
	st, err := os.Lstat(filepath.Join(dir, MakeFileName(base, LogSuffix)))
	if err != nil {
		return nil, err
	}
	return openActive(dir, base, st.Size(), cfg, now, true)
}

// OpenRecovered opens for appending the last segment of a directory that
// package recovery has just loaded, whose .log holds exactly size bytes of
// valid batches and whose indexes recovery checked or rebuilt: nothing is
// checked again. Only the batches after the last offset-index entry are
// read, for the next offset and the timestamps.
func OpenRecovered(dir string, base, size int64, cfg Config, now time.Time) (*Segment, error) {
	return openActive(dir, base, size, cfg, now, false)
}

func openActive(dir string, base, dataLen int64, cfg Config, now time.Time, check bool) (*Segment, error) {
	s := newSegment(dir, base, cfg, now)
	st, err := os.Lstat(s.Path(LogSuffix))
	switch {
	case err != nil:
		return nil, err
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrNeedsRecovery, s.Path(LogSuffix))
	case st.Size() != dataLen:
		return nil, fmt.Errorf("%w: %s holds %d bytes, expected %d", ErrNeedsRecovery, s.Path(LogSuffix), st.Size(), dataLen)
	}
	// The indexes are opened without following a link (ELOOP) and refuse
	// any other non-regular file; an absent offset or time index (Kafka
	// makes them lazily: a segment too small to be indexed) is made by its
	// first entry or at roll and close.
	if err := s.openWritableIndexes(false); err != nil {
		_ = s.closeFiles()
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EISDIR) || errors.Is(err, mmapfile.ErrNotRegular) {
			return nil, fmt.Errorf("%w: %w", ErrNeedsRecovery, err)
		}
		return nil, err
	}
	if check {
		if err := errors.Join(s.offsetIndex.Sanity(), s.timeIndex.Sanity(), s.txnIndex.Sanity()); err != nil {
			_ = s.closeFiles()
			return nil, fmt.Errorf("%w: %w", ErrNeedsRecovery, err)
		}
	}
	// Mapped at SegmentBytes, nothing reserved beyond the data until the
	// first append needs it (see "Disk reservation" in the Segment doc).
	f, err := mmapfile.OpenAhead(s.Path(LogSuffix), max(cfg.SegmentBytes, dataLen), dataLen)
	if err != nil {
		_ = s.closeFiles()
		return nil, err
	}
	s.log = f
	if err := s.loadTail(dataLen); err != nil {
		_ = s.closeFiles()
		return nil, err
	}
	s.size.Store(dataLen)
	if err := f.ParkDescriptor(); err != nil {
		_ = s.closeFiles()
		return nil, err
	}
	s.active = true
	s.noteIndexes()
	s.startPrefault()
	s.noteReserved()
	return s, nil
}

// loadTail validates the batches after the last offset-index entry and
// sets the next offset and the timestamps of an opened active segment.
func (s *Segment) loadTail(dataLen int64) error {
	data := s.log.Bytes()[:dataLen]
	if dataLen > 0 {
		if v, err := batch.Check(data); err == nil {
			s.rollingTimestamp = v.MaxTimestamp()
		}
	}
	last := s.offsetIndex.LastEntry()
	start := int64(0)
	if s.offsetIndex.Entries() > 0 {
		start = int64(last.Position)
	}
	if start > dataLen {
		return fmt.Errorf("%w: %s: index entry points past the data", ErrNeedsRecovery, s.Path(IndexSuffix))
	}
	if te := s.timeIndex.LastEntry(); s.timeIndex.Entries() > 0 {
		s.maxTimestamp, s.offsetOfMaxTimestamp = te.Timestamp, te.Offset
	}
	it := batch.NewIterator(data[start:], start)
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		s.nextOffset = v.NextOffset()
		if ts := v.MaxTimestamp(); ts > s.maxTimestamp {
			s.maxTimestamp, s.offsetOfMaxTimestamp = ts, v.LastOffset()
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNeedsRecovery, s.Path(LogSuffix), err)
	}
	if s.offsetIndex.Entries() > 0 && s.nextOffset <= last.Offset {
		return fmt.Errorf("%w: %s: last index entry %d beyond the data", ErrNeedsRecovery, s.Path(IndexSuffix), last.Offset)
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
