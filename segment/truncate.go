package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/fsutil"
	"github.com/partlog/partlog/internal/mmapfile"
)

// TruncateTo removes every batch whose last offset is ≥ offset from the
// segment and makes it the active segment again (recovery.md §5.1): the
// indexes drop their entries at or above offset and get their full
// capacity back, and the .log keeps [0, p) where p is the position of
// the first removed batch. offset must be a batch boundary or past the
// data; the caller (the log) checks that.
//
// The log's bytes past p are never changed while a reader may hold them:
// with readers active the kept prefix is copied to a new preallocated file
// that is renamed over the old one, whose inode lives on until the last
// reader releases it. Otherwise the tail is zeroed in place, so recovery
// never finds stale batches behind the published end.
//
// The caller must keep new readers out (the log holds its segment lock
// exclusively) while TruncateTo runs. Owner only. now (the log's clock)
// restarts the age of a segment cut to empty. It returns the number of
// bytes removed.
func (s *Segment) TruncateTo(offset int64, now time.Time) (int64, error) {
	p, _, err := s.PositionOf(offset)
	if err != nil {
		return 0, err
	}
	oldSize := s.size.Load()
	if err := s.reactivate(p, oldSize); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced.txnBytes = -1
	s.timeIndexed = math.MinInt64
	errs := []error{s.offsetIndex.TruncateTo(offset), s.timeIndex.TruncateTo(offset), s.txnIndex.TruncateTo(offset)}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	s.noteIndexes()
	s.prefaultAt = 0 // the position went back: the prefaulter must hear of it
	s.firstPrealloc = false
	if p < oldSize {
		s.nextOffset = offset
	}
	if p == 0 {
		s.nextOffset = s.base
		s.rollingTimestamp = batch.NoTimestamp
		s.created = now
	}
	s.bytesSinceIndex = 0
	s.maxTimestamp, s.offsetOfMaxTimestamp = batch.NoTimestamp, s.base
	if last := s.timeIndex.LastEntry(); last.Timestamp != batch.NoTimestamp && s.timeIndex.Entries() > 0 {
		s.maxTimestamp, s.offsetOfMaxTimestamp = last.Timestamp, last.Offset
	}
	// The data after the last time-index entry may hold a larger timestamp.
	data := s.log.Bytes()[:p]
	it := batch.NewIterator(data, 0)
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		if ts := v.MaxTimestamp(); ts > s.maxTimestamp {
			s.maxTimestamp, s.offsetOfMaxTimestamp = ts, v.LastOffset()
		}
		if s.rollingTimestamp == batch.NoTimestamp && p > 0 {
			s.rollingTimestamp = v.MaxTimestamp()
		}
	}
	return oldSize - p, nil
}

// reactivate makes the segment writable with its .log holding exactly
// [0, keep) of valid data, mapped over it (the reservation and the
// mapping grow from keep with the next appends), and with writable
// indexes. Owner only.
func (s *Segment) reactivate(keep, oldSize int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	readers := s.readers.Load() > 0
	if s.active && !readers {
		// In place: zero the removed tail so recovery never reads it.
		data := s.log.Bytes()
		clear(data[keep:oldSize])
		s.size.Store(keep)
		if s.prefaulter != nil {
			s.prefaulter.Advance(keep)
		}
		s.noteReserved()
		return nil
	}
	if err := s.stopPrefault(); err != nil {
		return err
	}
	// Copy the kept prefix into a fresh file.
	src, err := s.currentBytes()
	if err != nil {
		return err
	}
	tmp := s.Path(filenames.Log) + filenames.Temp
	if st, err := os.Lstat(tmp); err == nil && !st.Mode().IsRegular() {
		// Never removed or followed: it is not ours.
		return fmt.Errorf("partlog/segment: truncate segment %d: %s exists and is not a regular file", s.base, tmp)
	}
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	nf, err := mmapfile.Open(tmp, mmapfile.Options{Create: true, Ahead: true, Reserve: keep, Capacity: max(s.cfg.SegmentBytes, keep)})
	if err != nil {
		return err
	}
	copy(nf.Bytes(), src[:keep])
	if err := nf.SyncFile(); err != nil {
		_ = nf.Close()
		_ = os.Remove(tmp)
		return err
	}
	if err := nf.Rename(s.Path(filenames.Log)); err != nil {
		_ = nf.Close()
		_ = os.Remove(tmp)
		return err
	}
	if err := fsutil.SyncDir(s.dir); err != nil {
		_ = nf.Close()
		return err
	}
	if s.log != nil {
		_ = s.log.Close() // readers keep the old inode alive
	}
	s.log = nf
	s.size.Store(keep)
	if !s.active {
		if s.offsetIndex != nil {
			_ = s.offsetIndex.Close()
			s.offsetIndex = nil
		}
		if err := s.openWritableIndexes(false, true, true); err != nil {
			return err
		}
		s.active = true
	}
	s.startPrefault()
	s.noteReserved()
	return nil
}

// currentBytes returns the segment's current data, mapping a sealed
// segment read-only if it is not mapped. Caller holds mu.
func (s *Segment) currentBytes() ([]byte, error) {
	if s.log == nil {
		f, err := mmapfile.Open(s.Path(filenames.Log), mmapfile.Options{ReadOnly: true})
		if err != nil {
			return nil, err
		}
		s.log = f
	}
	b := s.log.Bytes()
	if int64(len(b)) < s.size.Load() {
		return nil, fmt.Errorf("partlog/segment: %s shorter than its %d bytes", s.Path(filenames.Log), s.size.Load())
	}
	return b, nil
}
