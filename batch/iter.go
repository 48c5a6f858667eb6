package batch

import "encoding/binary"

// Iterator walks the v2 batches of a byte region (a produce request, a
// whole segment) and stops at the first one that fails Check. It never
// copies: each View aliases the region.
//
//	it := batch.NewIterator(region, 0)
//	for v, ok := it.Next(); ok; v, ok = it.Next() { ... }
//	if err := it.Err(); err != nil { ... } // nil: the region ended exactly after a batch
//
// An Iterator is a value type that does not allocate; it is not safe for
// concurrent use.
type Iterator struct {
	region []byte
	pos    int   // start of the next batch in region
	base   int64 // position of region[0] in the file or request
	err    error
	hdr    BatchHeader // the last batch's decoded header
}

// NewIterator returns an iterator over region, whose first byte sits at
// position base of the enclosing file (positions in errors include it).
func NewIterator(region []byte, base int64) Iterator {
	return Iterator{region: region, base: base}
}

// Next returns the next valid batch, or false at the end of the region or
// at the first invalid batch (see Err).
func (it *Iterator) Next() (View, bool) {
	if it.err != nil || it.pos >= len(it.region) {
		return nil, false
	}
	v, err := CheckAt(it.region[it.pos:], it.base+int64(it.pos), &it.hdr)
	if err != nil {
		it.err = err
		return nil, false
	}
	it.pos += len(v)
	return v, true
}

// Header returns the decoded header of the batch the last Next returned
// (overwritten by the next call).
func (it *Iterator) Header() *BatchHeader { return &it.hdr }

// Err returns nil if the iteration ended exactly at the end of the region,
// a *TornTailError if the region ends inside a batch or in zero padding,
// and a *CorruptionError if a batch is invalid.
func (it *Iterator) Err() error { return it.err }

// Position is the position (including base) just past the last batch
// returned: the end of the valid prefix once Next has returned false.
func (it *Iterator) Position() int64 { return it.base + int64(it.pos) }

// Offset is Position relative to the region's start.
func (it *Iterator) Offset() int { return it.pos }

// Walker walks the batches of a region already validated (by Check or an
// Iterator, or bytes the log wrote itself), reading only each batch's
// length field: the unchecked counterpart of Iterator, for code that
// walks validated bytes again. On bytes that were never validated it
// stops at the first entry that does not frame as a v2-sized batch, and
// never reads out of bounds; what it returns is then not checked.
//
//	w := batch.NewWalker(validated)
//	for v, ok := w.Next(); ok; v, ok = w.Next() { ... }
type Walker struct {
	region []byte
	pos    int
}

// NewWalker returns a walker over region.
func NewWalker(region []byte) Walker { return Walker{region: region} }

// Next returns the next batch, or false at the end of the region (or at
// bytes that do not frame).
func (w *Walker) Next() (View, bool) {
	rest := w.region[w.pos:]
	if len(rest) < HeaderSize {
		return nil, false
	}
	n := int64(int32(binary.BigEndian.Uint32(rest[OffBatchLength:]))) + LogOverhead
	if n < HeaderSize || n > int64(len(rest)) {
		return nil, false
	}
	w.pos += int(n)
	return View(rest[:n:n]), true
}

// Offset is the position, relative to the region's start, of the batch
// the next Next returns: after the last batch, the end of the part that
// framed.
func (w *Walker) Offset() int { return w.pos }

// CheckAll checks every batch of region, as an Iterator does, and appends
// each one's decoded header to dst: the result of validating a region,
// which the steps after it read instead of decoding the bytes again (a
// segment append takes it). It fails unless the region ends exactly after
// its last batch.
func CheckAll(region []byte, dst []BatchHeader) ([]BatchHeader, error) {
	for p := 0; p < len(region); {
		dst = append(dst, BatchHeader{})
		v, err := CheckAt(region[p:], int64(p), &dst[len(dst)-1])
		if err != nil {
			return dst[:len(dst)-1], err
		}
		p += len(v)
	}
	return dst, nil
}
