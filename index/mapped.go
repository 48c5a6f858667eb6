package index

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"

	"github.com/partlog/partlog/internal/mmapfile"
)

// mapped is the part shared by the offset and time indexes: a file of
// fixed-size entries, memory-mapped. Like Kafka's, it holds no file
// descriptor while open (mmapfile.File.ReleaseDescriptor): the file is
// opened again for the rare calls that change it (growth steps, trim).
//
// A new active index has no file until its first entry: the file is created
// (replacing a leftover regular file of the same name) by the append that
// needs it, or empty by the trim at roll and close. A partition that is
// created and never written to costs no index file, and a crash before the
// first entry leaves the segment without indexes, which recovery rebuilds
// as Kafka's load does.
//
// An active (writable) index is mapped over its first indexMapMin bytes
// (or its file, if longer), and mapped again at twice the length when a
// step outgrows the mapping (mapAgain, under mu held exclusively, so no
// reader holds the old mapping): thousands of partitions' indexes then lie
// side by side in the address space instead of MaxIndexBytes apart, the
// cost of each entry's page walk that the segment's .log avoids the same
// way. Its file holds only the entries plus a reservation
// made with fallocate in steps ahead of them: the first step is one page
// (indexReserveMin), each later one doubles the file, up to indexReserveMax
// at a time. The store of an entry never reaches past the file's end (which
// would raise SIGBUS): an append first grows the file when the next slot is
// not reserved, and a full disk is the error of that append. Each new step
// is populated for writing right away (a few pages, so the writer does not
// page-fault on the index).
//
// An active index reopened from a file of at most a page (the common case
// at a broker's restart: most partitions hold a few entries) is read into
// memory instead (read with writable set): its first change maps it, so
// an idle partition costs no mapping and no page fault for its indexes.
//
// Locking: mu is held exclusively while the mapping or the entry count goes
// down or moves (resize, trim, truncate, close, and growth of the reserved
// length) and shared by every reader of the mapping. Appends into the
// reserved part take no lock: they write the entry bytes past the published
// count and then publish the new count with an atomic store, so a reader
// that loads the count sees complete entries below it.
type mapped struct {
	path       string
	baseOffset int64
	entrySize  int64
	writable   bool

	mu     sync.RWMutex
	file   *mmapfile.File // guarded by mu; nil after Close and while lazy
	buf    []byte         // file.Bytes(): the reserved part; guarded by mu
	closed bool           // guarded by mu
	// lazy is set while a new index's file is not created yet; capLen is
	// the mapping length it will be created with. Written under mu by the
	// writer.
	lazy   bool
	capLen int64
	// read is set for a small index read into buf instead of mapped (no
	// file). A writable one (an active index reopened) is mapped, at
	// capLen, by its first change (mapRead).
	read bool

	entries    atomic.Int64 // published entry count
	maxEntries atomic.Int64 // capacity: entries the index may grow to
}

// Reservation steps of an active index file (see mapped).
const (
	indexReserveMin = 4 << 10
	indexReserveMax = 1 << 20
)

func (m *mapped) create(path string, baseOffset, maxIndexBytes, entrySize int64) error {
	length := maxIndexBytes / entrySize * entrySize
	if length < entrySize {
		return fmt.Errorf("%w: %s: %d bytes cannot hold a %d-byte entry", ErrSize, path, maxIndexBytes, entrySize)
	}
	m.path = path
	m.baseOffset = baseOffset
	m.entrySize = entrySize
	m.writable = true
	m.lazy = true
	m.capLen = length
	m.maxEntries.Store(length / entrySize)
	return nil
}

// materialize creates the file of a lazy index, empty and mapped over
// firstMap bytes, replacing a leftover regular file of the same name (the
// segment's .log was created exclusively, so such a file is stale).
// Caller holds mu exclusively.
func (m *mapped) materialize() error {
	f, err := mmapfile.Open(m.path, mmapfile.Options{Create: true, Capacity: m.firstMap()})
	if errors.Is(err, fs.ErrExist) {
		st, serr := os.Lstat(m.path)
		if serr != nil {
			return serr
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("partlog/index: %s exists: %w", m.path, mmapfile.ErrNotRegular)
		}
		if err := os.Remove(m.path); err != nil {
			return err
		}
		f, err = mmapfile.Open(m.path, mmapfile.Options{Create: true, Capacity: m.firstMap()})
	}
	if err != nil {
		return err
	}
	if err := m.take(f); err != nil {
		return err
	}
	m.lazy = false
	return nil
}

// prepare creates the file of a lazy index now, empty (no slot reserved:
// a crash before the first entry leaves an empty file, as a roll or close
// before it does). Writer only, as ensureRoom.
func (m *mapped) prepare() error {
	if err := m.checkWritable(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.lazy {
		return nil
	}
	return m.materialize()
}

// take makes f, just created or opened, the index's mapping; its
// descriptor is let go (the mapping stays). On failure f is closed.
func (m *mapped) take(f *mmapfile.File) error {
	if err := f.ReleaseDescriptor(); err != nil {
		_ = f.Close()
		return err
	}
	m.file = f
	m.buf = f.Bytes()
	return nil
}

// mapForChange gives a writable index the mapping its first change
// needs: the file of a lazy index is made (materialize), a read one is
// mapped (mapRead). Caller holds mu exclusively.
func (m *mapped) mapForChange() error {
	switch {
	case m.lazy:
		return m.materialize()
	case m.read:
		return m.mapRead()
	}
	return nil
}

// firstMap is the length an active index is first mapped at (see mapped).
func (m *mapped) firstMap() int64 { return min(m.capLen, indexMapMin) }

// indexMapMin is the first mapping length of an active index.
const indexMapMin = 64 << 10

// mapAgain maps the index's file again at length bytes (growth past the
// mapping, a reopened index given a larger capacity). Readers are
// excluded by mu, held exclusively, so nobody holds the old slice; the
// cached view moves to the new mapping here, since the old one is gone
// even when the caller's next step (a Grow on a full disk) fails.
func (m *mapped) mapAgain(length int64) error {
	f, err := mmapfile.Open(m.path, mmapfile.Options{Capacity: length})
	if err != nil {
		return err
	}
	if err := f.ReleaseDescriptor(); err != nil {
		_ = f.Close()
		return err
	}
	if err := m.file.Close(); err != nil {
		_ = f.Close()
		return err
	}
	m.file = f
	m.buf = f.Bytes()
	return nil
}

// mapRead maps a writable index that was read into memory (see mapped)
// before its first change. Caller holds mu exclusively.
func (m *mapped) mapRead() error {
	f, err := mmapfile.Open(m.path, mmapfile.Options{Capacity: m.firstMap()})
	if err != nil {
		return err
	}
	if f.Size() != int64(len(m.buf)) {
		_ = f.Close()
		return fmt.Errorf("partlog/index: %s changed while open: %d bytes, read %d", m.path, f.Size(), len(m.buf))
	}
	if err := m.take(f); err != nil {
		return err
	}
	m.read = false
	return nil
}

// reserve makes sure the file has room for n entries, growing it by the
// next step (see mapped) when it does not. Writer only.
func (m *mapped) reserve(n int64) error { return m.grow(n, true) }

// grow is reserve; populate says whether the new pages are populated.
// A lazy index's file is created by its first step.
func (m *mapped) grow(n int64, populate bool) error {
	need := n * m.entrySize
	cur := int64(len(m.buf))
	if need <= cur && !m.read { // a read index is mapped before any store
		return nil
	}
	limit := m.maxEntries.Load() * m.entrySize
	size := min(max(need, cur*2, cur+indexReserveMin), max(need, cur+indexReserveMax), limit)
	size = size / m.entrySize * m.entrySize
	if size < need {
		return fmt.Errorf("%w: %s has %d entries", ErrFull, m.path, n-1)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.mapForChange(); err != nil {
		return err
	}
	if c := m.file.Cap(); size > c {
		if err := m.mapAgain(min(max(size, 2*c), limit)); err != nil {
			return err
		}
	}
	if err := m.file.Grow(size); err != nil {
		return err
	}
	m.buf = m.file.Bytes()
	if populate {
		// Populate the new pages now rather than fault on them one by
		// one in the append path; a failure only costs those faults.
		_ = m.file.Prefault(cur, size-cur)
	}
	return nil
}

// ensureRoom makes room for one more entry (the next append's), so the
// caller can fail before it writes anything else. Writer only.
func (m *mapped) ensureRoom() error {
	if m.reserved(m.entries.Load() + 1) {
		return nil // what the checks below conclude, in one test
	}
	return m.ensureRoomSlow()
}

// reserved reports whether the first n entries' slots are in a writable,
// mapped file, so that nothing is to be checked or grown before storing
// into them (a mapped buf is a File's, which close drops with it). Writer
// only.
func (m *mapped) reserved(n int64) bool {
	return m.writable && !m.read && n*m.entrySize <= int64(len(m.buf))
}

// ensureRoomSlow is ensureRoom when the slot is not known reserved.
func (m *mapped) ensureRoomSlow() error {
	if err := m.checkWritable(); err != nil {
		return err
	}
	n := m.entries.Load() + 1
	if n > m.maxEntries.Load() {
		return nil // full: the append itself reports it
	}
	return m.reserve(n)
}

// open maps an existing file. As in Kafka (formats.md §4.3), every whole
// entry in the file counts: entries = length / entrySize. Zero padding left by
// a lost trim is therefore counted, and Sanity reports it.
func (m *mapped) open(path string, baseOffset, entrySize int64, readOnly bool) error {
	if readOnly {
		if data, ok, err := readSmall(path); err != nil {
			return err
		} else if ok {
			// Small and read-only (a recovery check, a sealed segment's
			// lookup): read, not mapped; mmap and munmap cost more.
			m.path, m.baseOffset, m.entrySize, m.buf, m.read = path, baseOffset, entrySize, data, true
			m.maxEntries.Store(int64(len(data)) / entrySize)
			m.entries.Store(m.maxEntries.Load())
			return nil
		}
	}
	f, err := mmapfile.Open(path, mmapfile.Options{ReadOnly: readOnly})
	if err != nil {
		return err
	}
	if err := f.ReleaseDescriptor(); err != nil {
		_ = f.Close()
		return err
	}
	m.init(path, baseOffset, entrySize, !readOnly, f)
	m.entries.Store(m.maxEntries.Load())
	return nil
}

// openActive opens an existing file for appending, mapped over its
// length or indexMapMin, whichever is more, with the capacity
// maxIndexBytes (what open and resize do in two mappings). A missing file gives a lazy index (its file is made by its
// first entry, see mapped); a file longer than the capacity is cut to it
// as resize does (cut), or refused with ErrPastCapacity, unchanged, before
// anything is read: a caller that has not checked the file yet must not
// let the cut hide a torn length from its sanity check.
func (m *mapped) openActive(path string, baseOffset, maxIndexBytes, entrySize int64, cut bool) error {
	length := maxIndexBytes / entrySize * entrySize
	fd, size, err := mmapfile.OpenRegular(path, true)
	if errors.Is(err, fs.ErrNotExist) {
		return m.create(path, baseOffset, maxIndexBytes, entrySize)
	}
	if err != nil {
		return err
	}
	if size > length && !cut {
		_ = fd.Close()
		return fmt.Errorf("%w: %s holds %d bytes, capacity %d", ErrPastCapacity, path, size, length)
	}
	if size <= readSmallBytes && size <= length {
		// Read, mapped by the first change (see mapped).
		data := make([]byte, size)
		_, err := io.ReadFull(io.NewSectionReader(fd, 0, size), data)
		if cerr := fd.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("partlog/index: read %s: %w", path, err)
		}
		if err := m.create(path, baseOffset, maxIndexBytes, entrySize); err != nil {
			return err
		}
		m.lazy, m.read, m.buf = false, true, data
		m.entries.Store(size / entrySize)
		return nil
	}
	f, err := mmapfile.Open(path, mmapfile.Options{FD: fd, Length: size, Capacity: min(length, indexMapMin)})
	if err != nil {
		return err
	}
	if f.Size() > length {
		if err := f.Close(); err != nil {
			return err
		}
		if err := m.open(path, baseOffset, entrySize, false); err != nil {
			return err
		}
		return m.resize(maxIndexBytes)
	}
	if err := f.ReleaseDescriptor(); err != nil {
		_ = f.Close()
		return err
	}
	m.init(path, baseOffset, entrySize, true, f)
	m.entries.Store(f.Size() / entrySize)
	m.maxEntries.Store(length / entrySize)
	return nil
}

// readSmallBytes is the largest read-only index read instead of mapped:
// one page, so a sealed segment's index kept open costs at most that much
// heap (a mapping's pages are page cache the kernel can reclaim).
const readSmallBytes = 4 << 10

// readSmall reads the regular file at path (never through a link) if it
// holds at most readSmallBytes; ok is false for a larger one.
func readSmall(path string) (data []byte, ok bool, err error) {
	f, size, err := mmapfile.OpenRegular(path, false)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if size > readSmallBytes {
		return nil, false, nil
	}
	data = make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, false, fmt.Errorf("partlog/index: read %s: %w", path, err)
	}
	return data, true, nil
}

func (m *mapped) init(path string, baseOffset, entrySize int64, writable bool, f *mmapfile.File) {
	m.path = path
	m.baseOffset = baseOffset
	m.entrySize = entrySize
	m.writable = writable
	m.file = f
	m.buf = f.Bytes()
	m.maxEntries.Store(f.Size() / entrySize)
}

func (m *mapped) checkWritable() error {
	if m.writable && (m.file != nil || m.lazy || m.read) {
		return nil // inline: the error is built out of line
	}
	return m.notWritable()
}

// notWritable is checkWritable's error.
func (m *mapped) notWritable() error {
	if !m.writable {
		return fmt.Errorf("%w: %s", ErrReadOnly, m.path)
	}
	if m.file == nil && !m.lazy && !m.read {
		return fmt.Errorf("%w: %s", ErrClosed, m.path)
	}
	return nil
}

// slot returns the bytes of entry slot n (the current count), growing the
// file first when the slot is not reserved. The caller stores the entry
// into them with fixed-size moves (a copy of a slice is a memmove call)
// and then publishes the new count (m.entries.Store(n + 1)). Writer only;
// the caller has checked capacity.
func (m *mapped) slot(n int64) ([]byte, error) {
	if !m.reserved(n + 1) {
		if err := m.reserve(n + 1); err != nil {
			return nil, err
		}
	}
	o := n * m.entrySize
	return m.buf[o : o+m.entrySize : o+m.entrySize], nil
}

// fileLength returns the current length of the index file.
func (m *mapped) fileLength() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.read {
		return int64(len(m.buf))
	}
	if m.file == nil {
		return 0
	}
	return m.file.Size()
}

// truncateEntries drops the entries from n on and zeroes their bytes, so a
// crash before the next trim leaves zeros (detected as padding) rather than
// stale entries.
func (m *mapped) truncateEntries(n int64) error {
	if err := m.checkWritable(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.entries.Load()
	if n >= old {
		return nil
	}
	if m.read {
		if err := m.mapRead(); err != nil {
			return err
		}
	}
	clear(m.buf[n*m.entrySize : old*m.entrySize])
	m.entries.Store(n)
	return nil
}

// resize sets the capacity to size rounded down to whole entries. A
// smaller size cuts the file to it; a larger one only widens the mapping
// (mapping the file again when it is too short) and leaves the file's
// length alone: the next appends reserve room in steps (see mapped).
func (m *mapped) resize(size int64) error {
	if err := m.checkWritable(); err != nil {
		return err
	}
	length := size / m.entrySize * m.entrySize
	n := m.entries.Load()
	if size < 0 || length < n*m.entrySize {
		return fmt.Errorf("%w: %s: %d bytes cannot hold the %d entries written", ErrSize, m.path, size, n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// Resizing is for roll and close (trim) and reopened indexes: a lazy
	// index's file is made now, empty.
	if err := m.mapForChange(); err != nil {
		return err
	}
	cur := m.file.Size()
	switch {
	case length < cur:
		if err := m.file.Truncate(length); err != nil {
			return err
		}
	case length > m.file.Cap():
		// The mapping is too short: map the file again at the new length.
		if err := m.mapAgain(length); err != nil {
			return err
		}
	}
	m.buf = m.file.Bytes()
	m.maxEntries.Store(length / m.entrySize)
	return nil
}

// trim cuts the file to the entries written and makes entries and length
// durable (recovery.md §7.3: a trim that is lost leaves padding).
func (m *mapped) trim() error {
	if m.writable && m.isRead() && int64(len(m.buf)) == m.entries.Load()*m.entrySize {
		// Unchanged since it was read and its length is its entries:
		// only made durable, as a trim would.
		return mmapfile.SyncPath(m.path)
	}
	if err := m.resize(m.entries.Load() * m.entrySize); err != nil {
		return err
	}
	return m.file.SyncFile()
}

// sync makes the entries written so far durable.
func (m *mapped) sync() error {
	if err := m.checkWritable(); err != nil {
		return err
	}
	if m.lazy || m.isRead() {
		return nil // no file, no entry; or nothing written since it was read
	}
	return m.file.Sync(0, m.entries.Load()*m.entrySize)
}

// isRead reports whether the index is read into memory (see mapped).
func (m *mapped) isRead() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.read
}

func (m *mapped) close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lazy || m.read {
		m.lazy, m.read = false, false
		m.buf = nil
		m.closed = true
		return nil
	}
	if m.file == nil {
		return fmt.Errorf("%w: %s", ErrClosed, m.path)
	}
	err := m.file.Close()
	m.file = nil
	m.buf = nil
	m.closed = true
	return err
}

// readView returns the published entries' bytes under a shared lock; the
// caller must call m.mu.RUnlock when done.
func (m *mapped) readView() []byte {
	m.mu.RLock()
	n := m.entries.Load()
	if m.closed {
		return nil
	}
	return m.buf[:n*m.entrySize]
}

// readAhead asks for the pages of the entries to be read in at once,
// before a walk of all of them (Sanity): a writable mapping takes no
// read-ahead on faults (mmapfile, "Read-ahead"), and a cold active
// index, checked at a clean reopen, would cost a major fault per page.
// Advice only.
func (m *mapped) readAhead() {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.file != nil && m.writable && !m.closed {
		_ = m.file.WillNeed(0, m.entries.Load()*m.entrySize)
	}
}

// checkLength is the length part of the sanity check.
func (m *mapped) checkLength() error {
	length := m.fileLength()
	if length%m.entrySize != 0 {
		return corruptf(m.path, -1, "length %d is not a multiple of %d", length, m.entrySize)
	}
	return nil
}
