package partlog

import (
	"fmt"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/segment"
	"github.com/partlog/partlog/snapshot"
)

// Origin says who appends: it decides which producer-state rules apply
// (producer-state.md §2.2).
type Origin = producerstate.Origin

// Origins of an append.
const (
	// OriginClient is a produce request: offsets are assigned, every
	// idempotence and transaction rule applies, control batches are refused.
	OriginClient = producerstate.Client
	// OriginCoordinator is a transaction coordinator writing markers, or
	// the broker writing a MIRROR_PID_RESET barrier: offsets are assigned.
	OriginCoordinator = producerstate.Coordinator
	// OriginReplication is a follower copying its leader: offsets kept,
	// no sequence checks.
	OriginReplication = producerstate.Replication
	// OriginMirror is a mirror fetcher copying a source cluster's
	// batches: offsets kept, no sequence checks.
	OriginMirror = producerstate.Mirror
)

// ProducerEntry is one producer's state.
type ProducerEntry = producerstate.Entry

// Producers returns a consistent copy of every producer entry, sorted by
// producer id (for tooling).
func (l *Log) Producers() []ProducerEntry { return l.psm.Producers() }

// ProducerState returns the state of one producer.
func (l *Log) ProducerState(pid int64) (ProducerEntry, bool) { return l.psm.Producer(pid) }

// Barriers returns the offsets of the MIRROR_PID_RESET barriers applied
// to the producer state since it was loaded (those replayed at open
// included), in order.
func (l *Log) Barriers() []int64 { return l.psm.Barriers() }

// LastStableOffset is the offset below which every transaction is
// decided: min(first offset of the earliest open transaction, high
// watermark). A read-committed fetch passes it to Read as upTo.
func (l *Log) LastStableOffset() int64 { return l.psm.LastStableOffset(l.highWatermark.Load()) }

// ExpireProducers removes the producers idle for longer than
// Options.ProducerIDExpirationMs (never one with an open transaction), as
// Kafka's periodic task does, and returns how many were removed.
func (l *Log) ExpireProducers() int {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.psm.RemoveExpired(l.opts.Now().UnixMilli())
}

// AbortedTransactions returns the aborted transactions that overlap
// [fetchOffset, upperBound) from the transaction indexes, for a
// read-committed fetch (recovery.md §4.4).
func (l *Log) AbortedTransactions(fetchOffset, upperBound int64) ([]index.AbortedTxn, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []index.AbortedTxn
	for i, s := range l.segments {
		if i+1 < len(l.segments) && l.segments[i+1].BaseOffset() <= fetchOffset {
			continue
		}
		if s.BaseOffset() >= upperBound {
			break
		}
		var complete bool
		var err error
		out, complete, err = s.CollectAbortedTxns(out, fetchOffset, upperBound)
		if err != nil {
			return nil, err
		}
		if complete {
			break
		}
	}
	return out, nil
}

// loadProducerState rebuilds the producer state at target from the newest
// valid snapshot at or below it plus a replay of the log after it
// (barriers included). Snapshots above target or at or below the log
// start are deleted. No snapshot means a replay from the log start: an
// empty state is never assumed (a barrier may have emptied it, or the
// snapshots may have been lost). Caller holds appendMu.
func (l *Log) loadProducerState(target int64) error {
	start := l.logStartOffset.Load()
	entries, at, found, err := producerstate.LoadLatest(l.dir, target, start)
	if err != nil {
		return err
	}
	now := l.opts.Now().UnixMilli()
	l.psm.TruncateAndReset()
	if found {
		l.psm.LoadSnapshot(entries, at, now)
	} else {
		at = start
		l.psm.Reset(start)
	}
	if err := l.replay(at, target); err != nil {
		return err
	}
	l.psm.SetMapEndOffset(target)
	// The first unstable offset never lies below the log start (§1.4).
	l.psm.OnLogStartOffsetIncremented(start)
	return nil
}

// replay applies every batch with offsets in [from, to) to the producer
// state with the replay origin, one batch per staged append so a barrier
// acts exactly at its position. Caller holds appendMu.
func (l *Log) replay(from, to int64) error {
	if from >= to {
		return nil
	}
	var a producerstate.Append
	now := l.opts.Now().UnixMilli()
	l.mu.RLock()
	segs := append([]*segment.Segment(nil), l.segments...)
	l.mu.RUnlock()
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].BaseOffset() <= from {
			continue
		}
		if s.BaseOffset() >= to {
			break
		}
		stop := errStopReplay
		err := s.Scan(func(_ int64, v batch.View) error {
			if v.BaseOffset() >= to {
				return stop
			}
			if v.LastOffset() < from {
				return nil
			}
			l.psm.Begin(&a, producerstate.Replay, now)
			if err := l.psm.Validate(&a, v, v.BaseOffset()); err != nil {
				return fmt.Errorf("partlog: replaying batch at offset %d: %w", v.BaseOffset(), err)
			}
			l.psm.Commit(&a)
			return nil
		})
		if err != nil && err != stop {
			return err
		}
	}
	return nil
}

var errStopReplay = fmt.Errorf("partlog: stop replay")

// takeSnapshot writes the producer state at its map end offset (on roll
// and close, as Kafka does).
func (l *Log) takeSnapshot() error {
	return l.psm.TakeSnapshot(l.dir)
}

// deleteSnapshotsAbove removes snapshots above offset (truncation).
func (l *Log) deleteSnapshotsAbove(offset int64) error {
	_, err := snapshot.DeleteAbove(l.dir, offset)
	return err
}
