package segment

import (
	"errors"
	"fmt"

	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/mmapfile"
)

// mapping returns the current mapping with a reference taken, mapping a
// sealed segment read-only if needed, and the published size as of then.
// The size is loaded under mu, while the File is still the segment's: an
// active .log's owner maps it again (mapFor, under mu) before it
// publishes appends past the old mapping, so this size never exceeds
// what the returned File holds. The caller must Release it.
func (s *Segment) mapping() (*mmapfile.File, int64, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, 0, ErrClosed
	}
	if f := s.log; f != nil && f.Acquire() {
		size := s.size.Load()
		s.mu.Unlock()
		return f, size, nil
	}
	f, err := mmapfile.Open(s.Path(filenames.Log), mmapfile.Options{ReadOnly: true})
	if err != nil {
		s.mu.Unlock()
		return nil, 0, err
	}
	size := s.size.Load()
	if f.Size() < size {
		_ = f.Close()
		s.mu.Unlock()
		return nil, 0, fmt.Errorf("partlog/segment: %s is %d bytes, %d expected", s.Path(filenames.Log), f.Size(), size)
	}
	s.log = f
	f.Acquire()
	onMap := s.onMap
	s.mu.Unlock()
	// Told outside mu: the callback may evict, which calls Unmap.
	if onMap != nil {
		onMap(s, f.Size())
	}
	return f, size, nil
}

// Unmap drops the segment's reference on the mapping of a sealed segment
// (readers keep theirs); the next read maps it again. It does nothing
// for the active segment.
func (s *Segment) Unmap() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active || s.log == nil {
		return
	}
	_ = s.log.Close()
	s.log = nil
}

// Range is a reader's view of whole batches of a segment: Bytes aliases
// the mapping and stays valid until Release.
type Range struct {
	Bytes    []byte
	Position int64
	seg      *Segment
	file     *mmapfile.File
}

// Release drops the reader's reference. It is safe to call on the zero
// Range and more than once.
func (r *Range) Release() {
	if r.file != nil {
		r.file.Release()
		r.seg.readers.Add(-1)
		r.file = nil
		r.Bytes = nil
	}
}

// afterMapping, when set by a test, runs in acquire once the reader holds
// its mapping: what an owner does in that window (a remap) must not
// change what the reader sees.
var afterMapping func()

// errNoReference is returned when a reference cannot be taken.
var errNoReference = errors.New("partlog/segment: mapping went away")

// acquire returns the current mapping's data (up to the published size)
// with a reader reference held.
func (s *Segment) acquire() ([]byte, *mmapfile.File, error) {
	f, size, err := s.mapping()
	if err != nil {
		return nil, nil, err
	}
	if afterMapping != nil {
		afterMapping()
	}
	s.readers.Add(1)
	data := f.Bytes()
	if int64(len(data)) < size {
		f.Release()
		s.readers.Add(-1)
		return nil, nil, errNoReference
	}
	return data[:size:size], f, nil
}

// indexes returns the offset index, opening a sealed segment's read-only
// (or rebuilding it when it fails its sanity checks).
func (s *Segment) index() (*index.OffsetIndex, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.offsetIndex != nil {
		return s.offsetIndex, nil
	}
	if s.closed {
		return nil, ErrClosed
	}
	x, err := index.OpenOffsetIndex(s.Path(filenames.Index), s.base, true)
	if err == nil {
		if err = x.Sanity(); err != nil {
			_ = x.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("partlog/segment: offset index of segment %d: %w", s.base, err)
	}
	s.offsetIndex = x
	return x, nil
}
