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
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/mmapfile"
	"github.com/partlog/partlog/internal/prefault"
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
	// Pool serves the prefault windows; nil means the process's
	// prefault.Default.
	PrefaultPool *prefault.Pool
	// ReserveMaxBytes is the largest step by which the active .log's disk
	// reservation grows (see the Segment doc, "Disk reservation"). Zero
	// means DefaultReserveMaxBytes; a negative value reserves the whole
	// SegmentBytes when the segment is created, as before steps existed.
	ReserveMaxBytes int64
}

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

// Segment is one .log file and its three indexes (the package
// documentation describes its bytes, reservation and locking). The log,
// its owner, serializes every mutating call; readers call Read, Scan and
// the lookups concurrently with the owner.
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

	// readers counts reader references taken through Read (a Range) that
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
	// sealedTxn: Seal closed a transaction index with entries no Flush
	// synced; the next Flush of the sealed segment syncs it.
	synced struct {
		txnBytes  int64
		sealedTxn bool
	}
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
func (s *Segment) Path(kind string) string { return filenames.Path(s.dir, s.base, kind) }

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
	if err := removeRegular(s.Path(filenames.TxnIndex)); err != nil {
		return nil, fmt.Errorf("partlog/segment: create segment %d: %w", base, err)
	}
	reserve := s.firstReserve()
	mapLen := min(cfg.SegmentBytes, max(reserve, MapMinBytes))
	f, err := mmapfile.Open(s.Path(filenames.Log), mmapfile.Options{Create: true, Ahead: true, Reserve: reserve, Capacity: cfg.SegmentBytes, MapLen: mapLen})
	if errors.Is(err, fs.ErrExist) {
		if err := s.removeFiles(); err != nil {
			return nil, err
		}
		f, err = mmapfile.Open(s.Path(filenames.Log), mmapfile.Options{Create: true, Ahead: true, Reserve: reserve, Capacity: cfg.SegmentBytes, MapLen: mapLen})
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

// noteIndexes recomputes indexesFull. Owner only, on an active segment.
func (s *Segment) noteIndexes() {
	s.indexesFull = s.offsetIndex != nil && s.offsetIndex.IsFull() || s.timeIndex != nil && s.timeIndex.IsFull()
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
	st, err := os.Stat(s.Path(filenames.Log))
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
		if s.offsetIndex, err = index.CreateOffsetIndex(s.Path(filenames.Index), s.base, s.cfg.MaxIndexBytes); err != nil {
			return err
		}
		if s.timeIndex, err = index.CreateTimeIndex(s.Path(filenames.TimeIndex), s.base, s.cfg.MaxIndexBytes); err != nil {
			return err
		}
	} else {
		// A missing index (Kafka makes them lazily too) is made by its
		// first entry or at roll and close.
		if s.offsetIndex, err = index.OpenActiveOffsetIndex(s.Path(filenames.Index), s.base, s.cfg.MaxIndexBytes, cut); err != nil {
			return err
		}
		if s.timeIndex, err = index.OpenActiveTimeIndex(s.Path(filenames.TimeIndex), s.base, s.cfg.MaxIndexBytes, cut); err != nil {
			return err
		}
	}
	if !txn {
		s.txnIndex = index.NewTxnIndex(s.Path(filenames.TxnIndex), s.base)
		return nil
	}
	s.txnIndex, err = index.OpenTxnIndex(s.Path(filenames.TxnIndex), s.base, false)
	return err
}
