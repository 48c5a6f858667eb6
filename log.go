package partlog

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/internal/filenames"
	"github.com/partlog/partlog/internal/fsutil"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/recovery"
	"github.com/partlog/partlog/segment"
	"golang.org/x/sys/unix"
)

// Log is one partition directory: an ordered list of segments, the last
// of which is active (writable), plus the leader-epoch cache.
//
// Concurrency. One appender at a time, any number of readers:
//
//   - appendMu serializes every writer: appends, Roll, TruncateTo,
//     TruncateFullyAndStartAt, SetLogStartOffset, Flush and Close.
//   - mu guards the segment list. Readers take it shared only to pick a
//     segment and take a reference on its mapping; writers take it
//     exclusively only while they change the list or cut bytes a new
//     reader could reach (truncation).
//   - flushMu serializes flushes, which fsync without holding appendMu
//     so appends go on meanwhile.
//   - Lock order: flushMu, then appendMu, then mu, then a segment's own
//     lock; the group commit's lock is taken last (a flush takes it under flushMu) and
//     nothing is taken while it is held.
//
// Offsets (logStartOffset, logEndOffset, recoveryPoint, highWatermark) are
// atomics written under appendMu and read by anyone. LogEndOffset is
// advanced only after the segment has published the bytes, so a reader
// bounded by it never meets a partial batch.
type Log struct {
	// The fields every append reads or writes come first, on three cache
	// lines with the Options fields it reads (the first five of opts),
	// and the stage's first two lines (which the leader's usual request,
	// of a batch without producer id or of a known producer, does not
	// touch: appendLeaderLocked): with a thousand partitions
	// appended to in turn, an append's cost is mostly the lines it
	// touches, and each one it misses is a trip to memory. Keep them
	// together (TestLogAppendLines checks the offsets). Line 0:

	appendMu sync.Mutex
	failed   error       // set under appendMu when a flush or roll failed
	closed   atomic.Bool // set once, under appendMu and mu
	// latestEpoch is the leader-epoch cache's latest epoch (-1: none),
	// published by the cache (epochCache.publishLatest) into the Log so an
	// append reads it here instead of on the cache's own line.
	latestEpoch  atomic.Int32
	logEndOffset atomic.Int64
	// activeSeg is segments[len(segments)-1], kept by setSegments
	// (written under mu with segments; the owner reads it under
	// appendMu), so an append does not read the slice's array.
	activeSeg *segment.Segment
	psm       *producerstate.Manager // mutated under appendMu; read by anyone
	jitterMs  int64                  // per active segment, drawn at creation

	// Line 1: the write policy and the waiters (an append reads the
	// log-end notifier's first word).
	writes  writePolicy // how appends reach the page cache (writepath.go)
	waiters waiters     // wait.go
	// Line 2: the rest of waiters, then opts, whose first five fields
	// the append reads.
	// tsRules caches timestampRulesApply (opts does not change after Open).
	tsRules bool
	opts    Options
	// stage starts a line (after opts: TestLogAppendLines): its first 128
	// bytes, two lines, are what a producer-less append of the general
	// path (appendAssigned, appendKept) touches.
	stage producerstate.Append // reused by appends, under appendMu

	// The rest is what no append touches (flushes, truncations, opening
	// and closing, offsets other operations move), allocated apart: a Log
	// is then 712 bytes instead of 1 328 (five in a page of heap instead
	// of three), so the Logs of a thousand partitions appended to in turn
	// touch ~190 pages instead of ~340.
	*logCold
}

// logCold is the part of a Log that appends do not touch (see Log).
type logCold struct {
	dir  string
	lock *os.File // the directory's own descriptor, flock'ed

	// truncations counts the truncations (under appendMu), so a flush
	// that ran beside one does not advance the recovery point over
	// offsets whose bytes it did not write.
	truncations atomic.Uint64

	// segments is the segment list, oldest first (guarded by mu; changed
	// only through setSegments, which keeps activeSeg).
	segments []*segment.Segment
	// epochs is the leader-epoch cache.
	epochs *epochCache
	// now is opts.Now, for the roll check of the general append path.
	now func() time.Time
	// truncated holds the latest truncations (under appendMu), each at
	// truncated[gen%len]: the offset it cut the log to (-1: the whole log
	// went), for Sync callers that waited across one (truncatedBelow).
	truncated [8]truncation

	flushMu sync.Mutex // serializes flushes; taken before appendMu
	// rollFlush is the background flush of what rolls sealed (flush.go),
	// its fields under appendMu.
	rollFlush rollFlush
	// commit is the group commit of Sync (groupcommit.go); its env is
	// this Log.
	commit groupCommit
	// onTruncated, set by the Dir that opened the log, rewrites the
	// directory's checkpoints after a truncation: a recovery point
	// checkpointed above the cut would make recovery trust, unscanned,
	// what is appended there next (Kafka's LogManager.truncateTo
	// checkpoints too).
	onTruncated func() error
	// flushFault, set by tests, makes a flush fail as an fsync would.
	flushFault func() error
	// flushed, set by tests, is called by a flush before it fsyncs each
	// segment, with that segment's base offset and the recovery point the
	// flush will set (the log end offset it saw when it started), and with
	// base -1 after it fsynced the directory.
	flushed func(base, target int64)
	scratch []byte
	// appendTimeBuf holds a LogAppendTime append's stamped copy
	// (timestamp.go), under appendMu.
	appendTimeBuf []byte
	// recompressBuf holds a recompressed append (compression.go), its
	// decompression scratch in recompressor; under appendMu.
	recompressBuf []byte
	recompressor  batch.Builder
	// hdrBuf is the array of the headers validate decodes (scan.hdrs),
	// under appendMu.
	hdrBuf   []batch.BatchHeader
	dirDirty bool // a segment was created since the last Flush
	// listing is the directory's entries in name order, read by open and
	// dropped at the end of Open: the files it lacks are not opened.
	listing []fs.DirEntry

	mu        sync.RWMutex                // guards segments, keys
	keys      map[*segment.Segment]uint64 // mapping-cache registrations
	closeOnce sync.Once
	closeErr  error
	// closedDurable: Close flushed every appended byte (its other steps,
	// a producer snapshot or the directory sync, may still have failed:
	// what they leave, the next open rebuilds). Dir.Close writes the
	// clean-shutdown marker only if every log closed durable.
	closedDurable bool

	logStartOffset atomic.Int64
	recoveryPoint  atomic.Int64
	highWatermark  atomic.Int64
	// offsetsSeq is odd while an operation other than an append moves
	// the offsets (offsets.go).
	offsetsSeq atomic.Uint64
	deletions  pendingDeletions // retention.go
	topicID    TopicID          // partition.metadata, if any (partitions.go)

	cache  *MappingCache
	report *recovery.Report // set by open when recovery ran
	clean  cleanState       // clean.go
	// replaySkipped counts batches refused by producer-state rebuilds.
	replaySkipped atomic.Int64
}

// Open opens the partition directory dir, creating it (and a first empty
// segment at offset 0) if needed. A nil opts means Kafka's defaults. The
// directory is locked with flock on its own descriptor, so a second Open,
// from this or another process, fails with ErrLocked while the Log is
// open; no file is added to the directory for this.
//
// Every open loads the directory through package recovery (one load
// path, recovery.Load), which the Log then adopts: with
// Options.CleanShutdown (the log directory's clean-shutdown marker was
// present; OpenDir passes it) no sealed segment is read (their indexes
// are checked when first used) and only the active segment's tail is
// validated, through the files recovery opens for appending; otherwise,
// or when that check fails, recovery repairs the directory from
// Options.RecoveryPoint on (torn tails cut, indexes rebuilt, producer
// state replayed), and RecoveryReport says what it did. With
// Options.Strict nothing is repaired: a directory that would need it
// fails with ErrNeedsRecovery.
func Open(dir string, opts *Options) (*Log, error) {
	return openLog(dir, opts, "")
}

// openLog is Open with the quarantine of its recovery
// (DirOptions.Quarantine; not an Options field: the Log embeds its
// Options, and its layout has no room).
func openLog(dir string, opts *Options, quarantine string) (*Log, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		// Made only when missing: OpenDir's partitions exist, and a
		// stat each is a syscall per partition at a broker's start.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		lock, err = lockDir(dir)
	}
	if err != nil {
		return nil, err
	}
	// The producer state is recovery's (adopt) or, for a new partition,
	// made by create.
	l := &Log{opts: o, logCold: &logCold{dir: dir, lock: lock, keys: map[*segment.Segment]uint64{}, cache: o.MappingCache}}
	l.commit.env, l.commit.syncers = l, &l.writes.syncers
	l.now, l.tsRules = o.Now, o.timestampRulesApply()
	if l.cache == nil {
		l.cache = DefaultMappingCache()
	}
	if err := l.open(quarantine); err != nil {
		l.closeSegments()
		_ = unlockDir(lock)
		return nil, err
	}
	l.restoreHighWatermark()
	err = l.loadTopicID()
	l.listing = nil
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	l.startCleaning()
	return l, nil
}

// open loads the directory through package recovery, the one place that
// decides what a partition directory holds, and adopts its result: the
// segment list, the offsets, the leader epochs and the producer state.
// With the clean-shutdown marker recovery trusts the segments that pass
// their checks (indexes sane, tail ending exactly at the end of the file)
// and validates only those that fail them; without it every segment from
// the recovery point on is validated and repaired. A new directory (no
// file of the segment family) gets a first empty segment.
func (l *Log) open(quarantine string) error {
	// Listed once, through the lock's descriptor of the directory, for
	// both the new-partition check and the load.
	entries, err := l.lock.ReadDir(-1)
	if err != nil {
		return fmt.Errorf("partlog: list %s: %w", l.dir, err)
	}
	// In name order, as os.ReadDir gives them (reports list in that order).
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	l.listing = entries
	if recovery.NewEntries(entries) {
		return l.create()
	}
	ld, err := recovery.Load(l.dir, recovery.Options{
		Entries:                entries,
		Clean:                  l.opts.CleanShutdown,
		RecoveryPoint:          l.opts.RecoveryPoint,
		LogStartOffset:         l.opts.LogStartOffset,
		Segment:                l.segConfig(),
		DryRun:                 l.opts.Strict,
		ProducerIDExpirationMs: l.opts.ProducerIDExpirationMs,
		Now:                    l.opts.Now,
		OpenActive:             true,
		// What a clean shutdown declared durable is not cut at open
		// (Kafka would not even scan it); the partition is refused.
		KeepFlushed: l.opts.CleanShutdown,
		Quarantine:  quarantineDir(l.dir, quarantine),
	})
	if err != nil {
		return err
	}
	if r := ld.Report; r.Refused != "" && !l.opts.Strict {
		return fmt.Errorf("%w: %s; partlog recover --apply --force %s cuts it as Kafka's crash recovery would", ErrFlushedDamage, r.Refused, l.dir)
	}

	rep := ld.Report
	if !l.opts.CleanShutdown || rep.Status != recovery.StatusOK || len(rep.Changes) > 0 {
		l.report = rep
	}
	// Strict opens refuse any problem and any change but the removal of
	// obsolete producer snapshots (a truncation's snapshot left behind by
	// later rolls, one at or below the log start): those change no state
	// the Log adopts, and Kafka's load removes them too.
	if l.opts.Strict && (rep.Status != recovery.StatusOK || !onlySnapshotRemovals(rep.Changes)) {
		if ld.Active != nil {
			_ = ld.Active.Close()
		}
		return fmt.Errorf("%w: %s", ErrNeedsRecovery, rep.Summary())
	}
	return l.adopt(ld)
}

// quarantineDir is DirOptions.Quarantine for the partition directory
// dir: a relative path is taken inside it.
func quarantineDir(dir, q string) string {
	if q == "" || filepath.IsAbs(q) {
		return q
	}
	return filepath.Join(dir, q)
}

// listed reports whether the directory listing open read holds name
// (during Open only; with no listing, true: look at the file).
func (l *Log) listed(name string) bool {
	if l.listing == nil {
		return true
	}
	_, found := slices.BinarySearchFunc(l.listing, name, func(e fs.DirEntry, n string) int { return strings.Compare(e.Name(), n) })
	return found
}

// onlySnapshotRemovals reports whether every change is the removal of a
// producer snapshot file.
func onlySnapshotRemovals(changes []recovery.Change) bool {
	for _, c := range changes {
		if c.Action != recovery.ActionRemove || !strings.HasSuffix(c.File, filenames.Snapshot) {
			return false
		}
	}
	return true
}

// create starts a new partition: one empty segment at the log start
// offset.
func (l *Log) create() error {
	start := max(l.opts.LogStartOffset, 0)
	s, err := segment.Create(l.dir, start, l.segConfig(), l.opts.Now())
	if err != nil {
		return err
	}
	l.setSegments([]*segment.Segment{s})
	l.dirDirty = true
	var none []EpochEntry
	if !l.listed(checkpoint.LeaderEpochFile) {
		none = []EpochEntry{} // nothing to read (a new partition)
	}
	if l.epochs, err = loadEpochCache(l.dir, none, &l.latestEpoch); err != nil {
		return err
	}
	for _, o := range []*atomic.Int64{&l.logStartOffset, &l.logEndOffset, &l.recoveryPoint, &l.highWatermark} {
		o.Store(start)
	}
	l.newJitter()
	if err := l.epochs.truncateFromEnd(start); err != nil {
		return err
	}
	l.useProducerState(producerstate.New(producerstate.Config{ProducerIDExpirationMs: l.opts.ProducerIDExpirationMs}))
	l.psm.Reset(start)
	l.psm.OnLogStartOffsetIncremented(start)
	return nil
}

// adopt opens the segments recovery kept, with the sizes it decided, and
// takes over its offsets, leader epochs and producer state. Nothing is
// listed, checked or replayed again.
func (l *Log) adopt(ld *recovery.Loaded) error {
	// The active segment recovery opened from the files it checked, if
	// any; closed here unless it is adopted.
	active := ld.Active
	defer func() {
		if active != nil {
			_ = active.Close()
		}
	}()
	rep := ld.Report
	segs := rep.Segments
	if len(segs) == 0 || ld.Producers == nil {
		return fmt.Errorf("partlog: %s: recovery kept no segment or refused the repair: %s", l.dir, rep.Summary())
	}
	now := l.opts.Now()
	cfg := l.segConfig()
	for i, sr := range segs {
		var s *segment.Segment
		var err error
		if i == len(segs)-1 {
			if a := active; a != nil && a.BaseOffset() == sr.BaseOffset && a.Size() == sr.SizeBytes {
				s, active = a, nil
			} else {
				s, err = segment.OpenActive(l.dir, sr.BaseOffset, cfg, now, segment.Opened{Recovered: true, Size: sr.SizeBytes})
			}
		} else {
			s, err = segment.OpenSealed(l.dir, sr.BaseOffset, cfg, now)
			if err == nil {
				s.SetNextOffset(segs[i+1].BaseOffset)
				l.keys[s] = l.cache.register(s)
			}
		}
		if err != nil {
			return err
		}
		l.setSegments(append(l.segments, s))
	}
	leo := rep.LogEndOffset
	if got := l.active().NextOffset(); got != leo {
		return fmt.Errorf("partlog: %s: the active segment ends at offset %d, recovery found the log end at %d", l.dir, got, leo)
	}
	var err error
	if l.epochs, err = loadEpochCache(l.dir, append([]EpochEntry{}, ld.Epochs...), &l.latestEpoch); err != nil {
		return err
	}
	l.logStartOffset.Store(rep.LogStartOffset)
	l.logEndOffset.Store(leo)
	// Recovery never advances the recovery point (KAFKA-10101).
	l.recoveryPoint.Store(rep.RecoveryPoint)
	l.highWatermark.Store(rep.LogStartOffset)
	l.newJitter()
	l.useProducerState(ld.Producers)
	// Recovery left a snapshot at the log end (unless the log is empty at
	// its start, or under Strict where nothing is written and nothing was
	// needed); the next one is due at the next roll or close.
	if leo > rep.LogStartOffset && !l.opts.Strict {
		l.psm.SetLastSnapshotOffset(leo)
	}
	return nil
}

// closeSegments closes whatever load opened (on a failed open).
func (l *Log) closeSegments() {
	for _, s := range l.segments {
		l.uncache(s)
		_ = s.Close()
	}
}

// uncache forgets segment s in the Log's share of the segment cache: s
// is being closed, deleted or rewritten. Caller holds mu exclusively (or
// owns the Log, opening it).
func (l *Log) uncache(s *segment.Segment) {
	if k, ok := l.keys[s]; ok {
		l.cache.forget(k)
		delete(l.keys, s)
	}
}

// renameDeleted uncaches segs and renames their files .deleted, returning
// the new paths (for the deletion queue) and each rename's error. Caller
// holds mu exclusively.
func (l *Log) renameDeleted(segs []*segment.Segment) (paths []string, errs []error) {
	for _, s := range segs {
		l.uncache(s)
		p, err := s.RenameDeleted()
		paths = append(paths, p...)
		errs = append(errs, err)
	}
	return paths, errs
}

// markClosed marks the log closed, wakes its waiters and uncaches its
// segments, which it returns for the caller to close. Caller holds
// appendMu.
func (l *Log) markClosed() []*segment.Segment {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed.Store(true)
	l.waiters.closed()
	for _, s := range l.segments {
		l.uncache(s)
	}
	return l.segments
}

// RecoveryReport returns what recovery found and did when this Log was
// opened, or nil when the directory was loaded as cleanly closed.
func (l *Log) RecoveryReport() *recovery.Report { return l.report }

// lockDir takes an exclusive, non-blocking flock on the directory's own
// descriptor.
func lockDir(dir string) (*os.File, error) {
	f, err := fsutil.Open(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		return nil, fmt.Errorf("partlog: lock %s: %w", dir, err)
	}
	return f, nil
}

func unlockDir(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return errors.Join(err, f.Close())
}

func (l *Log) segConfig() segment.Config {
	pre := l.opts.PrefaultBytes
	if pre < 0 {
		pre = 0
	}
	return segment.Config{
		SegmentBytes:       l.opts.SegmentBytes,
		MaxIndexBytes:      l.opts.MaxIndexBytes,
		IndexIntervalBytes: l.opts.IndexIntervalBytes,
		Prefault:           pre,
		ReserveMaxBytes:    l.opts.ReserveMaxBytes,
	}
}

func (l *Log) newJitter() {
	l.jitterMs = 0
	if j := min(l.opts.SegmentJitterMs, l.opts.SegmentMs); j > 0 {
		l.jitterMs = rand.Int64N(j)
	}
}

// active returns the last segment. Caller holds appendMu or mu.
func (l *Log) active() *segment.Segment { return l.activeSeg }

// useProducerState makes m the Log's producer state (made new, or rebuilt
// by recovery), before the Log is shared: readers of its entries wait out
// the append in flight on appendMu (producerstate.Manager.SetAppendLock).
func (l *Log) useProducerState(m *producerstate.Manager) {
	m.SetAppendLock(&l.appendMu)
	l.psm = m
}

// setSegments makes segs the segment list (under mu, or before the Log is
// shared) and its last segment the active one.
func (l *Log) setSegments(segs []*segment.Segment) {
	l.segments = segs
	l.activeSeg = nil
	if len(segs) > 0 {
		l.activeSeg = segs[len(segs)-1]
	}
}

// Dir returns the partition directory.
func (l *Log) Dir() string { return l.dir }

// LogStartOffset is the first offset a reader may ask for.
func (l *Log) LogStartOffset() int64 { return l.logStartOffset.Load() }

// LogEndOffset is the offset the next appended record gets (LEO).
func (l *Log) LogEndOffset() int64 { return l.logEndOffset.Load() }

// RecoveryPoint is the offset below which everything is durable.
func (l *Log) RecoveryPoint() int64 { return l.recoveryPoint.Load() }

// HighWatermark is the offset set with SetHighWatermark (initially the
// log start offset), kept within [LogStartOffset, LogEndOffset].
func (l *Log) HighWatermark() int64 { return l.highWatermark.Load() }

// SetHighWatermark records the high watermark, clamped to
// [LogStartOffset, LogEndOffset].
func (l *Log) SetHighWatermark(hw int64) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	hw = min(max(hw, l.logStartOffset.Load()), l.logEndOffset.Load())
	l.beginOffsetsChange()
	l.highWatermark.Store(hw)
	l.endOffsetsChange()
	l.waiters.highWatermarkMoved()
	// Transactions decided below the high watermark no longer pin the
	// last stable offset; the producer state forgets them.
	l.psm.OnHighWatermarkUpdated(hw)
}

// LeaderEpochs returns a copy of the leader-epoch cache.
func (l *Log) LeaderEpochs() []EpochEntry { return l.epochs.list() }

// LatestEpoch returns the latest epoch of the leader-epoch cache, or -1
// when it is empty; one atomic load, no copy.
func (l *Log) LatestEpoch() int32 { return l.epochs.latest() }

// Segments returns the base offsets of the segments, oldest first.
func (l *Log) Segments() []int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]int64, len(l.segments))
	for i, s := range l.segments {
		out[i] = s.BaseOffset()
	}
	return out
}

// refuseWrites makes the log refuse every write with err (wrapping
// ErrFailed), as a failed flush does; reads go on. Dir uses it when it
// opens read-only.
func (l *Log) refuseWrites(err error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.failed == nil {
		l.failed = err
	}
}

// checkWritable returns why the log refuses writes, if it does. Caller
// holds appendMu.
func (l *Log) checkWritable() error {
	if l.failed != nil {
		return fmt.Errorf("%w: %w", ErrFailed, l.failed)
	}
	if l.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Roll seals the active segment and starts a new one at the log end
// offset. An empty active segment is kept as it is.
func (l *Log) Roll() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	if l.active().IsEmpty() {
		return nil
	}
	return l.rollLocked(l.logEndOffset.Load())
}

// rollLocked seals the active segment and creates one at max(base, LEO).
// Caller holds appendMu.
func (l *Log) rollLocked(base int64) error {
	base = max(base, l.logEndOffset.Load())
	old := l.active()
	if old.IsEmpty() && old.BaseOffset() == base {
		return nil
	}
	if err := old.Seal(); err != nil {
		l.failed = err
		return err
	}
	if l.recoveryPoint.Load() >= l.logEndOffset.Load() {
		// Every byte of old is durable and recovery will trust it as it
		// is on disk (it lies below the recovery point), yet no flush
		// will sync it again: make its trim durable now, before a later
		// segment can be. Only the length is written. Otherwise the
		// recovery point lies in old or before it, so the next flush
		// syncs it, and until then recovery scans it.
		if err := old.Flush(); err != nil {
			l.failed = err
			return err
		}
	}
	s, err := segment.Create(l.dir, base, l.segConfig(), l.opts.Now())
	if err != nil {
		// The old segment is sealed and cannot take more appends.
		l.failed = err
		return err
	}
	old.SetNextOffset(base)
	l.mu.Lock()
	l.keys[old] = l.cache.register(old)
	l.setSegments(append(l.segments, s))
	l.mu.Unlock()
	l.dirDirty = true
	l.newJitter()
	// A snapshot named after the new segment's base offset, as Kafka
	// writes on roll: the map end offset moves to the base first (above
	// the log end after a follower's gap), so the snapshot is never a
	// stray that the next load deletes.
	l.psm.SetMapEndOffset(base)
	if err := l.takeSnapshot(); err != nil {
		l.failed = err
		return err
	}
	l.notifyCleaner()
	l.startRollFlush(base)
	return nil
}

// flushLocked flushes with appendMu held (Close). Flush and Sync use
// flush, which does not block appends during the fsyncs.
func (l *Log) flushLocked() error {
	leo := l.logEndOffset.Load()
	rp := l.recoveryPoint.Load()
	l.mu.RLock()
	segs := unflushed(nil, l.segments, rp)
	l.mu.RUnlock()
	for _, s := range segs {
		if err := s.Flush(); err != nil {
			l.failed = err
			return err
		}
	}
	if l.dirDirty {
		if err := fsutil.SyncDir(l.dir); err != nil {
			l.failed = err
			return err
		}
		l.dirDirty = false
	}
	if leo > rp {
		l.recoveryPoint.Store(leo)
	}
	return nil
}

// Close flushes the log, seals the active segment (trimming its files),
// releases the segments and unlocks the directory. Readers keep their
// views until they release them. Close is idempotent.
func (l *Log) Close() error {
	l.stopCleaning()
	l.stopRollFlush()
	l.closeOnce.Do(func() {
		l.appendMu.Lock()
		defer l.appendMu.Unlock()
		if closeCheck != nil && l.failed == nil {
			closeCheck(l)
		}
		var errs []error
		if l.failed == nil {
			err := l.flushLocked()
			l.closedDurable = err == nil
			errs = append(errs, err, l.takeSnapshot())
		}
		for _, s := range l.markClosed() {
			errs = append(errs, s.Close())
		}
		if l.failed == nil {
			// Make the trims durable (file lengths) and the directory.
			errs = append(errs, fsutil.SyncDir(l.dir))
		}
		errs = append(errs, l.deletions.removeNow())
		errs = append(errs, unlockDir(l.lock))
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

// discard closes the log for the deletion of its directory: nothing is
// flushed, snapshotted, trimmed or synced (Kafka's delete closes a log's
// handlers the same way), so deleting a topic of thousands of partitions
// costs no fsync per partition. The log is closed afterwards as by
// Close; pending segment deletions finish first.
func (l *Log) discard() error {
	l.stopCleaning()
	l.stopRollFlush()
	l.closeOnce.Do(func() {
		l.appendMu.Lock()
		defer l.appendMu.Unlock()
		var errs []error
		for _, s := range l.markClosed() {
			errs = append(errs, s.Discard())
		}
		errs = append(errs, l.deletions.removeNow(), unlockDir(l.lock))
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

// closeCheck, set only by this package's tests, runs the shared
// consistency check on every Log as it closes, with appendMu held (no
// append can move the log meanwhile).
var closeCheck func(*Log)

// removeSegmentsLocked deletes segs (renamed .deleted, then removed) in
// their order and drops them from the list. A power cut before the
// directory's fsync keeps some first renames of segs: the caller orders
// them so that any such prefix leaves the log contiguous (a suffix of the
// log newest first, a prefix oldest first). Caller holds appendMu and mu
// exclusively.
func (l *Log) removeSegmentsLocked(segs []*segment.Segment) error {
	l.clean.removals.Add(1)
	var errs []error
	for _, s := range segs {
		l.uncache(s)
		errs = append(errs, s.Delete())
	}
	l.setSegments(slices.DeleteFunc(l.segments, func(s *segment.Segment) bool { return slices.Contains(segs, s) }))
	errs = append(errs, fsutil.SyncDir(l.dir))
	return errors.Join(errs...)
}
