package mirror

import (
	"fmt"

	"github.com/partlog/partlog"
)

// StartRequest starts a mirror session for the partition (mirror.md
// §2.5). The caller (control plane) asks the source beforehand.
type StartRequest struct {
	// MirrorName names the mirror link (informational).
	MirrorName string
	// SourceClusterID is the cluster to mirror from; it is written into
	// the barrier when the session stops.
	SourceClusterID string
	TopicID         TopicID
	Partition       int32
	// SourcePosition is the source's answer to
	// LastMirrorPosition(ourClusterID, topic, partition): Found false when
	// it has none (or does not support the lookup): the log is then
	// truncated to 0 and mirrored again from the start.
	SourcePosition Position
	// SourceLeaderEpoch is the source partition's current leader epoch;
	// when it is above LeaderEpoch()-3 the partition goes EPOCH_FENCING
	// (local epoch := source epoch + 10) before MIRRORING. -1 if unknown.
	SourceLeaderEpoch int32
	// SourceMirrorsFromUs says the source currently mirrors this partition
	// from this cluster: Start then fails with ErrLoop.
	SourceMirrorsFromUs bool
}

// Start runs LOG_ALIGNMENT and enters MIRRORING (through EPOCH_FENCING if
// the source's epoch requires it), returning the new session id for
// AppendMirror. Steps, each durable before the next:
//
//  1. checkpoint LOG_ALIGNMENT / INTENT with session+1 (from here on the
//     partition is read-only);
//  2. resolve the target from req.SourcePosition: 0 if not found, else
//     LMO lowered to the first local offset whose epoch is above LME and
//     never above the log end, then to the start of the batch holding it;
//  3. checkpoint POSITION_RESOLVED with the target;
//  4. truncate the log to the target (Log.TruncateTo rebuilds the producer
//     state, honoring barriers), flush, checkpoint TRUNCATED;
//  5. EPOCH_FENCING if needed, then MIRRORING.
//
// Allowed from NONE, STOPPED and FAILED; a partition with a session
// (MIRRORING, PAUSED, STOPPING, ...) refuses a second source with
// ErrTransition. Called while LOG_ALIGNMENT is pending (after a restart at
// INTENT) with the same source, it continues that session.
func (p *Partition) Start(req StartRequest) (SessionID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.crashed {
		return 0, ErrCrashed
	}
	if req.SourceMirrorsFromUs {
		return 0, &StateError{Op: "start from " + req.SourceClusterID, State: p.cp.State, Err: ErrLoop}
	}
	if !validString(req.MirrorName) || !validString(req.SourceClusterID) || req.Partition < 0 {
		return 0, fmt.Errorf("%w: start request names", ErrInvalidCheckpoint)
	}
	if p.cp.State == StateLogAlignment {
		if req.SourceClusterID != p.cp.SourceClusterID || req.TopicID != p.cp.TopicID || req.Partition != p.cp.Partition {
			return 0, &StateError{Op: "start from " + req.SourceClusterID + " (alignment pending for " + p.cp.SourceClusterID + ")",
				State: p.cp.State, Err: ErrTransition}
		}
	} else {
		if !CanTransition(p.cp.State, StateLogAlignment) {
			return 0, &StateError{Op: "start from " + req.SourceClusterID, State: p.cp.State, Err: ErrTransition}
		}
		next := p.cp
		if p.corrupt {
			next = newCheckpoint()
		}
		next.State, next.Step = StateLogAlignment, StepIntent
		next.Session++
		next.MirrorName, next.SourceClusterID = req.MirrorName, req.SourceClusterID
		next.TopicID, next.Partition = req.TopicID, req.Partition
		// A new session: nothing of the previous session's stop applies
		// (a stop from FAILED must not reuse an old position).
		next.LastMirrorEpoch, next.LastMirrorOffset, next.StopLeaderEpoch, next.BarrierOffset = -1, -1, -1, -1
		if err := p.writeLocked(next); err != nil {
			return 0, err
		}
		p.failure, p.failedLive = nil, false
		if err := p.at(crashAlignIntent); err != nil {
			return 0, err
		}
	}
	if p.cp.Step == StepIntent {
		if err := p.resolveLocked(req.SourcePosition); err != nil {
			return 0, err
		}
	}
	if err := p.alignLocked(req.SourceLeaderEpoch); err != nil {
		return 0, err
	}
	return p.cp.Session, nil
}

// AlignmentTarget returns the offset a Start given pos would truncate
// the log to (step 2), changing nothing: a control plane can tell the
// records a start would discard before it starts.
func (p *Partition) AlignmentTarget(pos Position) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return alignmentTarget(p.log, pos)
}

// resolveLocked is steps 2 and 3 of LOG_ALIGNMENT.
func (p *Partition) resolveLocked(pos Position) error {
	target, err := alignmentTarget(p.log, pos)
	if err != nil {
		return p.failLocked("log alignment: resolve target", err)
	}
	next := p.cp
	next.Step = StepPositionResolved
	next.AlignTargetOffset = target
	next.AlignTargetEpoch = -1
	if pos.Found {
		next.AlignTargetEpoch = pos.Epoch
	}
	next.LastMirrorEpoch, next.LastMirrorOffset, next.StopLeaderEpoch, next.BarrierOffset = -1, -1, -1, -1
	if err := p.writeLocked(next); err != nil {
		return err
	}
	return p.at(crashAlignPositionResolved)
}

// alignmentTarget computes the truncation target of §2.5 step 2.
func alignmentTarget(l *partlog.Log, pos Position) (int64, error) {
	if !pos.Found || pos.Offset <= 0 {
		return 0, nil
	}
	target := min(pos.Offset, l.LogEndOffset())
	for _, e := range l.LeaderEpochs() {
		if e.Epoch > pos.Epoch {
			target = min(target, e.StartOffset)
			break
		}
	}
	return batchStart(l, target)
}

// batchStart lowers offset to the base offset of the batch that holds it,
// so that a batch straddling it is removed entirely.
func batchStart(l *partlog.Log, offset int64) (int64, error) {
	if offset >= l.LogEndOffset() || offset < l.LogStartOffset() {
		return offset, nil
	}
	v, err := l.Read(offset, 1, l.LogEndOffset())
	if err != nil {
		return 0, err
	}
	defer v.Release()
	if len(v.Records) >= 8 {
		if base := int64(beUint64(v.Records)); base < offset {
			return base, nil
		}
	}
	return offset, nil
}

func beUint64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

// alignLocked is steps 4 and 5 of LOG_ALIGNMENT, from the recorded step
// (POSITION_RESOLVED or TRUNCATED). sourceEpoch -1 means unknown: the
// fencing then happens at the first fetched batch that needs it.
func (p *Partition) alignLocked(sourceEpoch int32) error {
	if p.cp.Step == StepPositionResolved {
		target := p.cp.AlignTargetOffset
		var err error
		if target < p.log.LogStartOffset() {
			err = p.log.TruncateFullyAndStartAt(target)
		} else {
			err = p.log.TruncateTo(target)
		}
		if err == nil {
			err = p.log.Flush()
		}
		if err != nil {
			return p.failLocked("log alignment: truncate", err)
		}
		p.log.SetHighWatermark(p.log.LogEndOffset())
		if err := p.at(crashAlignTruncatedUnrecorded); err != nil {
			return err
		}
		next := p.cp
		next.Step = StepTruncated
		if err := p.writeLocked(next); err != nil {
			return err
		}
		if err := p.at(crashAlignTruncated); err != nil {
			return err
		}
	}
	p.localEpoch = max(p.localEpoch, p.log.LatestEpoch())
	if sourceEpoch >= 0 && sourceEpoch > p.localEpoch-epochMargin {
		return p.fenceLocked(sourceEpoch)
	}
	return p.setStateLocked(StateMirroring, StepNone)
}
