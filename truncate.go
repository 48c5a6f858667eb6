package partlog

import (
	"errors"
	"slices"

	"github.com/partlog/partlog/internal/fsutil"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/segment"
)

// TruncateTo removes every offset ≥ offset (a follower after a leader
// change; recovery.md §5.1). An offset inside a batch removes that whole
// batch, as Kafka does (TruncateAt says where the log now ends).
// Segments above it are deleted, the one holding it is cut and becomes
// active again, and the log end offset, recovery point, high watermark
// and leader-epoch cache follow. Offsets at or past the log end change
// nothing. Readers holding views keep their bytes.
func (l *Log) TruncateTo(offset int64) error {
	_, err := l.TruncateAt(offset)
	return err
}

// truncateToLocked is TruncateTo at a batch boundary (or in a gap).
// Caller holds appendMu and checked the log is writable.
func (l *Log) truncateToLocked(offset int64) error {
	leo := l.logEndOffset.Load()
	if offset >= leo {
		return l.epochs.truncateFromEnd(leo)
	}
	if offset < l.segments[0].BaseOffset() {
		return l.truncateFullyLocked(offset)
	}
	// Find the segment holding offset and check the boundary first.
	i := len(l.segments) - 1
	for l.segments[i].BaseOffset() > offset {
		i--
	}
	target := l.segments[i]
	l.mu.Lock()
	// Newest first: a cut that keeps only some renames then leaves the
	// log shorter, never with a hole below a segment it kept.
	doomed := slices.Clone(l.segments[i+1:])
	slices.Reverse(doomed)
	err := l.removeSegmentsLocked(doomed)
	if err == nil {
		l.uncache(target)
		_, err = target.TruncateTo(offset, l.opts.Now())
	}
	l.mu.Unlock()
	if err != nil {
		l.failed = err
		return err
	}
	l.noteTruncation(offset)
	l.beginOffsetsChange()
	l.logEndOffset.Store(offset)
	l.recoveryPoint.Store(min(l.recoveryPoint.Load(), offset))
	l.highWatermark.Store(min(l.highWatermark.Load(), offset))
	l.logStartOffset.Store(min(l.logStartOffset.Load(), offset))
	l.endOffsetsChange()
	l.dirDirty = true
	l.newJitter()
	if err := l.epochs.truncateFromEnd(offset); err != nil {
		return err
	}
	// Rebuild the producer state at the new end from a snapshot at or
	// below it plus a replay: the current state cannot be trimmed (and an
	// empty one proves nothing, since a barrier may have emptied it).
	if err := l.loadProducerState(offset); err != nil {
		l.failed = err
		return err
	}
	// A snapshot at the cut, so the next load starts here (§4.4).
	if err := l.takeSnapshot(); err != nil {
		l.failed = err
		return err
	}
	return nil
}

// TruncateFullyAndStartAt deletes every segment and restarts the log,
// empty, at offset (a follower far behind the leader's log start;
// recovery.md §5.2): log start, log end, recovery point and high
// watermark all become offset, and the leader-epoch cache is cleared.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return &OffsetError{Err: ErrOffsetOutOfRange, Offset: offset}
	}
	l.appendMu.Lock()
	err := l.checkWritable()
	if err == nil {
		err = l.truncateFullyLocked(offset)
	}
	l.appendMu.Unlock()
	if err == nil {
		err = l.truncatedHook()
	}
	return err
}

func (l *Log) truncateFullyLocked(offset int64) error {
	l.noteTruncation(-1)
	l.mu.Lock()
	err := l.removeSegmentsLocked(append([]*segment.Segment(nil), l.segments...))
	var s *segment.Segment
	if err == nil {
		s, err = segment.Create(l.dir, offset, l.segConfig(), l.opts.Now())
	}
	if err == nil {
		l.setSegments([]*segment.Segment{s})
		err = fsutil.SyncDir(l.dir)
	}
	l.mu.Unlock()
	if err != nil {
		l.failed = err
		return err
	}
	l.beginOffsetsChange()
	for _, o := range []interface{ Store(int64) }{&l.logStartOffset, &l.logEndOffset, &l.recoveryPoint, &l.highWatermark} {
		o.Store(offset)
	}
	l.endOffsetsChange()
	l.waiters.logEndMoved()
	l.waiters.highWatermarkMoved()
	l.newJitter()
	if err := producerstate.DeleteSnapshotsAbove(l.dir, -1); err != nil {
		l.failed = err
		return err
	}
	l.psm.Reset(offset)
	l.psm.OnLogStartOffsetIncremented(offset)
	return l.epochs.clear()
}

// SetLogStartOffset raises the log start offset (never lowers it; never
// past the log end) and deletes every segment wholly below it: the
// segment's files are renamed .deleted, removed, and the directory is
// fsynced. The active segment is never deleted. Readers holding views of
// a deleted segment keep their bytes.
func (l *Log) SetLogStartOffset(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	leo := l.logEndOffset.Load()
	if offset > leo {
		return &OffsetError{Err: ErrOffsetOutOfRange, Offset: offset, LogStartOffset: l.logStartOffset.Load(), LogEndOffset: leo}
	}
	if offset <= l.logStartOffset.Load() {
		return nil
	}
	l.raiseLogStart(offset)
	var doomed []*segment.Segment
	for i := 0; i+1 < len(l.segments); i++ {
		if l.segments[i+1].BaseOffset() <= offset {
			doomed = append(doomed, l.segments[i])
		}
	}
	var err error
	if len(doomed) > 0 {
		l.mu.Lock()
		err = l.removeSegmentsLocked(doomed)
		l.mu.Unlock()
	}
	// Snapshots at or below the log start never seed a replay: a load
	// rebuilds from the log start and deletes them (as Kafka's does), so
	// they go now rather than as a repair at the next open.
	err = errors.Join(err, producerstate.DeleteSnapshotsAtOrBelow(l.dir, offset))
	l.psm.OnLogStartOffsetIncremented(offset)
	return errors.Join(err, l.epochs.truncateFromStart(offset))
}

// truncation is one entry of Log.truncated.
type truncation struct {
	gen uint64
	to  int64
}

// noteTruncation counts a truncation of the log to offset (-1: all of
// it). Caller holds appendMu.
func (l *Log) noteTruncation(to int64) {
	l.clean.removals.Add(1)
	if to < 0 {
		l.clean.firstDirty.Store(-1)
	} else if fd := l.clean.firstDirty.Load(); fd > to {
		l.clean.firstDirty.Store(to) // Kafka's maybeTruncateCheckpoint
	}
	gen := l.truncations.Add(1)
	l.truncated[gen%uint64(len(l.truncated))] = truncation{gen: gen, to: to}
	// The rolls' flush aims no higher than what is left: it would
	// otherwise sync the active segment round after round until the log
	// end passed the old target.
	l.rollFlush.target = max(min(l.rollFlush.target, to), 0)
}

// truncatedBelow reports whether a truncation after generation since cut
// the log below offset. Truncations too many to be remembered count as
// one that did.
func (l *Log) truncatedBelow(since uint64, offset int64) bool {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	for gen := since + 1; gen <= l.truncations.Load(); gen++ {
		if t := l.truncated[gen%uint64(len(l.truncated))]; t.gen != gen || t.to < offset {
			return true
		}
	}
	return false
}

// raiseLogStart moves the log start up to offset, with the recovery point
// and the high watermark when they are below it, and wakes the waiters on
// the high watermark. Caller holds appendMu.
func (l *Log) raiseLogStart(offset int64) {
	l.beginOffsetsChange()
	l.logStartOffset.Store(offset)
	l.recoveryPoint.Store(max(l.recoveryPoint.Load(), offset))
	l.highWatermark.Store(max(l.highWatermark.Load(), offset))
	l.endOffsetsChange()
	l.waiters.highWatermarkMoved()
}
