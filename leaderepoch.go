package partlog

import (
	"github.com/partlog/partlog/batch"
)

// Kafka's "undefined" answers of OffsetForLeaderEpoch.
const (
	// UndefinedEpoch is the epoch answered when none applies (-1).
	UndefinedEpoch int32 = -1
	// UndefinedEpochOffset is the offset answered with it (-1).
	UndefinedEpochOffset int64 = -1
)

// AssignLeaderEpoch records that epoch starts at the log end offset, as
// Kafka's leader does when it takes a partition (Partition.makeLeader
// assigns its epoch at its log end), writing the leader-epoch checkpoint
// (fsynced) when the epoch is new: a leader that calls it as it starts
// serving pays that write there and not in its first append. An epoch
// not above the latest is ignored.
func (l *Log) AssignLeaderEpoch(epoch int32) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	if epoch <= l.epochs.latest() {
		return nil
	}
	return l.epochs.assign(epoch, l.logEndOffset.Load())
}

// EndOffsetForEpoch answers a follower's OffsetForLeaderEpoch as Kafka's
// leader-epoch cache does: the largest epoch ≤ epoch the log knows and
// the end offset of that epoch (the start offset of the next known
// epoch, or the log end offset for the latest epoch).
//
//   - epoch is UndefinedEpoch, or above every known epoch, or the cache
//     is empty: (UndefinedEpoch, UndefinedEpochOffset).
//   - epoch is the latest epoch: (epoch, LogEndOffset).
//   - epoch is below the first known epoch: (epoch, first epoch's start
//     offset) — the requested epoch is echoed back.
//   - otherwise: (largest known epoch ≤ epoch, start offset of the
//     first known epoch above it).
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	c := l.epochs
	c.mu.RLock()
	defer c.mu.RUnlock()
	// The log end read under the cache lock: appends record a new epoch
	// (under the lock) before they publish offsets written in it.
	leo := l.logEndOffset.Load()
	if epoch == UndefinedEpoch {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	n := len(c.entries)
	if n > 0 && c.entries[n-1].Epoch == epoch {
		return epoch, leo
	}
	// The first entry with an epoch above the requested one.
	hi := 0
	for hi < n && c.entries[hi].Epoch <= epoch {
		hi++
	}
	if hi == n {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if hi == 0 {
		return epoch, c.entries[0].StartOffset
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset
}

// TruncateAt removes every offset ≥ offset as TruncateTo does, except
// that an offset inside a batch removes that whole batch (as Kafka's
// LogSegment.truncateTo cuts at the batch holding the offset), and
// returns the resulting log end offset: offset itself at a batch
// boundary or in a gap, the base offset of the batch holding it
// otherwise, and the log end unchanged when offset is at or past it.
func (l *Log) TruncateAt(offset int64) (int64, error) {
	if offset < 0 {
		return l.logEndOffset.Load(), &OffsetError{Err: ErrOffsetOutOfRange, Offset: offset}
	}
	l.appendMu.Lock()
	if err := l.checkWritable(); err != nil {
		l.appendMu.Unlock()
		return l.logEndOffset.Load(), err
	}
	cut, err := l.batchStartLocked(offset)
	if err != nil {
		l.appendMu.Unlock()
		return l.logEndOffset.Load(), err
	}
	cutData := cut < l.logEndOffset.Load()
	err = l.truncateToLocked(cut)
	leo := l.logEndOffset.Load()
	l.appendMu.Unlock()
	if err == nil && cutData {
		err = l.truncatedHook()
	}
	return leo, err
}

// truncatedHook runs onTruncated, with no lock of the log held.
func (l *Log) truncatedHook() error {
	if l.onTruncated == nil {
		return nil
	}
	return l.onTruncated()
}

// batchStartLocked returns offset, or the base offset of the batch that
// holds it when it lies strictly inside one. Caller holds appendMu.
func (l *Log) batchStartLocked(offset int64) (int64, error) {
	if offset >= l.logEndOffset.Load() || offset < l.segments[0].BaseOffset() {
		return offset, nil
	}
	i := len(l.segments) - 1
	for l.segments[i].BaseOffset() > offset {
		i--
	}
	r, err := l.segments[i].Read(offset, 1, offset+1<<62)
	if err != nil {
		return 0, err
	}
	defer r.Release()
	if r.Bytes != nil {
		if base := batch.View(r.Bytes).BaseOffset(); base < offset {
			return base, nil
		}
	}
	return offset, nil
}

// epochForOffset returns the epoch in force at offset: the epoch of the
// last entry starting at or below it (-1 when none), as Kafka's
// epochForOffset.
func (c *epochCache) epochForOffset(offset int64) int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	epoch := int32(-1)
	for _, e := range c.entries {
		if e.StartOffset > offset {
			break
		}
		epoch = e.Epoch
	}
	return epoch
}
