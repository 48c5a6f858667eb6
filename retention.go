package partlog

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/fsutil"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/segment"
)

// SegmentInfo describes one segment.
type SegmentInfo struct {
	// BaseOffset is the segment's first offset; LastOffset the offset
	// before the next segment's base (or the log end), which a compacted
	// segment may not hold.
	BaseOffset, LastOffset int64
	// Size is the .log size in bytes.
	Size int64
	// MaxTimestamp is the largest batch max timestamp (-1 when none).
	MaxTimestamp int64
	// Created is when the segment was created, or loaded from disk;
	// LastModified the .log file's modification time.
	Created, LastModified time.Time
	// Active is true for the last (writable) segment.
	Active bool
}

// Size returns the bytes of every segment's .log (Kafka's log size,
// which retention.bytes bounds).
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segments {
		n += s.Size()
	}
	return n
}

// SegmentInfos describes every segment, oldest first. Reading the max
// timestamp of a sealed segment loaded from disk opens its time index
// once.
func (l *Log) SegmentInfos() ([]SegmentInfo, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed.Load() {
		return nil, ErrClosed
	}
	segs := l.segments // the list changes only under appendMu
	out := make([]SegmentInfo, len(segs))
	var errs []error
	for i, s := range segs {
		next := l.logEndOffset.Load()
		if i+1 < len(segs) {
			next = segs[i+1].BaseOffset()
		}
		ts, _, err := s.MaxTimestampSoFar()
		mod, merr := s.LastModified()
		errs = append(errs, err, merr)
		out[i] = SegmentInfo{BaseOffset: s.BaseOffset(), LastOffset: next - 1, Size: s.Size(),
			MaxTimestamp: ts, Created: s.Created(), LastModified: mod, Active: i == len(segs)-1}
	}
	return out, errors.Join(errs...)
}

// DeleteOldSegments applies retention as Kafka's deleteOldSegments does,
// and returns how many segments it deleted: first the segments wholly
// below the log start offset, then (unless Options.CleanupPolicy is
// Compact alone) the oldest
// segments while the log exceeds Options.RetentionBytes, then those
// whose largest timestamp (the .log's modification time when it has
// none) is more than Options.RetentionMs before now. Only a prefix of
// the log, and only segments wholly below the high watermark, are ever
// deleted; an empty active segment never is. When every segment is to
// go, the log rolls first (so the log keeps an empty active segment at
// the log end). The log start offset rises to the first segment left,
// the producer snapshots and leader epochs below it are dropped, and the
// deleted segments' files are renamed .deleted and removed after
// Options.FileDeleteDelayMs by a process-wide timer (at Close at the
// latest).
func (l *Log) DeleteOldSegments(now time.Time) (int, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.checkWritable(); err != nil {
		return 0, err
	}
	total := 0
	start := l.logStartOffset.Load()
	n, err := l.deleteSegmentsLocked(func(_ *segment.Segment, next *segment.Segment) (bool, error) {
		return next != nil && next.BaseOffset() <= start, nil
	})
	total += n
	if err != nil || l.opts.CleanupPolicy&Delete == 0 {
		// A compact-only log deletes nothing but what lies below its log
		// start (Kafka's deleteOldSegments).
		return total, err
	}
	if rb := l.opts.RetentionBytes; rb > 0 || rb == Zero {
		rb = zeroOr(rb)
		var size int64
		for _, s := range l.segments {
			size += s.Size()
		}
		if diff := size - rb; diff >= 0 {
			n, err = l.deleteSegmentsLocked(func(s, _ *segment.Segment) (bool, error) {
				if diff-s.Size() >= 0 {
					diff -= s.Size()
					return true, nil
				}
				return false, nil
			})
			total += n
			if err != nil {
				return total, err
			}
		}
	}
	if rm := l.opts.RetentionMs; rm >= 0 || rm == Zero {
		rm = zeroOr(rm)
		nowMs := now.UnixMilli()
		n, err = l.deleteSegmentsLocked(func(s, _ *segment.Segment) (bool, error) {
			ts, _, err := s.MaxTimestampSoFar()
			if err != nil {
				return false, err
			}
			if ts < 0 {
				mod, err := s.LastModified()
				if err != nil {
					return false, err
				}
				ts = mod.UnixMilli()
			}
			return nowMs-ts > rm, nil
		})
		total += n
	}
	return total, err
}

// deleteSegmentsLocked deletes the longest prefix of segments that
// predicate accepts, each wholly below the high watermark (Kafka's
// deletableSegments), and returns how many. Caller holds appendMu.
func (l *Log) deleteSegmentsLocked(predicate func(s, next *segment.Segment) (bool, error)) (int, error) {
	hw := l.highWatermark.Load()
	var doomed []*segment.Segment
	for i, s := range l.segments {
		var next *segment.Segment
		upper := l.logEndOffset.Load()
		if i+1 < len(l.segments) {
			next = l.segments[i+1]
			upper = next.BaseOffset()
		}
		if next == nil && s.IsEmpty() || hw < upper {
			break
		}
		ok, err := predicate(s, next)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		doomed = append(doomed, s)
	}
	if len(doomed) == 0 {
		return 0, nil
	}
	l.clean.removals.Add(1)
	if len(doomed) == len(l.segments) {
		// The active segment goes too: roll, so the log keeps one.
		if err := l.rollLocked(l.logEndOffset.Load()); err != nil {
			return 0, err
		}
	}
	newStart := l.segments[len(doomed)].BaseOffset()
	// Raise the log start before the segments leave the list, so no
	// reader is sent past them.
	if newStart > l.logStartOffset.Load() {
		l.raiseLogStart(newStart)
	}
	l.mu.Lock()
	paths, errs := l.renameDeleted(doomed)
	l.setSegments(slices.Clone(l.segments[len(doomed):]))
	l.mu.Unlock()
	errs = append(errs, fsutil.SyncDir(l.dir))
	if err := errors.Join(errs...); err != nil {
		// Renamed files stay .deleted; the next open removes them.
		l.failed = err
		return len(doomed), err
	}
	errs = append(errs, l.deletions.add(paths, l.opts.FileDeleteDelayMs))
	errs = append(errs, producerstate.DeleteSnapshotsAtOrBelow(l.dir, l.logStartOffset.Load()))
	l.psm.OnLogStartOffsetIncremented(l.logStartOffset.Load())
	errs = append(errs, l.epochs.truncateFromStart(l.logStartOffset.Load()))
	if err := errors.Join(errs...); err != nil {
		return len(doomed), fmt.Errorf("partlog: retention: %w", err)
	}
	return len(doomed), nil
}

var _ = batch.NoTimestamp
