package index

import (
	"encoding/binary"
	"fmt"
	"iter"
)

// TimeIndex is a segment's .timeindex file: a map from the running maximum
// timestamp to the offset of the batch that holds it (formats.md §4.4). See
// the package comment for the concurrency rules.
type TimeIndex struct {
	m mapped
	// last is the last entry, or (NoTimestamp, base offset) when empty.
	// Writer only.
	last TimeEntry
}

// CreateTimeIndex creates a new time index at path for the segment starting
// at baseOffset, preallocated to maxIndexBytes rounded down to a multiple of
// TimeEntrySize. It fails if the file exists.
func CreateTimeIndex(path string, baseOffset, maxIndexBytes int64) (*TimeIndex, error) {
	x := &TimeIndex{last: TimeEntry{Timestamp: NoTimestamp, Offset: baseOffset}}
	if err := x.m.create(path, baseOffset, maxIndexBytes, TimeEntrySize); err != nil {
		return nil, err
	}
	return x, nil
}

// OpenTimeIndex maps an existing time index. Every whole entry of the file
// counts (length / 12), as in Kafka; call Sanity before trusting it. A
// writable index opened this way is full until Resize gives it room.
func OpenTimeIndex(path string, baseOffset int64, readOnly bool) (*TimeIndex, error) {
	x := &TimeIndex{last: TimeEntry{Timestamp: NoTimestamp, Offset: baseOffset}}
	if err := x.m.open(path, baseOffset, TimeEntrySize, readOnly); err != nil {
		return nil, err
	}
	if n := x.m.entries.Load(); n > 0 {
		x.last = timeEntryAt(x.m.buf, int(n-1), baseOffset)
	}
	return x, nil
}

// OpenActiveTimeIndex opens an existing time index for appending with
// room for maxIndexBytes (OpenTimeIndex and Resize in one mapping). A
// missing file gives an empty index whose file is made by its first entry,
// as CreateTimeIndex's. A file longer than maxIndexBytes is cut to it
// (cut: as Kafka resizes the active index at load) or refused with
// ErrPastCapacity. Call Sanity before trusting it.
func OpenActiveTimeIndex(path string, baseOffset, maxIndexBytes int64, cut bool) (*TimeIndex, error) {
	x := &TimeIndex{last: TimeEntry{Timestamp: NoTimestamp, Offset: baseOffset}}
	if err := x.m.openActive(path, baseOffset, maxIndexBytes, TimeEntrySize, cut); err != nil {
		return nil, err
	}
	if n := x.m.entries.Load(); n > 0 {
		x.last = timeEntryAt(x.m.buf, int(n-1), baseOffset)
	}
	return x, nil
}

// Path returns the file's path.
func (x *TimeIndex) Path() string { return x.m.path }

// BaseOffset returns the base offset of the segment.
func (x *TimeIndex) BaseOffset() int64 { return x.m.baseOffset }

// Entries returns the number of entries.
func (x *TimeIndex) Entries() int64 { return x.m.entries.Load() }

// MaxEntries returns the capacity: the entries the index may hold.
func (x *TimeIndex) MaxEntries() int64 { return x.m.maxEntries.Load() }

// IsFull reports whether the segment must roll: the last slot is kept for
// the entry written at roll or close, so the index counts as full at
// MaxEntries − 1 entries (formats.md §4.4).
func (x *TimeIndex) IsFull() bool { return x.Entries() >= x.MaxEntries()-1 }

// FileSize returns the current length of the file.
func (x *TimeIndex) FileSize() int64 { return x.m.fileLength() }

// MaybeAppend follows Kafka's TimeIndex.maybeAppend. It fails with ErrFull
// when IsFull (unless skipFullCheck) or when no slot is left at all, with
// ErrOffsetOrder when offset is below the last entry's, with
// ErrTimestampOrder when timestamp is below the last entry's, and with
// ErrOffsetOverflow when offset is outside the relative range. Otherwise an
// entry is written only if timestamp is greater than the last entry's (for an
// empty index: greater than NoTimestamp); appended reports whether it was.
//
// The segment calls it with skipFullCheck == false next to each offset-index
// entry, and with skipFullCheck == true once at roll, close and the end of
// recovery, with the segment's largest timestamp and its offset. Writer only.
func (x *TimeIndex) MaybeAppend(timestamp, offset int64, skipFullCheck bool) (appended bool, err error) {
	if err := x.m.checkWritable(); err != nil {
		return false, err
	}
	n := x.m.entries.Load()
	if !skipFullCheck && x.IsFull() || n >= x.m.maxEntries.Load() {
		return false, fmt.Errorf("%w: %s has %d entries", ErrFull, x.m.path, n)
	}
	if n > 0 && offset < x.last.Offset {
		return false, fmt.Errorf("%w: appending offset %d after %d in %s", ErrOffsetOrder, offset, x.last.Offset, x.m.path)
	}
	if n > 0 && timestamp < x.last.Timestamp {
		return false, fmt.Errorf("%w: appending timestamp %d after %d in %s", ErrTimestampOrder, timestamp, x.last.Timestamp, x.m.path)
	}
	if timestamp <= x.last.Timestamp {
		return false, nil
	}
	rel, err := RelativeOffset(x.m.baseOffset, offset)
	if err != nil {
		return false, err
	}
	b, err := x.m.slot(n)
	if err != nil {
		return false, err
	}
	binary.BigEndian.PutUint64(b[0:], uint64(timestamp))
	binary.BigEndian.PutUint32(b[8:], uint32(rel))
	x.m.entries.Store(n + 1)
	x.last = TimeEntry{Timestamp: timestamp, Offset: offset}
	return true, nil
}

// Lookup returns the last entry whose timestamp is ≤ target, or
// (NoTimestamp, BaseOffset) when there is none. It does not allocate.
func (x *TimeIndex) Lookup(target int64) (timestamp, offset int64) {
	b := x.m.readView()
	defer x.m.mu.RUnlock()
	lo, hi := 0, len(b)/TimeEntrySize
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if int64(binary.BigEndian.Uint64(b[mid*TimeEntrySize:])) <= target {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return NoTimestamp, x.m.baseOffset
	}
	e := timeEntryAt(b, lo-1, x.m.baseOffset)
	return e.Timestamp, e.Offset
}

// Entry returns entry i, or ok == false if i is out of range.
func (x *TimeIndex) Entry(i int64) (e TimeEntry, ok bool) {
	b := x.m.readView()
	defer x.m.mu.RUnlock()
	if i < 0 || i >= int64(len(b)/TimeEntrySize) {
		return TimeEntry{}, false
	}
	return timeEntryAt(b, int(i), x.m.baseOffset), true
}

// LastEntry returns the last entry, or (NoTimestamp, BaseOffset) for an
// empty index.
func (x *TimeIndex) LastEntry() TimeEntry {
	b := x.m.readView()
	defer x.m.mu.RUnlock()
	n := len(b) / TimeEntrySize
	if n == 0 {
		return TimeEntry{Timestamp: NoTimestamp, Offset: x.m.baseOffset}
	}
	return timeEntryAt(b, n-1, x.m.baseOffset)
}

// All iterates over the entries present when it starts, in file order. It
// takes the read lock per entry, so the loop body may call any method.
func (x *TimeIndex) All() iter.Seq2[int64, TimeEntry] {
	return func(yield func(int64, TimeEntry) bool) {
		n := x.Entries()
		for i := int64(0); i < n; i++ {
			e, ok := x.Entry(i)
			if !ok || !yield(i, e) {
				return
			}
		}
	}
}

// TruncateTo removes every entry whose offset is ≥ offset. Writer only.
func (x *TimeIndex) TruncateTo(offset int64) error {
	b := x.m.readView()
	// Offsets are non-decreasing: keep the entries before the first one
	// whose offset is ≥ the target.
	rel := offset - x.m.baseOffset
	lo, hi := 0, len(b)/TimeEntrySize
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if int64(int32(binary.BigEndian.Uint32(b[mid*TimeEntrySize+8:]))) < rel {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	x.m.mu.RUnlock()
	if err := x.m.truncateEntries(int64(lo)); err != nil {
		return err
	}
	x.last = TimeEntry{Timestamp: NoTimestamp, Offset: x.m.baseOffset}
	if lo > 0 {
		x.last = timeEntryAt(x.m.buf, lo-1, x.m.baseOffset)
	}
	return nil
}

// Resize sets the capacity to size rounded down to a multiple of
// TimeEntrySize: a smaller size cuts the file, a larger one lets it grow
// (the file is extended in steps as entries are appended). It fails with
// ErrSize if the entries written would not fit. Writer only.
func (x *TimeIndex) Resize(size int64) error { return x.m.resize(size) }

// Trim cuts the file to the entries written (Kafka's trimToValidSize) and
// syncs it, so the cut survives a crash. Call it when the segment rolls or
// closes, after the final MaybeAppend. Writer only.
func (x *TimeIndex) Trim() error { return x.m.trim() }

// EnsureRoom reserves the file's room for one more entry (see
// OffsetIndex.EnsureRoom). Writer only.
func (x *TimeIndex) EnsureRoom() error { return x.m.ensureRoom() }

// Prepare creates the file of a new active index now instead of at its
// first entry, empty. Writer only.
func (x *TimeIndex) Prepare() error { return x.m.prepare() }

// Sync makes the entries appended so far durable. Writer only.
func (x *TimeIndex) Sync() error { return x.m.sync() }

// Close unmaps and closes the file; it does not trim. Writer only.
func (x *TimeIndex) Close() error { return x.m.close() }

// Sanity checks the file and every entry, and returns a *CorruptionError on
// the first problem. It is stricter than Kafka's check (formats.md §4.5),
// following recovery.md §7.3: the length is a multiple of 12; timestamps are
// ≥ 0 and strictly increase; relative offsets are ≥ 0 and never decrease; no
// entry after the first is all zeros (zero padding from a lost trim).
func (x *TimeIndex) Sanity() error {
	if err := x.m.checkLength(); err != nil {
		return err
	}
	x.m.readAhead()
	b := x.m.readView()
	defer x.m.mu.RUnlock()
	return checkTimeEntries(x.m.path, b)
}

func checkTimeEntries(path string, b []byte) error {
	var prevTs int64
	var prevRel int32
	for i := 0; i+TimeEntrySize <= len(b); i += TimeEntrySize {
		ts := int64(binary.BigEndian.Uint64(b[i:]))
		rel := int32(binary.BigEndian.Uint32(b[i+8:]))
		switch {
		case rel < 0:
			return corruptf(path, int64(i), "offset below the base offset (relative offset %d)", rel)
		case ts < 0:
			return corruptf(path, int64(i), "negative timestamp %d", ts)
		case i == 0:
		case ts == 0 && rel == 0:
			return corruptf(path, int64(i), "zero padding: entry %d is all zeros", i/TimeEntrySize)
		case ts <= prevTs:
			return corruptf(path, int64(i), "timestamps not increasing: %d after %d", ts, prevTs)
		case rel < prevRel:
			return corruptf(path, int64(i), "offsets decreasing: relative offset %d after %d", rel, prevRel)
		}
		prevTs, prevRel = ts, rel
	}
	return nil
}
