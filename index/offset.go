package index

import (
	"encoding/binary"
	"fmt"
	"iter"
)

// OffsetIndex is a segment's .index file: a sparse map from offsets to
// positions in the .log file (formats.md §4.3). See the package comment for
// the concurrency rules.
type OffsetIndex struct {
	m mapped
	// lastOffset is the offset of the last entry, or -1 for an empty index.
	// Writer only.
	lastOffset int64
}

// CreateOffsetIndex creates a new offset index at path for the segment
// starting at baseOffset, preallocated to maxIndexBytes rounded down to a
// multiple of OffsetEntrySize. It fails if the file exists.
func CreateOffsetIndex(path string, baseOffset, maxIndexBytes int64) (*OffsetIndex, error) {
	x := &OffsetIndex{lastOffset: -1}
	if err := x.m.create(path, baseOffset, maxIndexBytes, OffsetEntrySize); err != nil {
		return nil, err
	}
	return x, nil
}

// OpenOffsetIndex maps an existing offset index. Every whole entry of the
// file counts (length / 8), as in Kafka; call Sanity before trusting it. A
// writable index opened this way is full until Resize gives it room.
func OpenOffsetIndex(path string, baseOffset int64, readOnly bool) (*OffsetIndex, error) {
	x := &OffsetIndex{lastOffset: -1}
	if err := x.m.open(path, baseOffset, OffsetEntrySize, readOnly); err != nil {
		return nil, err
	}
	if n := x.m.entries.Load(); n > 0 {
		x.lastOffset = offsetEntryAt(x.m.buf, int(n-1), baseOffset).Offset
	}
	return x, nil
}

// OpenActiveOffsetIndex opens an existing offset index for appending with
// room for maxIndexBytes (OpenOffsetIndex and Resize in one mapping). A
// missing file gives an empty index whose file is made by its first entry,
// as CreateOffsetIndex's. A file longer than maxIndexBytes is cut to it
// (cut: as Kafka resizes the active index at load) or refused with
// ErrPastCapacity. Call Sanity before trusting it.
func OpenActiveOffsetIndex(path string, baseOffset, maxIndexBytes int64, cut bool) (*OffsetIndex, error) {
	x := &OffsetIndex{lastOffset: -1}
	if err := x.m.openActive(path, baseOffset, maxIndexBytes, OffsetEntrySize, cut); err != nil {
		return nil, err
	}
	if n := x.m.entries.Load(); n > 0 {
		x.lastOffset = offsetEntryAt(x.m.buf, int(n-1), baseOffset).Offset
	}
	return x, nil
}

// Path returns the file's path.
func (x *OffsetIndex) Path() string { return x.m.path }

// BaseOffset returns the base offset of the segment.
func (x *OffsetIndex) BaseOffset() int64 { return x.m.baseOffset }

// Entries returns the number of entries.
func (x *OffsetIndex) Entries() int64 { return x.m.entries.Load() }

// MaxEntries returns the capacity: the entries the index may hold before
// the segment must roll.
func (x *OffsetIndex) MaxEntries() int64 { return x.m.maxEntries.Load() }

// IsFull reports whether no entry can be appended; the segment then rolls.
func (x *OffsetIndex) IsFull() bool { return x.Entries() >= x.MaxEntries() }

// FileSize returns the current length of the file.
func (x *OffsetIndex) FileSize() int64 { return x.m.fileLength() }

// Append adds an entry for offset at position. The offset must be greater
// than the last entry's (ErrOffsetOrder) and convertible to a relative
// offset (ErrOffsetOverflow); the index must not be full (ErrFull). Writer
// only.
func (x *OffsetIndex) Append(offset int64, position int32) error {
	if err := x.m.checkWritable(); err != nil {
		return err
	}
	rel, err := RelativeOffset(x.m.baseOffset, offset)
	if err != nil {
		return err
	}
	if position < 0 {
		return fmt.Errorf("%w: %d in %s", ErrBadPosition, position, x.m.path)
	}
	n := x.m.entries.Load()
	if n >= x.m.maxEntries.Load() {
		return fmt.Errorf("%w: %s has %d entries", ErrFull, x.m.path, n)
	}
	if n > 0 && offset <= x.lastOffset {
		return fmt.Errorf("%w: appending offset %d after %d in %s", ErrOffsetOrder, offset, x.lastOffset, x.m.path)
	}
	b, err := x.m.slot(n)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint32(b[0:], uint32(rel))
	binary.BigEndian.PutUint32(b[4:], uint32(position))
	x.m.entries.Store(n + 1)
	x.lastOffset = offset
	return nil
}

// Lookup returns the last entry whose offset is ≤ target, or
// (BaseOffset, 0) when there is none. It does not allocate.
func (x *OffsetIndex) Lookup(target int64) (offset int64, position int32) {
	b := x.m.readView()
	defer x.m.mu.RUnlock()
	i := offsetFloor(b, target-x.m.baseOffset)
	if i < 0 {
		return x.m.baseOffset, 0
	}
	e := offsetEntryAt(b, i, x.m.baseOffset)
	return e.Offset, e.Position
}

// LookupPosition returns the first entry whose position is ≥ position, used
// to bound a fetch (recovery.md §4.4); ok is false when there is none.
func (x *OffsetIndex) LookupPosition(position int64) (e OffsetEntry, ok bool) {
	b := x.m.readView()
	defer x.m.mu.RUnlock()
	n := len(b) / OffsetEntrySize
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if int64(int32(binary.BigEndian.Uint32(b[mid*OffsetEntrySize+4:]))) < position {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == n {
		return OffsetEntry{}, false
	}
	return offsetEntryAt(b, lo, x.m.baseOffset), true
}

// Entry returns entry i, or ok == false if i is out of range.
func (x *OffsetIndex) Entry(i int64) (e OffsetEntry, ok bool) {
	b := x.m.readView()
	defer x.m.mu.RUnlock()
	if i < 0 || i >= int64(len(b)/OffsetEntrySize) {
		return OffsetEntry{}, false
	}
	return offsetEntryAt(b, int(i), x.m.baseOffset), true
}

// LastEntry returns the last entry, or (BaseOffset, 0) for an empty index.
func (x *OffsetIndex) LastEntry() OffsetEntry {
	b := x.m.readView()
	defer x.m.mu.RUnlock()
	n := len(b) / OffsetEntrySize
	if n == 0 {
		return OffsetEntry{Offset: x.m.baseOffset}
	}
	return offsetEntryAt(b, n-1, x.m.baseOffset)
}

// All iterates over the entries present when it starts, in file order. It
// takes the read lock per entry, so the loop body may call any method.
func (x *OffsetIndex) All() iter.Seq2[int64, OffsetEntry] {
	return func(yield func(int64, OffsetEntry) bool) {
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
func (x *OffsetIndex) TruncateTo(offset int64) error {
	b := x.m.readView()
	keep := offsetFloor(b, offset-x.m.baseOffset) + 1
	if keep > 0 && offsetEntryAt(b, keep-1, x.m.baseOffset).Offset == offset {
		keep--
	}
	x.m.mu.RUnlock()
	if err := x.m.truncateEntries(int64(keep)); err != nil {
		return err
	}
	x.lastOffset = -1
	if keep > 0 {
		x.lastOffset = offsetEntryAt(x.m.buf, keep-1, x.m.baseOffset).Offset
	}
	return nil
}

// Resize sets the capacity to size rounded down to a multiple of
// OffsetEntrySize: a smaller size cuts the file, a larger one lets it grow
// (the file is extended in steps as entries are appended). It fails with
// ErrSize if the entries written would not fit. Writer only.
func (x *OffsetIndex) Resize(size int64) error { return x.m.resize(size) }

// Trim cuts the file to the entries written (Kafka's trimToValidSize) and
// syncs it, so the cut survives a crash. Call it when the segment rolls or
// closes. Writer only.
func (x *OffsetIndex) Trim() error { return x.m.trim() }

// EnsureRoom reserves the file's room for one more entry, so a caller can
// fail (a full disk) before it writes anything that depends on the entry.
// Writer only.
func (x *OffsetIndex) EnsureRoom() error { return x.m.ensureRoom() }

// Prepare creates the file of a new active index now instead of at its
// first entry, empty. Writer only.
func (x *OffsetIndex) Prepare() error { return x.m.prepare() }

// Sync makes the entries appended so far durable. Writer only.
func (x *OffsetIndex) Sync() error { return x.m.sync() }

// Close unmaps and closes the file; it does not trim. Writer only.
func (x *OffsetIndex) Close() error { return x.m.close() }

// Sanity checks the file and every entry, and returns a *CorruptionError on
// the first problem. It is stricter than Kafka's check (formats.md §4.5),
// following recovery.md §7.3: the length is a multiple of 8; relative
// offsets and positions are ≥ 0; no entry after the first is all zeros (zero
// padding from a lost trim); offsets and positions strictly increase.
func (x *OffsetIndex) Sanity() error {
	if err := x.m.checkLength(); err != nil {
		return err
	}
	x.m.readAhead()
	b := x.m.readView()
	defer x.m.mu.RUnlock()
	return checkOffsetEntries(x.m.path, b)
}

func checkOffsetEntries(path string, b []byte) error {
	var prevRel, prevPos int32
	for i := 0; i+OffsetEntrySize <= len(b); i += OffsetEntrySize {
		rel := int32(binary.BigEndian.Uint32(b[i:]))
		pos := int32(binary.BigEndian.Uint32(b[i+4:]))
		switch {
		case rel < 0:
			return corruptf(path, int64(i), "offset below the base offset (relative offset %d)", rel)
		case pos < 0:
			return corruptf(path, int64(i), "negative position %d", pos)
		case i == 0:
		case rel == 0 && pos == 0:
			return corruptf(path, int64(i), "zero padding: entry %d is all zeros", i/OffsetEntrySize)
		case rel <= prevRel:
			return corruptf(path, int64(i), "offsets not increasing: relative offset %d after %d", rel, prevRel)
		case pos <= prevPos:
			return corruptf(path, int64(i), "positions not increasing: %d after %d", pos, prevPos)
		}
		prevRel, prevPos = rel, pos
	}
	return nil
}

// offsetFloor returns the index of the last entry in b whose relative offset
// is ≤ rel, or -1.
func offsetFloor(b []byte, rel int64) int {
	lo, hi := 0, len(b)/OffsetEntrySize
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if int64(int32(binary.BigEndian.Uint32(b[mid*OffsetEntrySize:]))) <= rel {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}
