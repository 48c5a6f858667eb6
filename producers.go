package partlog

import (
	"fmt"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/segment"
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
// producer id (for tooling). Like ProducerState it first waits out the
// writer in flight (an append, roll, truncation or close: the append
// lock, as Kafka's readers of producer state wait for the log lock), so
// it must not be called from code the writer runs (Options.Now).
func (l *Log) Producers() []ProducerEntry { return l.psm.Producers() }

// ProducerState returns the state of one producer (see Producers for
// what it waits for).
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
// read-committed fetch. An aborted transaction is listed in the index of
// the segment holding its ABORT marker, which may lie past upperBound (a
// transaction open across a roll and aborted later), so the search goes
// on through later segments until an entry ending at or past upperBound
// proves it complete, as Kafka's LocalLog does.
func (l *Log) AbortedTransactions(fetchOffset, upperBound int64) ([]index.AbortedTxn, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []index.AbortedTxn
	for i, s := range l.segments {
		if i+1 < len(l.segments) && l.segments[i+1].BaseOffset() <= fetchOffset {
			continue
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

// loadProducerState rebuilds the producer state at target (a truncation
// point) from the newest valid snapshot at or below it plus a replay of
// the log after it, barriers included (producerstate.Rebuild, the one
// rebuild the engine has). Snapshots above target or at or below the log
// start are deleted. No snapshot means a replay from the log start: an
// empty state is never assumed (a barrier may have emptied it, or the
// snapshots may have been lost). A batch the replay refuses is skipped and
// counted (ReplaySkipped). Caller holds appendMu.
func (l *Log) loadProducerState(target int64) error {
	start := l.logStartOffset.Load()
	entries, at, found, err := producerstate.LoadLatest(l.dir, target, start)
	if err != nil {
		return err
	}
	return l.psm.Reload(&producerstate.Rebuild{
		Snapshot: entries, SnapshotOffset: at, HasSnapshot: found,
		LogStart: start, End: target, NowMs: l.opts.Now().UnixMilli(),
		Batches:  l.scanBatches,
		Rejected: func(batch.View, error) { l.replaySkipped.Add(1) },
	})
}

// scanBatches calls yield with every batch of the log from the segment
// holding from on, in offset order, until yield returns false (the
// Batches source of a producer-state rebuild). Caller holds appendMu.
func (l *Log) scanBatches(from int64, yield func(batch.View, *batch.BatchHeader) bool) error {
	l.mu.RLock()
	segs := append([]*segment.Segment(nil), l.segments...)
	l.mu.RUnlock()
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].BaseOffset() <= from {
			continue
		}
		err := s.Scan(func(_ int64, v batch.View, h *batch.BatchHeader) error {
			if !yield(v, h) {
				return errStopReplay
			}
			return nil
		})
		if err == errStopReplay {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ReplaySkipped counts the batches that producer-state rebuilds of this
// Log (at truncations) refused and skipped since it was opened; the
// batches refused by the rebuild at open are listed in RecoveryReport.
func (l *Log) ReplaySkipped() int64 { return l.replaySkipped.Load() }

var errStopReplay = fmt.Errorf("partlog: stop replay")

// takeSnapshot writes the producer state at its map end offset (on roll
// and close, as Kafka does).
func (l *Log) takeSnapshot() error {
	return l.psm.TakeSnapshot(l.dir)
}

// deleteSnapshotsAbove removes snapshots above offset (truncation).
func (l *Log) deleteSnapshotsAbove(offset int64) error {
	return producerstate.DeleteSnapshotsAbove(l.dir, offset)
}
