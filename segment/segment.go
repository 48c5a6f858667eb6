package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/mmapfile"
	"github.com/partlog/partlog/internal/prefault"
	"github.com/partlog/partlog/internal/testhook"
)

// Config holds the segment settings a Log passes down. Every field must be
// set (the root package's Options supplies Kafka's defaults).
type Config struct {
	// SegmentBytes is the roll size and the preallocated length of the
	// active .log file.
	SegmentBytes int64
	// MaxIndexBytes is the preallocated length of the offset and time
	// indexes of the active segment.
	MaxIndexBytes int64
	// IndexIntervalBytes is the number of bytes appended between two
	// offset-index entries.
	IndexIntervalBytes int64
	// Prefault, if positive, is the window kept populated ahead of the
	// write position of the active segment by the workers of PrefaultPool.
	Prefault int64
	// PrefaultPool serves the prefault windows; nil means the process's
	// prefault.Default.
	PrefaultPool *prefault.Pool
	// ReserveMaxBytes is the largest step by which the active .log's disk
	// reservation grows (see the Segment doc, "Disk reservation"). Zero
	// means DefaultReserveMaxBytes; a negative value reserves the whole
	// SegmentBytes when the segment is created, as before steps existed.
	ReserveMaxBytes int64
}

// Disk reservation of the active .log (see the Segment doc).
const (
	// ReserveMinBytes is the first reservation of a new active segment
	// and the smallest step.
	ReserveMinBytes = 256 << 10
	// DefaultReserveMaxBytes is the default largest step.
	DefaultReserveMaxBytes = 16 << 20
	// reserveFastGrowth: a step used up within this long doubles the next
	// one; a slower one halves it.
	reserveFastGrowth = time.Second
)

// monotonic is the clock of the reservation policy (tests replace it).
var monotonic = time.Now

// Errors of this package.
var (
	// ErrFull is returned by Append when the bytes do not fit the
	// preallocated segment, or an index is full; the log rolls first.
	ErrFull = errors.New("partlog/segment: segment full")
	// ErrSealed is returned when a sealed segment is asked to change.
	ErrSealed = errors.New("partlog/segment: segment is sealed")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("partlog/segment: segment is closed")
	// ErrOffsetOverflow is returned when an offset does not fit the
	// 32-bit relative form of the indexes (formats.md §4.7).
	ErrOffsetOverflow = errors.New("partlog/segment: offset does not fit the segment's relative range")
)

// Segment is one .log file and its three indexes. The log (the owner)
// serializes every mutating call; readers call Read, Lookup-style methods
// and AcquireRange concurrently with the owner.
//
// The .log bytes:
//
//   - Active segment: a writable mapping of the file, stored into only
//     within its reserved prefix (see "Disk reservation"). The published
//     size (an atomic) is advanced with a release store only after a
//     whole append has been copied and its headers stamped, so a reader
//     that loads it (acquire) never sees a partly written batch.
//   - Sealed segment: the file trimmed to its data, mapped read-only on
//     demand (and unmapped again by the owner's cache through Unmap).
//
// Disk reservation: the active .log's length is SegmentBytes from the
// start (a hole past the reservation, mmapfile.CreateAhead), but a new
// one is mapped over MapMinBytes only (or its SegmentBytes if smaller, or
// if ReserveMaxBytes reserves it whole; address space: stores never reach
// past the reservation), and mapped again at its whole capacity when a
// step outgrows the mapping (mapFor); a reopened one is mapped over its
// data and mapped again the same way. Its blocks are reserved with
// fallocate in steps ahead of the write position, so disk use grows with
// the data and a full disk is the error of the append that needed the
// room, never a SIGBUS or a lost writeback (no store or write reaches past
// the reserved prefix: Append reserves first).
// A new segment reserves ReserveMinBytes (or SegmentBytes if smaller); a
// segment reopened after a clean close reserves nothing beyond its data,
// and keeps its file's length, until it is appended to (its first step
// sets the length, mmapfile.OpenAhead). When an append needs more, the
// file is extended to the append's end plus the current step (with a
// prefault window, appends through the mapping take the step while still
// a step, or half the smallest step for the first one, short of the
// reserved end, so the prefaulter can populate the pages after it in
// time); the step doubles when the
// previous one was used up in less than a second and halves otherwise,
// between ReserveMinBytes and Config.ReserveMaxBytes (16 MiB by default)
// (a step that would end past a new segment's MapMinBytes mapping while
// the append's need lies ReserveMinBytes or more inside it ends at the
// mapping's end instead, sparing a remap: see reserve), so
// a busy partition takes a syscall per 16 MiB while an idle or slow one
// reserves at most a few hundred KiB beyond its data; for a fast one
// (steps of 4 MiB and more, growing) a prefault worker allocates the
// blocks of the next step ahead, off the append path, so the step's
// fallocate does not wait on the disk (mmapfile.File.Preallocate). Its indexes follow
// the same scheme in smaller steps (package index). Roll and close trim the
// file to its data, as before.
//
// Who may hold slices into a mapping: only a holder of a reference on the
// *mmapfile.File it came from (see AcquireRange). Unmapping (Unmap, Seal,
// Close, Delete) drops the segment's own reference; the munmap itself
// happens when the last reader releases. Truncation never shrinks or
// rewrites bytes a reader may hold: when readers are active it writes a
// new file and leaves the old inode to them (truncate.go).
type Segment struct {
	// The fields every append reads or writes come first, on two cache
	// lines (TestSegmentAppendLines checks it): with thousands of
	// partitions appended to in turn, an append's cost is mostly the
	// cache lines it touches.

	// size is the published logical size of the .log, written by the
	// owner after the bytes are in place and read by anyone.
	size atomic.Int64
	base int64
	// active and closed are guarded by mu (read without it by the owner).
	active bool
	closed bool
	// indexesFull caches whether the offset or time index is full (the
	// next append must roll). Entries grow only in Append and shrink only
	// in TruncateTo, which recompute it (noteIndexes), so ShouldRoll reads
	// one bool instead of four counters. Owner only.
	indexesFull bool
	// nextOffset is the offset after the last batch (base while empty).
	// Owner only (readers are bounded by the log's published end, never
	// by this), so an append stores it without an atomic exchange.
	nextOffset int64
	// mapped is the active .log's mapping up to its reserved size
	// (log.Bytes() as of the last reservation change) and room the end of
	// the appends through the mapping that need no reservation step
	// (mapped's length less the distance stores keep reserved ahead), so
	// an append reads neither the File nor the policy. Every change of the
	// File or of its reserved size refreshes them (noteReserved): a new or
	// reopened active segment, a reservation step, a truncation. Owner
	// only.
	mapped []byte
	room   int64

	// Owner-only state (the log's append lock).
	bytesSinceIndex      int64
	maxTimestamp         int64 // largest timestamp appended, -1 if none
	offsetOfMaxTimestamp int64
	rollingTimestamp     int64 // max timestamp of the first batch, -1 if unknown
	// prefaultAt is the write position from which the next append tells
	// the prefaulter where it is (see prefaultStride).
	prefaultAt int64
	// cfg ends the second line with SegmentBytes, MaxIndexBytes and
	// IndexIntervalBytes, which appends read.
	cfg Config

	log         *mmapfile.File // guarded by mu; nil while a sealed segment is unmapped
	prefaulter  *prefault.Writer
	reserveStep int64 // next growth step of the .log
	// firstPrealloc says the first step's blocks were asked for
	// (advancePrefault); a Truncate forgets it with the blocks.
	firstPrealloc bool

	reservedAt time.Time              // when the .log last grew
	hdr        [batch.HeaderSize]byte // stamped header for WriteAt
	created    time.Time
	dir        string

	// readers counts reader references taken through AcquireRange that
	// are not yet released, on any mapping of this segment (written by
	// readers: kept off the append's lines).
	readers atomic.Int64

	// mu guards log, active and closed above, and the lazily opened
	// indexes of a sealed segment.
	mu          sync.Mutex
	offsetIndex *index.OffsetIndex
	timeIndex   *index.TimeIndex
	// timeIndexed is a timestamp the time index's last entry is known to
	// be at or above (math.MinInt64: nothing known), so an indexed append
	// whose largest timestamp is not above it reads nothing of the time
	// index (it would add no entry). Raised by appendIndexes; reset where
	// the time index is opened or truncated. Owner only.
	timeIndexed int64
	txnIndex    *index.TxnIndex
	onMap       func(*Segment, int64) // told when a sealed mapping is made
	// synced remembers what the last Flush made durable, so a transaction
	// index that did not change is not synced again. -1 forces a sync.
	synced struct{ txnBytes int64 }
}

// BaseOffset is the segment's base offset.
func (s *Segment) BaseOffset() int64 { return s.base }

// Size is the published size of the .log data.
func (s *Segment) Size() int64 { return s.size.Load() }

// NextOffset is the offset after the last batch of the segment (its base
// offset while it is empty). For a sealed segment loaded lazily it is
// known only once SetNextOffset or a scan has set it. Owner only.
func (s *Segment) NextOffset() int64 { return s.nextOffset }

// SetNextOffset records the next offset of a sealed segment known from
// the following segment's base offset. Owner only.
func (s *Segment) SetNextOffset(o int64) { s.nextOffset = o }

// IsEmpty reports whether the segment holds no bytes.
func (s *Segment) IsEmpty() bool { return s.size.Load() == 0 }

// Active reports whether the segment is the writable one.
func (s *Segment) Active() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// Readers is the number of unreleased reader references.
func (s *Segment) Readers() int64 { return s.readers.Load() }

// SetOnMap installs a callback told (segment, mapped bytes) whenever a
// sealed segment is mapped, so the owner can account for and later evict
// the mapping with Unmap.
func (s *Segment) SetOnMap(fn func(*Segment, int64)) {
	s.mu.Lock()
	s.onMap = fn
	s.mu.Unlock()
}

// Path returns the path of the segment's kind file.
func (s *Segment) Path(kind string) string { return Path(s.dir, s.base, kind) }

// Create makes a new, empty active segment at base in dir: the .log with
// its first reservation (see "Disk reservation" above: fallocate, so a
// full disk fails here, not with SIGBUS later); the indexes, of capacity
// cfg.MaxIndexBytes, make their files with their first entry or at roll
// and close (package index). Files left under the same names are
// replaced (the indexes' when they are made), unless one is not a regular
// file (a directory, a symbolic link): that is left alone and Create fails
// (for an index: the append or roll that would make it).
func Create(dir string, base int64, cfg Config, now time.Time) (*Segment, error) {
	s := newSegment(dir, base, cfg, now)
	// The .log and both indexes are created exclusively: only when one is
	// left over are they all removed and created again (a syscall per
	// file saved on the common path: thousands at a broker's start). A
	// stale .txnindex would be adopted by OpenTxnIndex, so it always goes.
	if err := removeRegular(s.Path(TxnIndexSuffix)); err != nil {
		return nil, fmt.Errorf("partlog/segment: create segment %d: %w", base, err)
	}
	reserve := s.firstReserve()
	mapLen := min(cfg.SegmentBytes, max(reserve, MapMinBytes))
	f, err := mmapfile.CreateAheadMapped(s.Path(LogSuffix), cfg.SegmentBytes, reserve, mapLen)
	if errors.Is(err, fs.ErrExist) {
		if err := s.removeFiles(); err != nil {
			return nil, err
		}
		f, err = mmapfile.CreateAheadMapped(s.Path(LogSuffix), cfg.SegmentBytes, reserve, mapLen)
	}
	if err != nil {
		return nil, err
	}
	s.log = f
	// The indexes make their files with their first entry (or at roll and
	// close), replacing leftovers of the same names then (package index).
	err = s.openWritableIndexes(true, false, false)
	if err == nil {
		// An idle partition holds no descriptor for its .log (see
		// mmapfile.File.ParkDescriptor); the first write or sync opens it.
		err = s.log.ParkDescriptor()
	}
	if err != nil {
		_ = s.closeFiles()
		_ = s.removeFiles()
		return nil, err
	}
	s.active = true
	s.noteIndexes()
	s.startPrefault()
	s.noteReserved()
	return s, nil
}

// noteReserved refreshes mapped and room from the active .log. Owner
// only, after s.log or its reserved size changed.
func (s *Segment) noteReserved() {
	s.mapped = s.log.Bytes()
	s.room = int64(len(s.mapped)) - s.reserveAhead(Stamp{})
}

// dropMapped forgets the cached mapping when the .log is let go: a later
// Append (a bug) then takes the cold path, which fails on the missing
// File, instead of storing into an unmapped range.
func (s *Segment) dropMapped() { s.mapped, s.room = nil, -1 }

// noteIndexes recomputes indexesFull. Owner only, on an active segment.
func (s *Segment) noteIndexes() {
	s.indexesFull = s.offsetIndex != nil && s.offsetIndex.IsFull() || s.timeIndex != nil && s.timeIndex.IsFull()
}

// removeFiles removes the segment's four files where they exist.
func (s *Segment) removeFiles() error {
	for _, kind := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix} {
		if err := removeRegular(s.Path(kind)); err != nil {
			return fmt.Errorf("partlog/segment: create segment %d: %w", s.base, err)
		}
	}
	return nil
}

// removeRegular removes path if it is a regular file; a missing one is
// fine, and any other entry (a link, a directory) is left alone and is an
// error: a segment is never made over it.
func removeRegular(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s exists and is not a regular file", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func newSegment(dir string, base int64, cfg Config, now time.Time) *Segment {
	s := &Segment{dir: dir, base: base, cfg: cfg, maxTimestamp: batch.NoTimestamp,
		offsetOfMaxTimestamp: base, rollingTimestamp: batch.NoTimestamp, created: now, timeIndexed: math.MinInt64}
	s.synced.txnBytes = -1
	s.nextOffset = base
	return s
}

// OpenSealed returns a sealed segment for files already on disk without
// reading or mapping anything: size comes from the file length, and the
// mapping and indexes are opened on first use.
func OpenSealed(dir string, base int64, cfg Config, now time.Time) (*Segment, error) {
	s := newSegment(dir, base, cfg, now)
	st, err := os.Stat(s.Path(LogSuffix))
	if err != nil {
		return nil, err
	}
	s.size.Store(st.Size())
	return s, nil
}

// openWritableIndexes opens (or, with create, makes) the offset and time
// indexes at full capacity, and the transaction index. Caller holds mu or
// owns s exclusively.
//
// txn says whether the .txnindex may exist: when false (a new segment, or
// a directory listing without it) it is not looked for; the first aborted
// transaction creates it.
func (s *Segment) openWritableIndexes(create, txn, cut bool) error {
	var err error
	s.timeIndexed = math.MinInt64
	if create {
		if s.offsetIndex, err = index.CreateOffsetIndex(s.Path(IndexSuffix), s.base, s.cfg.MaxIndexBytes); err != nil {
			return err
		}
		if s.timeIndex, err = index.CreateTimeIndex(s.Path(TimeIndexSuffix), s.base, s.cfg.MaxIndexBytes); err != nil {
			return err
		}
	} else {
		// A missing index (Kafka makes them lazily too) is made by its
		// first entry or at roll and close.
		if s.offsetIndex, err = index.OpenActiveOffsetIndex(s.Path(IndexSuffix), s.base, s.cfg.MaxIndexBytes, cut); err != nil {
			return err
		}
		if s.timeIndex, err = index.OpenActiveTimeIndex(s.Path(TimeIndexSuffix), s.base, s.cfg.MaxIndexBytes, cut); err != nil {
			return err
		}
	}
	if !txn {
		s.txnIndex = index.NewTxnIndex(s.Path(TxnIndexSuffix), s.base)
		return nil
	}
	s.txnIndex, err = index.OpenTxnIndex(s.Path(TxnIndexSuffix), s.base, false)
	return err
}

// firstReserve is the reservation of a newly created .log.
func (s *Segment) firstReserve() int64 {
	if s.cfg.ReserveMaxBytes < 0 {
		return s.cfg.SegmentBytes
	}
	return min(s.cfg.SegmentBytes, ReserveMinBytes)
}

// reserve grows the .log's reservation to cover need bytes (≤ Cap) plus
// the next step of the policy described in the Segment doc. Owner only.
func (s *Segment) reserve(need int64) error {
	maxStep := s.cfg.ReserveMaxBytes
	if maxStep <= 0 {
		maxStep = DefaultReserveMaxBytes
	}
	maxStep = max(maxStep, ReserveMinBytes)
	now := monotonic()
	fast := false
	switch {
	case s.reserveStep == 0:
		s.reserveStep = ReserveMinBytes
	case now.Sub(s.reservedAt) < reserveFastGrowth:
		s.reserveStep = min(s.reserveStep*2, maxStep)
		fast = true
	default:
		s.reserveStep = max(s.reserveStep/2, ReserveMinBytes)
	}
	s.reservedAt = now
	size := min(need+s.reserveStep, s.log.Cap())
	if m := s.log.MapLen(); size > m && m == MapMinBytes && need+ReserveMinBytes <= m {
		// The step would outgrow the MapMinBytes mapping while the data
		// is still well inside it: it ends at the mapping's end instead,
		// which leaves ReserveMinBytes or more, and the remap waits for
		// a step the data needs. A writer whose steps double (a step
		// used up within a second: each of 1 000 partitions appended to
		// round robin) then keeps the mapping up to 1 MiB of data
		// without a prefault window, and to about 512 KiB with one
		// (stores keep the 512 KiB step reserved ahead). Steps that stay
		// at ReserveMinBytes (a writer slower than that) need
		// 768 KiB plus an append's length at the third one, past the
		// cut's bound, so it maps the whole capacity there (at about
		// 512 KiB with a prefault window).
		size = m
	}
	if err := s.mapFor(size); err != nil {
		return err
	}
	err := s.log.Grow(size)
	if err != nil && size > need {
		// Too little room for the step (a nearly full disk): reserve
		// just what this append needs, so the disk is used to the end.
		s.reserveStep = ReserveMinBytes
		err = s.log.Grow(need)
	}
	s.noteReserved() // also after a failed step: the policy changed
	if err == nil && s.prefaulter != nil && (fast || s.reserveStep < preallocMinStep) {
		// The next step (the one a writer whose steps double takes;
		// a slower one's is half of it), allocated by a prefault worker
		// so that the Grow that takes it makes no system call. It
		// starts an append's length past size (the append that takes
		// it overshoots room), so a little more is allocated.
		margin := int64(preallocMargin)
		if s.reserveStep >= preallocMinStep {
			margin = MapMinBytes
		}
		s.prefaulter.Preallocate(size, min(s.reserveStep*2, maxStep)+margin)
	}
	return err
}

// A prefaulted segment's next reservation step is allocated ahead by a
// prefault worker (prefault.Writer.Preallocate): always while the
// steps are below preallocMinStep, and past it for a writer whose steps
// are growing.
//
// Small steps: each step's fallocate cost the writer 10-25 µs (a parked
// descriptor reopened, the extent tree updated); with 1 000 partitions
// appended round robin (BenchmarkRoundRobin) their steps fall due in the
// same round, which then took 20-25 ms instead of 0.3 ms, about a fifth
// of the rr appends' time over the first 300 KiB of each partition. A
// Grow within blocks a worker allocated makes no system call. The cost:
// a partition that has appended keeps up to twice its step (and
// preallocMargin) of blocks ahead of its data, until it rolls or closes;
// one that has appended less than preallocFirstAt (a few batches) has
// no step and no preallocation.
//
// preallocFirstAt: asking at the first append instead cost a directory
// of 10 000 partitions with a few batches each 3.2 GB of blocks no data
// came to (the reopen of BenchmarkOpenDir filled its 4 GiB disk). From
// preallocFirstAt to the step (at half the first reservation) a worker
// has 96 KiB of appends: with 1 000 partitions appended round robin at
// 1 KiB, about 50 ms, against 10-25 ms for its 1 000 fallocates.
//
// Large steps: a step of megabytes is where the file system moves on to
// block groups whose bitmaps it has not read, and its fallocate then
// waits for the disk: in BenchmarkAppendPaired at 1 KiB, a few 16 MiB
// steps in each 200 MB took 1.2 to 6 ms each, under an append. A writer
// whose large steps shrink (slower than a step a second) keeps one step
// of blocks ahead of its data, no more.
const (
	preallocMinStep = 4 << 20
	preallocMargin  = 64 << 10
	preallocFirstAt = ReserveMinBytes / 8
)

// mapFor makes the active .log's mapping reach size bytes (≤ Cap), by
// mapping the file again (mmapfile.File.Remap): at MapMinBytes while size
// fits in it (a reopened segment's mapping covers only its data), else at
// the whole capacity. A new segment is mapped at MapMinBytes from the
// start (Create), so an idle or slow partition's mapping stays
// MapMinBytes, beside its neighbours' in the address space, and its first
// reservation steps take no remap: with 1 000 partitions appended to
// round robin (BenchmarkRoundRobin), each one's first step remapped it
// (an mmap, a munmap and a descriptor opened for the mmap, ~40 µs), a
// quarter of the rr appends' time. A segment written past MapMinBytes is
// mapped anew only once. (A
// doubling policy, about 11 remaps per 1 GiB segment, cost a quarter of
// a 16 KiB append's time in BenchmarkAppendPaired: each remap leaves the
// pages populated ahead unmapped in the new mapping, and the old one's
// unmapping interrupts the writer.) The old File goes to its readers
// (they keep their references) and the owner's reference is dropped off
// the append's path (mmapfile.File.Retire: unmapping written pages costs
// about a microsecond each); the prefaulter moves to the new one, and the
// swap is made under mu, where readers take their references. Owner only.
func (s *Segment) mapFor(size int64) error {
	old := s.log
	if size <= old.MapLen() {
		return nil
	}
	n := old.Cap()
	if size <= MapMinBytes {
		n = min(n, MapMinBytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := old.Remap(n)
	if err != nil {
		return err
	}
	if n > MapMinBytes {
		// Written past MapMinBytes: a writer that may outrun the
		// prefaulter (16 KiB appends store ~5 GB/s, about what populating
		// new pages costs). Its faults then read ahead again (mmapfile,
		// "Read-ahead"): one fault brings the next megabytes, which it is
		// about to write, where one page per fault made 16 KiB appends
		// 2.7-5.0 -> 11.5-21 µs (thousands of major faults in 10 000
		// appends).
		f.FaultReadahead()
	}
	if s.prefaulter != nil {
		s.prefaulter.Retarget(f)
	}
	s.log = f
	s.noteReserved()
	old.Retire()
	return nil
}

// MapMinBytes is the length a new active .log is mapped at, and a
// reopened one mapped again at while it is small (see mapFor); past it,
// the mapping covers the whole capacity.
// Each remap costs a mapping, the unmapping of the old one and page
// faults on the window ahead, so neither the small early steps nor the
// large ones are each given one.
const MapMinBytes = 1 << 20

// startPrefault gives the active segment a prefault.Writer. It populates
// nothing until the first append reports a position.
func (s *Segment) startPrefault() {
	if s.cfg.Prefault > 0 && s.log != nil {
		pool := s.cfg.PrefaultPool
		if pool == nil {
			pool = prefault.Default()
		}
		s.prefaulter = pool.NewWriter(s.log, s.cfg.Prefault)
	}
	s.prefaultAt = 0
}

// prefaultStride is how far the write position moves between two reports
// to the prefaulter: at most a quarter of its window, the step at which
// the prefaulter itself requeues, so reporting less often never lets it
// fall behind by more than that; but not every append, which with
// thousands of partitions would touch one more cold cache line each.
func (s *Segment) prefaultStride() int64 { return min(s.cfg.Prefault/4, 16<<10) }

func (s *Segment) stopPrefault() error {
	if s.prefaulter == nil {
		return nil
	}
	err := s.prefaulter.Stop()
	s.prefaulter = nil
	if errors.Is(err, mmapfile.ErrClosed) {
		err = nil
	}
	return err
}

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
	f, err := mmapfile.Open(s.Path(LogSuffix), 0, false)
	if err != nil {
		s.mu.Unlock()
		return nil, 0, err
	}
	size := s.size.Load()
	if f.Size() < size {
		_ = f.Close()
		s.mu.Unlock()
		return nil, 0, fmt.Errorf("partlog/segment: %s is %d bytes, %d expected", s.Path(LogSuffix), f.Size(), size)
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
	x, err := index.OpenOffsetIndex(s.Path(IndexSuffix), s.base, true)
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

// Seal finishes the active segment (a roll or a close): final time-index
// entry, both indexes trimmed to their entries, the .log cut to its data
// and synced, the writable mapping released. Readers keep their views.
func (s *Segment) Seal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.active {
		return nil
	}
	errs := []error{s.stopPrefault()}
	if s.maxTimestamp != batch.NoTimestamp {
		if _, err := s.timeIndex.MaybeAppend(s.maxTimestamp, s.offsetOfMaxTimestamp, true); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.offsetIndex.Trim(), s.timeIndex.Trim())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The trim is made durable by the next Flush (which fdatasyncs the
	// file, persisting its length) before the recovery point passes this
	// segment; syncing a whole segment here would stall the append that
	// triggered the roll.
	if err := s.log.Truncate(s.size.Load()); err != nil {
		return err
	}
	errs = errs[:0]
	errs = append(errs, s.log.Close(), s.timeIndex.Close(), s.txnIndex.Close())
	s.log, s.timeIndex, s.txnIndex = nil, nil, nil
	s.dropMapped()
	s.active = false
	// The offset index stays open (trimmed, writable mapping) for lookups;
	// reopen it read-only so a stray store cannot reach it.
	errs = append(errs, s.offsetIndex.Close())
	s.offsetIndex = nil
	return errors.Join(errs...)
}

// Close seals an active segment and releases every file. Readers keep
// their views until they release them.
func (s *Segment) Close() error {
	wasActive := s.Active()
	err := s.Seal()
	if wasActive && err == nil {
		// Persist the trimmed length before the files are let go.
		err = syncFile(s.Path(LogSuffix), false)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return err
	}
	s.closed = true
	return errors.Join(err, s.closeFiles())
}

// closeFiles closes whatever is open. Caller holds mu.
func (s *Segment) closeFiles() error {
	var errs []error
	errs = append(errs, s.stopPrefault())
	s.dropMapped()
	if s.log != nil {
		errs = append(errs, s.log.Close())
		s.log = nil
	}
	if s.offsetIndex != nil {
		errs = append(errs, s.offsetIndex.Close())
		s.offsetIndex = nil
	}
	if s.timeIndex != nil {
		errs = append(errs, s.timeIndex.Close())
		s.timeIndex = nil
	}
	if s.txnIndex != nil {
		errs = append(errs, s.txnIndex.Close())
		s.txnIndex = nil
	}
	return errors.Join(errs...)
}

// Flush makes what recovery cannot rebuild of the segment durable: the
// .log bytes and length (fdatasync), then the transaction index if it
// changed. The offset and time indexes of the active segment are not
// synced: the recovery point a Flush establishes lies inside (or at the
// end of) the active segment, recovery after a crash rescans the segment
// holding the recovery point and rebuilds its indexes from the .log, and a
// clean shutdown trims and syncs them (Seal). Each index fdatasync costs
// about as much as the .log's, so this halves or thirds the cost of a
// durable append. A sealed segment's indexes were synced by their trim;
// its .log is synced through a fresh descriptor.
func (s *Segment) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if !s.active {
		return syncFile(s.Path(LogSuffix), false)
	}
	if err := s.log.Sync(0, s.size.Load()); err != nil {
		return err
	}
	// The transaction index costs an fdatasync of its own: sync it only
	// when it changed.
	if n := s.txnIndex.FileSize(); n != s.synced.txnBytes {
		if err := s.txnIndex.Sync(); err != nil {
			return err
		}
		s.synced.txnBytes = n
	}
	return nil
}

// syncFile fdatasyncs (or fsyncs) the file at path.
func syncFile(path string, missingOK bool) error {
	f, err := os.Open(path)
	if err != nil {
		if missingOK && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	err = f.Sync()
	if h := testhook.Synced.Load(); h != nil && err == nil {
		(*h)(path)
	}
	return errors.Join(err, f.Close())
}

// Delete renames the segment's files to .deleted, closes them and removes
// them. Readers keep their views: an unlinked file stays readable through
// its mapping until the last reference goes. The caller fsyncs the
// directory.
func (s *Segment) Delete() error {
	paths, err := s.RenameDeleted()
	for _, p := range paths {
		err = errors.Join(err, os.Remove(p))
	}
	return err
}

// ShouldRoll reports whether an append of size bytes covering offsets
// [firstOffset, lastOffset] with largest timestamp maxTimestamp must go to
// a new segment (recovery.md §3.3). segmentMs ≤ 0 disables the time rule;
// now is called only when the rule needs the wall clock. AppendLeader
// makes the same tests (it declines where the clock is needed):
// TestAppendLeaderMatchesAppend keeps the two in step.
func (s *Segment) ShouldRoll(size int64, lastOffset, maxTimestamp int64, segmentMs, jitterMs int64, now func() time.Time) bool {
	cur := s.size.Load()
	// One unsigned compare covers lastOffset < base and a relative offset
	// beyond int32.
	if cur > s.cfg.SegmentBytes-size || uint64(lastOffset-s.base) > math.MaxInt32 || s.indexesFull {
		return true
	}
	if segmentMs > 0 && cur > 0 {
		var age int64
		if s.rollingTimestamp != batch.NoTimestamp && maxTimestamp != batch.NoTimestamp {
			age = maxTimestamp - s.rollingTimestamp
		} else {
			age = now().Sub(s.created).Milliseconds() // only here: the clock costs ~50 ns
		}
		if age > segmentMs-jitterMs {
			return true
		}
	}
	return false
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
		x, err = index.OpenTxnIndex(s.Path(TxnIndexSuffix), s.base, true)
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
