package segment

import (
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/mmapfile"
)

// headerAt returns the last offset and size of the batch at p of data,
// which holds only whole validated batches (batch.Walker: nothing is
// checked again). ok is false when no whole batch lies at p (at the end).
func headerAt(data []byte, p int64) (last int64, size int64, ok bool) {
	if p > int64(len(data)) {
		return 0, 0, false
	}
	w := batch.NewWalker(data[p:])
	v, ok := w.Next()
	if !ok {
		return 0, 0, false
	}
	return v.LastOffset(), int64(len(v)), true
}

// find returns the position of the first batch whose last offset is ≥
// target, scanning headers forward from the offset index's floor entry
// (recovery.md §4.2), or len(data) when there is none.
func (s *Segment) find(data []byte, target int64) (int64, error) {
	var pos int64
	if target > s.base {
		x, err := s.index()
		if err != nil {
			return 0, err
		}
		_, p := x.Lookup(target)
		pos = int64(p)
		if pos > int64(len(data)) {
			pos = 0 // an index entry past the data is not trusted
		}
	}
	for {
		last, size, ok := headerAt(data, pos)
		if !ok {
			return int64(len(data)), nil
		}
		if last >= target {
			return pos, nil
		}
		pos += size
	}
}

// Read returns whole batches starting with the one that holds offset
// (or the first batch after it), taking batches while their last offset
// is below upTo and the total stays within maxBytes; the first batch is
// returned even when it alone exceeds maxBytes (as Kafka's "min one
// message"). An empty Range (Bytes nil) means the segment holds nothing
// at or after offset below upTo. The Range must be released.
func (s *Segment) Read(offset int64, maxBytes int64, upTo int64) (Range, error) {
	data, f, err := s.acquire()
	if err != nil {
		return Range{}, err
	}
	start, err := s.find(data, offset)
	if err != nil {
		f.Release()
		s.readers.Add(-1)
		return Range{}, err
	}
	if f.Writable() {
		s.readAhead(f, start, min(maxBytes, int64(len(data))-start))
	}
	end := start
	for {
		last, size, ok := headerAt(data, end)
		if !ok || last >= upTo {
			break
		}
		if end > start && end+size-start > maxBytes {
			break
		}
		end += size
	}
	if end == start {
		f.Release()
		s.readers.Add(-1)
		return Range{Position: start}, nil
	}
	return Range{Bytes: data[start:end:end], Position: start, seg: s, file: f}, nil
}

// PositionOf returns the position of the first batch whose last offset
// is ≥ offset, and whether there is one.
func (s *Segment) PositionOf(offset int64) (int64, bool, error) {
	data, f, err := s.acquire()
	if err != nil {
		return 0, false, err
	}
	defer func() { f.Release(); s.readers.Add(-1) }()
	p, err := s.find(data, offset)
	return p, err == nil && p < int64(len(data)), err
}

// readAheadMin is the smallest Read of the active segment that looks
// whether its pages are in the page cache (see readAhead); below it a
// fault or two cost less than the look.
const readAheadMin = 16 << 10

// readAhead asks for [start, start+n) of the active segment's writable
// mapping to be read ahead (mmapfile.File.WillNeed) when its middle or
// last page is not in the page cache: data the segment was reopened with,
// or written since and taken by reclaim. That mapping takes no read-ahead
// on faults (mmapfile, "Read-ahead"), so each of its cold pages would
// otherwise be a major fault of its own, while asking for pages already
// cached costs about as much as the Read itself (bench/RESULTS.md,
// readAhead);
// two mincore(2) looks decide. Not the first page: finding the batch at
// start has just read it, as opening the segment read the last batch
// (which may end the range too, hence the middle). Advice only: errors
// are dropped.
func (s *Segment) readAhead(f *mmapfile.File, start, n int64) {
	if n >= readAheadMin && (!f.Cached(start+n/2) || !f.Cached(start+n-1)) {
		_ = f.WillNeed(start, n)
	}
}

// Scan calls fn for every batch of the segment's published data, with
// its position and the header its validation decoded, after validating
// it with batch.Check (CRC included; h is valid during the call). It
// stops at the first invalid batch and returns that error, or fn's.
func (s *Segment) Scan(fn func(pos int64, v batch.View, h *batch.BatchHeader) error) error {
	data, f, err := s.acquire()
	if err != nil {
		return err
	}
	defer func() { f.Release(); s.readers.Add(-1) }()
	if f.Writable() {
		// As in Read: the whole of the active segment's data is about
		// to be read, some of it maybe never in the page cache (what it
		// was opened with) or reclaimed since it was written.
		_ = f.WillNeed(0, int64(len(data)))
	}
	it := batch.NewIterator(data, 0)
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		if err := fn(it.Position()-int64(len(v)), v, it.Header()); err != nil {
			return err
		}
	}
	return it.Err()
}
