package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/filenames"
)

// TimestampOffset is a record found by its timestamp.
type TimestampOffset struct {
	// Timestamp and Offset are the record's.
	Timestamp, Offset int64
	// LeaderEpoch is the partition leader epoch of the record's batch
	// (-1 when the batch carries none).
	LeaderEpoch int32
}

// FindOffsetByTimestamp returns the first record of the segment whose
// timestamp is ≥ ts and whose offset is ≥ startingOffset, as Kafka's
// ListOffsets finds it: the time index's floor entry for ts gives an
// offset, the offset index the position to start from, and the batch
// headers are walked from there; within the first batch whose max
// timestamp is ≥ ts (and whose last offset is ≥ startingOffset) the
// records are decoded (decompressed if needed, into scratch, which is
// returned for reuse). found is false when the segment holds no such
// record. A time index that is missing or fails its checks is not used
// (the walk starts at the segment's first batch). Safe for concurrent
// use with the owner.
func (s *Segment) FindOffsetByTimestamp(ts, startingOffset int64, scratch []byte) (r TimestampOffset, found bool, _ []byte, err error) {
	from := max(s.timeFloor(ts), startingOffset)
	data, f, err := s.acquire()
	if err != nil {
		return r, false, scratch, err
	}
	defer func() { f.Release(); s.readers.Add(-1) }()
	var pos int64
	if from > s.base {
		if x, err := s.index(); err == nil {
			if _, p := x.Lookup(from); int64(p) <= int64(len(data)) {
				pos = int64(p)
			}
		}
	}
	for {
		last, size, ok := headerAt(data, pos)
		if !ok {
			return r, false, scratch, nil
		}
		v := batch.View(data[pos : pos+size])
		pos += size
		if v.MaxTimestamp() < ts || last < startingOffset {
			continue
		}
		records := v.RecordsSection()
		if v.Compression() != batch.CompressionNone {
			records, err = v.RecordData(scratch, 1<<30)
			if err != nil {
				return r, false, scratch, fmt.Errorf("partlog/segment: batch at offset %d: %w", v.BaseOffset(), err)
			}
			scratch = records[:0]
		}
		it := v.Records(records)
		for rec, ok := it.Next(); ok; rec, ok = it.Next() {
			if rec.Timestamp >= ts && rec.Offset >= startingOffset {
				return TimestampOffset{Timestamp: rec.Timestamp, Offset: rec.Offset, LeaderEpoch: epochOf(v)}, true, scratch, nil
			}
		}
		if err := it.Err(); err != nil {
			return r, false, scratch, fmt.Errorf("partlog/segment: batch at offset %d: %w", v.BaseOffset(), err)
		}
	}
}

// FindMaxTimestamp returns the first record whose timestamp is the
// segment's max timestamp maxTs, searching from the batch that holds
// offsetOfMax (what MaxTimestampSoFar returned): Kafka's answer to
// ListOffsets with MAX_TIMESTAMP (-3).
func (s *Segment) FindMaxTimestamp(maxTs, offsetOfMax int64, scratch []byte) (TimestampOffset, bool, []byte, error) {
	r, found, scratch, err := s.FindOffsetByTimestamp(maxTs, s.base, scratch)
	if err != nil || !found || r.Timestamp == maxTs {
		return r, found && r.Timestamp == maxTs, scratch, err
	}
	// A record with a larger timestamp than the recorded max cannot
	// exist in a valid segment; report what the index said.
	return TimestampOffset{Timestamp: maxTs, Offset: offsetOfMax, LeaderEpoch: r.LeaderEpoch}, true, scratch, nil
}

func epochOf(v batch.View) int32 {
	if e := v.PartitionLeaderEpoch(); e >= 0 {
		return e
	}
	return -1
}

// timeFloor returns the offset of the time index's last entry whose
// timestamp is ≤ ts, or the base offset (also when the index cannot be
// used).
func (s *Segment) timeFloor(ts int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.base
	}
	if s.timeIndex != nil {
		_, off := s.timeIndex.Lookup(ts)
		return off
	}
	x, err := s.openSealedTimeIndex()
	if err != nil {
		return s.base
	}
	defer x.Close()
	_, off := x.Lookup(ts)
	return off
}

// openSealedTimeIndex opens a sealed segment's time index read-only and
// checks it. Caller holds mu and closes the index.
func (s *Segment) openSealedTimeIndex() (*index.TimeIndex, error) {
	x, err := index.OpenTimeIndex(s.Path(filenames.TimeIndex), s.base, true)
	if err != nil {
		return nil, err
	}
	if err := x.Sanity(); err != nil {
		_ = x.Close()
		return nil, err
	}
	return x, nil
}

// MaxTimestampSoFar returns the largest batch max timestamp of the
// segment and the last offset of the batch that holds it (NoTimestamp
// and the base offset when there is none). For a sealed segment not
// appended to since it was opened it is read from the time index's last
// entry (Kafka's maxTimestampSoFar), or from the batch headers when the
// index is missing or fails its checks, and remembered. Owner only.
func (s *Segment) MaxTimestampSoFar() (ts, offset int64, err error) {
	if s.maxTimestamp != batch.NoTimestamp {
		return s.maxTimestamp, s.offsetOfMaxTimestamp, nil
	}
	s.mu.Lock()
	active, closed := s.active, s.closed
	var x *index.TimeIndex
	var xerr error
	if !active && !closed {
		x, xerr = s.openSealedTimeIndex()
	}
	s.mu.Unlock()
	if active || closed {
		return batch.NoTimestamp, s.base, nil
	}
	if xerr == nil {
		defer x.Close()
		if x.Entries() > 0 {
			e := x.LastEntry()
			s.maxTimestamp, s.offsetOfMaxTimestamp = e.Timestamp, e.Offset
			return e.Timestamp, e.Offset, nil
		}
	}
	// No usable index entry: walk the headers.
	data, f, err := s.acquire()
	if err != nil {
		return batch.NoTimestamp, s.base, err
	}
	defer func() { f.Release(); s.readers.Add(-1) }()
	ts, offset = batch.NoTimestamp, s.base
	for pos := int64(0); ; {
		last, size, ok := headerAt(data, pos)
		if !ok {
			break
		}
		if t := batch.View(data[pos : pos+size]).MaxTimestamp(); t > ts {
			ts, offset = t, last
		}
		pos += size
	}
	s.maxTimestamp, s.offsetOfMaxTimestamp = ts, offset
	return ts, offset, nil
}

// Created is when the segment was created (or opened, for a segment
// loaded from disk, or cut to empty). Owner only.
func (s *Segment) Created() time.Time { return s.created }

// LastModified is the modification time of the segment's .log file.
func (s *Segment) LastModified() (time.Time, error) {
	st, err := os.Stat(s.Path(filenames.Log))
	if err != nil {
		return time.Time{}, err
	}
	return st.ModTime(), nil
}

// RenameDeleted closes the segment and renames its files with the
// .deleted suffix, returning the new paths; the caller removes them
// (now, or later as Kafka's file.delete.delay.ms asks) and fsyncs the
// directory. Readers keep their views. Files that do not exist (an
// index never created) are skipped.
func (s *Segment) RenameDeleted() ([]string, error) {
	s.mu.Lock()
	s.closed = true
	err := s.closeFiles()
	s.active = false
	s.mu.Unlock()
	var paths []string
	for _, kind := range []string{filenames.Log, filenames.Index, filenames.TimeIndex, filenames.TxnIndex} {
		from := s.Path(kind)
		to := from + filenames.Deleted
		if e := os.Rename(from, to); e != nil {
			if !errors.Is(e, fs.ErrNotExist) {
				err = errors.Join(err, e)
			}
			continue
		}
		paths = append(paths, to)
	}
	return paths, err
}

// CollectAbortedTxns appends to dst the aborted transactions of this
// segment's .txnindex that overlap [fetchOffset, upperBound), and reports
// whether no later segment can hold a relevant one (recovery.md §4.4). A
// missing .txnindex has no entries. Safe for concurrent use.
func (s *Segment) CollectAbortedTxns(dst []index.AbortedTxn, fetchOffset, upperBound int64) ([]index.AbortedTxn, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return dst, false, ErrClosed
	}
	x := s.txnIndex
	if x == nil {
		var err error
		x, err = index.OpenTxnIndex(s.Path(filenames.TxnIndex), s.base, true)
		if errors.Is(err, fs.ErrNotExist) {
			return dst, false, nil
		}
		if err != nil {
			return dst, false, err
		}
		defer x.Close()
	}
	return x.CollectAbortedTxns(dst, fetchOffset, upperBound)
}
