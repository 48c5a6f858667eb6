package producerstate

import (
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/snapshot"
)

// Rebuild describes how to rebuild producer state from a snapshot plus a
// replay of the log after it. It is the only way the engine rebuilds
// producer state from files: the log's open (through package recovery),
// its truncations, the CLI and the mirroring simulator all use it, so a
// batch is judged by one set of rules wherever it is read back.
//
// The rule for a batch the replay refuses (its producer epoch or sequence
// breaks the replay rules, which are already the loosest: origin Replay):
// it is skipped and reported through Rejected, and the replay goes on.
// Kafka fails the partition's load instead; skipping keeps the partition
// serviceable, and the caller still learns which batch was refused and why.
type Rebuild struct {
	// Snapshot is loaded first when HasSnapshot; SnapshotOffset is the
	// offset it is named after (its map end offset).
	Snapshot       []snapshot.Entry
	SnapshotOffset int64
	HasSnapshot    bool
	// LogStart is where the replay starts without a snapshot, and the
	// floor of the first unstable offset.
	LogStart int64
	// End is the map end offset after the rebuild: batches starting at or
	// above it are not applied.
	End int64
	// NowMs is the clock for the expiration of snapshot entries.
	NowMs int64
	// Batches calls yield with the log's batches in offset order, each
	// with the header its reader decoded (the replay reads the fields from
	// it, not again from the bytes), from the batch holding offset from
	// (or the first after it) on, until yield returns false or the log
	// ends. Earlier batches may be passed; they are skipped.
	Batches func(from int64, yield func(v batch.View, h *batch.BatchHeader) bool) error
	// Applied, if set, is called after each applied batch with the append
	// that applied it (its CompletedTxns are valid until the next batch).
	Applied func(v batch.View, a *Append)
	// Rejected, if set, is called for each batch the rules refuse.
	Rejected func(v batch.View, err error)
}

// Rebuild replaces the state with the one described by r: the snapshot
// (or an empty state at r.LogStart), every batch of [start, r.End) replayed
// with origin Replay one batch at a time (so a barrier acts exactly at its
// position), then the map end offset set to r.End and the first unstable
// offset kept at or above r.LogStart. It returns the error of r.Batches.
func (m *Manager) Rebuild(r *Rebuild) error {
	from := r.LogStart
	if r.HasSnapshot {
		m.LoadSnapshot(r.Snapshot, r.SnapshotOffset, r.NowMs)
		from = r.SnapshotOffset
	} else {
		m.Reset(r.LogStart)
	}
	if from < r.End && r.Batches != nil {
		var a Append
		err := r.Batches(from, func(v batch.View, h *batch.BatchHeader) bool {
			if h.BaseOffset >= r.End {
				return false
			}
			if h.LastOffset() < from {
				return true
			}
			m.Begin(&a, Replay, r.NowMs)
			if err := m.ValidateHeader(&a, v, h, h.BaseOffset); err != nil {
				if r.Rejected != nil {
					r.Rejected(v, err)
				}
				return true
			}
			m.Commit(&a)
			if r.Applied != nil {
				r.Applied(v, &a)
			}
			return true
		})
		if err != nil {
			return err
		}
	}
	m.SetMapEndOffset(r.End)
	m.OnLogStartOffsetIncremented(r.LogStart)
	return nil
}
