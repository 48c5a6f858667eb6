package recovery

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/mmapfile"
	"golang.org/x/sys/unix"
)

// failKind says what stopped a segment scan.
type failKind uint8

const (
	failNone       failKind = iota
	failTorn                // *batch.TornTailError, not all zeros
	failZero                // *batch.TornTailError with Zero
	failCorrupt             // *batch.CorruptionError (CRC, magic, framing)
	failStructural          // a header field outside the CRC breaks a rule (recovery.md §7.1)
)

// scanResult is what validating one segment's .log found.
type scanResult struct {
	size       int64 // file length
	validEnd   int64 // end of the last valid batch (== size when fail == failNone)
	fail       failKind
	reason     string // why the scan stopped
	batches    int
	firstBase  int64 // base offset of the first batch, -1 if none
	lastOffset int64 // last offset of the last valid batch, -1 if none
	// The last two valid batches' epochs and the last one's position, for
	// the epoch rule across a segment boundary.
	lastEpoch, prevEpoch int32
	lastPos              int64
	firstEpoch           int32
	// maxTimestamp is the largest timestamp of the valid batches (the
	// first batch holding it wins), and offsetOfMax that batch's last
	// offset: batch.NoTimestamp and -1 when there is none.
	maxTimestamp, offsetOfMax int64
	// epochs lists (epoch, base offset, position) where a batch's epoch
	// rises above every earlier epoch of the segment.
	epochs []epochEntry
	// epochDrop is the first batch whose epoch is below its predecessor's
	// (kept, reported), or nil.
	epochDrop *epochDrop
	// Collected for the later steps when the scan covers a whole segment
	// (scanOne), so that they need not walk the data again: the rebuilt
	// indexes of the valid batches (nil when not collected or over the
	// budget), and the positions of the batches the producer replay needs
	// (those with a producer id or the control flag; replayAll when they
	// were not collected and the replay must walk every batch).
	idx       *indexPlan
	replay    []uint32
	replayAll bool
	err       error // I/O error: Run fails
}

type epochEntry struct {
	epoch int32
	start int64
	pos   int64
}

// indexPlan is a segment's offset and time index rebuilt over [0, end).
type indexPlan struct {
	end            int64
	offsets, times []byte
}

// collector gathers, batch by batch in position order, what scanResult
// collects for the later steps.
type collector struct {
	ib        index.Builder
	replay    []uint32
	replayAll bool
}

func newCollector(base, interval int64) *collector {
	return &collector{ib: index.NewBuilder(base, interval)}
}

func (c *collector) add(pos int64, v batch.View) {
	c.ib.Add(pos, v.LastOffset(), v.MaxTimestamp())
	if c.replayAll || !(v.IsControl() || v.ProducerID() >= 0) {
		return
	}
	if pos > math.MaxUint32 {
		c.replay, c.replayAll = nil, true
		return
	}
	c.replay = append(c.replay, uint32(pos))
}

// done stores the collected data in r, whose valid batches end at
// r.validEnd.
func (c *collector) done(r *scanResult) {
	if c == nil {
		r.replayAll = true
		return
	}
	offsets, times := c.ib.Finish()
	r.idx = &indexPlan{end: r.validEnd, offsets: offsets, times: times}
	r.replay, r.replayAll = c.replay, c.replayAll
	if r.replayAll {
		r.replay = nil
	}
}

// collectedBytes is the heap the collected data of r holds.
func (r *scanResult) collectedBytes() int64 {
	n := int64(cap(r.replay)) * 4
	if r.idx != nil {
		n += int64(cap(r.idx.offsets) + cap(r.idx.times))
	}
	return n
}

// dropCollected forgets the collected data: the later steps walk the
// mapped data instead.
func (r *scanResult) dropCollected() {
	r.idx, r.replay, r.replayAll = nil, nil, true
}

// errFault is returned when touching a mapping raised SIGBUS/SIGSEGV (a
// device error under the mapping, recovery.md §9 item 4).
var errFault = errors.New("partlog/recovery: memory fault while reading a mapped file")

// mapped is a read-only view of a file. It holds no file descriptor: the
// file is closed as soon as it is mapped (or, when small, read), so that
// many segments may stay mapped between the steps of a Run.
type mapped struct {
	data []byte
	read bool // data was read into memory, not mapped (small files)
}

// readSmallBytes is the largest file openMapped reads instead of mapping.
const readSmallBytes = 64 << 10

// openMapped returns the bytes of the .log at path: read when small, else
// mapped. whole says the caller reads the whole file (a scan): the mapping
// is then populated at once; a check that reads only the first batch and
// the tail after the last index entry (a trusted segment of a cleanly
// closed directory, possibly a 1 GiB one) lets the few pages it touches
// fault in instead of reading the whole segment from disk.
func (o *Options) openMapped(path string, whole bool) (*mapped, error) {
	if o.hooks != nil && o.hooks.open != nil {
		if err := o.hooks.open(path); err != nil {
			return nil, fmt.Errorf("partlog/recovery: open %s: %w", path, err)
		}
	}
	f, size, err := mmapfile.OpenRegular(path, false)
	if err != nil {
		return nil, fmt.Errorf("partlog/recovery: open %s: %w", path, err)
	}
	defer f.Close()
	return readOrMap(f, path, size, whole)
}

// readOrMap is openMapped for f, the open file at path whose length is
// size (the descriptor stays the caller's).
func readOrMap(f *os.File, path string, size int64, whole bool) (*mapped, error) {
	if size == 0 {
		return &mapped{}, nil
	}
	if size != int64(int(size)) {
		return nil, fmt.Errorf("partlog/recovery: open %s: length %d does not fit in memory", path, size)
	}
	if size <= readSmallBytes {
		// A small file (the tail of a cleanly closed partition holding a
		// few batches) is read: mmap, madvise and munmap cost more than
		// the copy, thousands of times at a broker's start.
		data := make([]byte, size)
		if _, err := f.ReadAt(data, 0); err != nil {
			return nil, fmt.Errorf("partlog/recovery: read %s: %w", path, err)
		}
		return &mapped{data: data, read: true}, nil
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("partlog/recovery: mmap %s: %w", path, err)
	}
	// Map every page in one madvise(MADV_POPULATE_READ) instead of one
	// page fault per 4 KiB as the scan touches them: a scan reads the
	// whole file anyway. Older kernels lack it (EINVAL): read-ahead is
	// asked for instead. Any other failure (an I/O error under the
	// mapping) is left to the scan, which turns the fault into an error.
	if !whole {
		return &mapped{data: data}, nil
	}
	if err := unix.Madvise(data, unix.MADV_POPULATE_READ); errors.Is(err, unix.EINVAL) {
		_ = unix.Madvise(data, unix.MADV_WILLNEED)
	}
	return &mapped{data: data}, nil
}

func (m *mapped) close() {
	if m != nil && m.data != nil {
		if !m.read {
			_ = unix.Munmap(m.data)
		}
		m.data = nil
	}
}

// mapSeg returns the mapping of s's .log: the one kept from the scan, or a
// new one. done releases what mapSeg opened.
func (x *run) mapSeg(s *seg) (m *mapped, done func(), err error) {
	if s.m != nil {
		return s.m, func() {}, nil
	}
	m, err = x.o.openMapped(s.logPath, true)
	if err != nil {
		return nil, nil, err
	}
	return m, m.close, nil
}

// releaseMap unmaps the mapping kept from s's scan, if any.
func (s *seg) releaseMap() {
	if s.m != nil {
		s.m.close()
		s.m = nil
	}
}

// guard runs fn with faults on mappings turned into errFault.
func guard(path string, fn func()) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if re, ok := r.(interface{ Addr() uintptr }); ok {
				err = fmt.Errorf("%w: %s (address %#x)", errFault, path, re.Addr())
				return
			}
			panic(r)
		}
	}()
	fn()
	return nil
}

// scanSegment validates every batch of data, a segment's whole .log whose
// base offset is base: batch.Iterator's checks plus the structural rules of
// recovery.md §7.1 (offsets ≥ base, strictly increasing, within the
// relative range).
//
// When c is not nil, every valid batch is also passed to c, and what it
// collected is stored in the result.
func scanSegment(data []byte, base int64, c *collector) scanResult {
	r := newScanResult(int64(len(data)))
	it := batch.NewIterator(data, 0)
	maxEpoch := int32(-1)
	var pos int64
	for {
		v, ok := it.Next()
		if !ok {
			break
		}
		if why := r.structural(v, base, pos); why != "" {
			r.fail, r.reason = failStructural, why
			r.validEnd = pos
			c.done(&r)
			return r
		}
		r.accept(pos, v, &maxEpoch, c)
		pos += int64(len(v))
	}
	r.validEnd = pos
	c.done(&r)
	var tt *batch.TornTailError
	var ce *batch.CorruptionError
	switch err := it.Err(); {
	case err == nil:
	case errors.As(err, &tt):
		r.fail, r.reason = failTorn, tt.Reason
		if tt.Zero {
			r.fail = failZero
		}
	case errors.As(err, &ce):
		r.fail, r.reason = failCorrupt, ce.Reason
	default:
		r.fail, r.reason = failCorrupt, err.Error()
	}
	return r
}

// newScanResult is the result of a scan that has accepted nothing yet.
func newScanResult(size int64) scanResult {
	return scanResult{size: size, firstBase: -1, lastOffset: -1, lastEpoch: batch.NoLeaderEpoch,
		prevEpoch: batch.NoLeaderEpoch, firstEpoch: batch.NoLeaderEpoch, lastPos: -1,
		maxTimestamp: batch.NoTimestamp, offsetOfMax: -1}
}

// accept records v, a valid batch at pos, in r: first offset and epoch,
// the epoch changes (an epoch above every earlier one, tracked in
// maxEpoch), counts and the last batch; c, when not nil, collects it too.
func (r *scanResult) accept(pos int64, v batch.View, maxEpoch *int32, c *collector) {
	if r.firstBase < 0 {
		r.firstBase, r.firstEpoch = v.BaseOffset(), v.PartitionLeaderEpoch()
	}
	if e := v.PartitionLeaderEpoch(); e >= 0 && e > *maxEpoch {
		*maxEpoch = e
		r.epochs = append(r.epochs, epochEntry{epoch: e, start: v.BaseOffset(), pos: pos})
	}
	if c != nil {
		c.add(pos, v)
	}
	if ts := v.MaxTimestamp(); ts > r.maxTimestamp {
		r.maxTimestamp, r.offsetOfMax = ts, v.LastOffset()
	}
	r.batches++
	r.lastOffset = v.LastOffset()
	r.prevEpoch, r.lastEpoch = r.lastEpoch, v.PartitionLeaderEpoch()
	r.lastPos = pos
}

// structural applies the header rules to v (at pos) given the batches
// accepted so far; "" means v is acceptable. A leader epoch lower than the
// previous batch's is not one of them: Kafka keeps and serves such a
// batch (its epoch cache only takes increases), so recovery keeps it too
// and reports it (epochDrop).
func (r *scanResult) structural(v batch.View, base, pos int64) string {
	b := v.BaseOffset()
	switch {
	case b < base:
		return fmt.Sprintf("batch base offset %d below the segment base offset %d", b, base)
	case v.LastOffset()-base > math.MaxInt32:
		return fmt.Sprintf("last offset %d does not fit the relative range of segment %d", v.LastOffset(), base)
	case r.lastOffset >= 0 && b <= r.lastOffset:
		return fmt.Sprintf("offsets not increasing: batch base %d after last offset %d", b, r.lastOffset)
	}
	if e := v.PartitionLeaderEpoch(); e >= 0 && r.lastEpoch >= 0 && e < r.lastEpoch && r.epochDrop == nil {
		r.epochDrop = &epochDrop{pos: pos, offset: b, from: r.lastEpoch, to: e}
	}
	return ""
}

// epochDrop is the first batch of a segment whose leader epoch is lower
// than the previous batch's.
type epochDrop struct {
	pos, offset int64
	from, to    int32
}

// scanSegmentPrefix recounts a prefix of a segment of the given size that
// is known to hold whole valid batches, passing them to c when it is not
// nil.
func scanSegmentPrefix(prefix []byte, size int64, c *collector) scanResult {
	r := newScanResult(size)
	maxEpoch := int32(-1)
	walk(prefix, func(pos int64, v batch.View) bool {
		r.accept(pos, v, &maxEpoch, c)
		r.validEnd = pos + int64(len(v))
		return true
	})
	c.done(&r)
	return r
}

// walk calls fn for each batch of a prefix known to hold whole valid
// batches (batch.Walker), stopping when fn returns false.
func walk(prefix []byte, fn func(pos int64, v batch.View) bool) {
	w := batch.NewWalker(prefix)
	for v, ok := w.Next(); ok; v, ok = w.Next() {
		if !fn(int64(w.Offset()-len(v)), v) {
			return
		}
	}
}

// Bounds on what the scan keeps for the later steps (memory bounded,
// package doc): at most maxKeptMappings segments stay mapped from the scan
// to the producer replay, and the collected index entries and replay
// positions of all segments together take at most maxCollectedBytes (a
// segment over the budget has its data walked again instead).
const (
	maxKeptMappings   = 1024
	maxCollectedBytes = 256 << 20
)

// scanAll validates the segments of todo in parallel (a pool of
// o.Parallelism workers), storing each result in segs[i].scan.
func (o *Options) scanAll(segs []*seg, todo []int) {
	var wg sync.WaitGroup
	next := make(chan int)
	workers := min(o.Parallelism, len(todo))
	var budget atomic.Int64
	budget.Store(maxCollectedBytes)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				s := segs[todo[k]]
				s.scan, s.m = o.scanOne(s, k < maxKeptMappings)
				if r := s.scan; r.err == nil {
					if n := r.collectedBytes(); budget.Add(-n) < 0 {
						budget.Add(n)
						r.dropCollected()
					}
				}
			}
		}()
	}
	for k := range todo {
		next <- k
	}
	close(next)
	wg.Wait()
}

// scanOne validates the whole .log of s, collecting what the later steps
// need; the mapping is returned when keep is set (and the scan succeeded),
// else released.
func (o *Options) scanOne(s *seg, keep bool) (*scanResult, *mapped) {
	m, err := o.openMapped(s.logPath, true)
	if err != nil {
		return &scanResult{err: err}, nil
	}
	var r scanResult
	c := newCollector(s.base, o.Segment.IndexIntervalBytes)
	if err := guard(s.logPath, func() { r = scanSegment(m.data, s.base, c) }); err != nil {
		m.close()
		return &scanResult{err: err}, nil
	}
	if !keep {
		m.close()
		m = nil
	}
	return &r, m
}
