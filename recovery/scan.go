package recovery

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/mmapfile"
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
	// epochs lists (epoch, base offset) where a batch's epoch rises above
	// every earlier epoch of the segment.
	epochs []epochEntry
	err    error // I/O error: Run fails
}

type epochEntry struct {
	epoch int32
	start int64
}

// errFault is returned when touching a mapping raised SIGBUS/SIGSEGV (a
// device error under the mapping, recovery.md §9 item 4).
var errFault = errors.New("partlog/recovery: memory fault while reading a mapped file")

// mapped is a read-only view of a file.
type mapped struct {
	f    *mmapfile.File
	data []byte
}

func (o *Options) openMapped(path string) (*mapped, error) {
	if o.hooks != nil && o.hooks.open != nil {
		if err := o.hooks.open(path); err != nil {
			return nil, fmt.Errorf("partlog/recovery: open %s: %w", path, err)
		}
	}
	f, err := mmapfile.Open(path, 0, false)
	if err != nil {
		return nil, fmt.Errorf("partlog/recovery: open %s: %w", path, err)
	}
	// Map every page in one madvise(MADV_POPULATE_READ) instead of one
	// page fault per 4 KiB as the scan touches them: recovery reads the
	// whole file anyway, and each of its passes maps it anew.
	_ = f.Prefault(0, f.Size())
	return &mapped{f: f, data: f.Bytes()}, nil
}

func (m *mapped) close() {
	if m != nil && m.f != nil {
		_ = m.f.Close()
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
// relative range; epochs never decreasing except for an isolated spike).
func scanSegment(data []byte, base int64) scanResult {
	r := scanResult{size: int64(len(data)), firstBase: -1, lastOffset: -1,
		lastEpoch: batch.NoLeaderEpoch, prevEpoch: batch.NoLeaderEpoch, firstEpoch: batch.NoLeaderEpoch, lastPos: -1}
	it := batch.NewIterator(data, 0)
	maxEpoch := int32(-1)
	var pos int64
	for {
		v, ok := it.Next()
		if !ok {
			break
		}
		if why := r.structural(v, base, pos); why != "" {
			if why == blamePrevious {
				reason := fmt.Sprintf("isolated leader epoch spike %d (between %d and %d)", r.lastEpoch, r.prevEpoch, v.PartitionLeaderEpoch())
				cut := r.lastPos
				nr := scanSegmentPrefix(data[:cut], r.size)
				nr.fail, nr.reason = failStructural, reason
				return nr
			}
			r.fail, r.reason = failStructural, why
			r.validEnd = pos
			return r
		}
		if r.firstBase < 0 {
			r.firstBase = v.BaseOffset()
			r.firstEpoch = v.PartitionLeaderEpoch()
		}
		if e := v.PartitionLeaderEpoch(); e >= 0 && e > maxEpoch {
			maxEpoch = e
			r.epochs = append(r.epochs, epochEntry{epoch: e, start: v.BaseOffset()})
		}
		r.batches++
		r.lastOffset = v.LastOffset()
		r.prevEpoch, r.lastEpoch = r.lastEpoch, v.PartitionLeaderEpoch()
		r.lastPos = pos
		pos += int64(len(v))
	}
	r.validEnd = pos
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

// blamePrevious is returned by structural when the previous batch is an
// isolated epoch spike and must be cut instead of v.
const blamePrevious = "\x00previous"

// structural applies the header rules to v (at pos) given the batches
// accepted so far; "" means v is acceptable.
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
	e := v.PartitionLeaderEpoch()
	if e >= 0 && r.lastEpoch >= 0 && e < r.lastEpoch {
		if r.prevEpoch >= 0 && e >= r.prevEpoch {
			return blamePrevious
		}
		return fmt.Sprintf("leader epoch decreases from %d to %d", r.lastEpoch, e)
	}
	return ""
}

// scanSegmentPrefix recounts a prefix of a segment of the given size that
// is known to hold whole valid batches.
func scanSegmentPrefix(prefix []byte, size int64) scanResult {
	r := scanResult{size: size, firstBase: -1, lastOffset: -1, lastEpoch: batch.NoLeaderEpoch,
		prevEpoch: batch.NoLeaderEpoch, firstEpoch: batch.NoLeaderEpoch, lastPos: -1}
	maxEpoch := int32(-1)
	walk(prefix, func(pos int64, v batch.View) bool {
		if r.firstBase < 0 {
			r.firstBase, r.firstEpoch = v.BaseOffset(), v.PartitionLeaderEpoch()
		}
		if e := v.PartitionLeaderEpoch(); e >= 0 && e > maxEpoch {
			maxEpoch = e
			r.epochs = append(r.epochs, epochEntry{epoch: e, start: v.BaseOffset()})
		}
		r.batches++
		r.lastOffset = v.LastOffset()
		r.prevEpoch, r.lastEpoch = r.lastEpoch, v.PartitionLeaderEpoch()
		r.lastPos = pos
		r.validEnd = pos + int64(len(v))
		return true
	})
	return r
}

// frameSize is the size of the batch at the start of b, which is known to
// be a whole valid batch.
func frameSize(b []byte) int64 {
	return int64(int32(binary.BigEndian.Uint32(b[batch.OffBatchLength:]))) + batch.LogOverhead
}

// walk calls fn for each batch of a prefix known to hold whole valid
// batches, stopping when fn returns false.
func walk(prefix []byte, fn func(pos int64, v batch.View) bool) {
	var pos int64
	for pos+batch.HeaderSize <= int64(len(prefix)) {
		n := frameSize(prefix[pos:])
		if n < batch.HeaderSize || pos+n > int64(len(prefix)) {
			return
		}
		if !fn(pos, batch.View(prefix[pos:pos+n])) {
			return
		}
		pos += n
	}
}

// scanAll validates the segments of todo in parallel (a pool of
// o.Parallelism workers). results[i] belongs to segs[todo[i]].
func (o *Options) scanAll(segs []*seg, todo []int) {
	var wg sync.WaitGroup
	next := make(chan int)
	workers := min(o.Parallelism, len(todo))
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				s := segs[i]
				s.scan = o.scanOne(s)
			}
		}()
	}
	for _, i := range todo {
		next <- i
	}
	close(next)
	wg.Wait()
}

func (o *Options) scanOne(s *seg) *scanResult {
	m, err := o.openMapped(s.logPath)
	if err != nil {
		return &scanResult{err: err}
	}
	defer m.close()
	var r scanResult
	if err := guard(s.logPath, func() { r = scanSegment(m.data, s.base) }); err != nil {
		return &scanResult{err: err}
	}
	return &r
}
