package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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
func OpenActive(dir string, base int64, cfg Config, now time.Time) (*Segment, error) {
	s := newSegment(dir, base, cfg, now)
	st, err := os.Stat(s.Path(LogSuffix))
	if err != nil {
		return nil, err
	}
	dataLen := st.Size()
	for _, kind := range []string{IndexSuffix, TimeIndexSuffix} {
		if _, err := os.Stat(s.Path(kind)); errors.Is(err, fs.ErrNotExist) {
			// Kafka creates index files lazily: an absent index of a
			// segment too small to be indexed is legal. Make it empty.
			if err := os.WriteFile(s.Path(kind), nil, 0o644); err != nil {
				return nil, err
			}
		}
	}
	if err := s.openWritableIndexes(false); err != nil {
		_ = s.closeFiles()
		return nil, err
	}
	if err := errors.Join(s.offsetIndex.Sanity(), s.timeIndex.Sanity(), s.txnIndex.Sanity()); err != nil {
		_ = s.closeFiles()
		return nil, fmt.Errorf("%w: %w", ErrNeedsRecovery, err)
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
	s.active = true
	s.startPrefault()
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
		s.nextOffset.Store(v.NextOffset())
		if ts := v.MaxTimestamp(); ts > s.maxTimestamp {
			s.maxTimestamp, s.offsetOfMaxTimestamp = ts, v.LastOffset()
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNeedsRecovery, s.Path(LogSuffix), err)
	}
	if s.offsetIndex.Entries() > 0 && s.nextOffset.Load() <= last.Offset {
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
