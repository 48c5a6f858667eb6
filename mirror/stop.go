package mirror

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
)

// OpenTxn is a transaction that was open when STOPPING ran.
type OpenTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	FirstOffset   int64
}

// StopResult reports what Stop did (mirror.md §2.7, Q12).
type StopResult struct {
	Policy StopPolicy
	// LastMirrorOffset and LastMirrorEpoch are the recorded LMO and LME.
	LastMirrorOffset int64
	LastMirrorEpoch  int32
	// StopLeaderEpoch is E_stop; BarrierOffset the barrier's offset.
	StopLeaderEpoch int32
	BarrierOffset   int64
	// TruncatedFrom is the log end before the TRUNCATE_LSO truncation (-1
	// when this run did not truncate), and Truncated the open transactions
	// that truncation removed.
	TruncatedFrom int64
	Truncated     []OpenTxn
	// Aborted lists the transactions this run closed with ABORT markers
	// (ABORT_OPEN).
	Aborted []OpenTxn
	// BarrierFound says the barrier was already in the log (a restart
	// after it was written) and was not written again.
	BarrierFound bool
}

// Stop ends the mirror session and makes the partition writable
// (mirror.md §2.7). Each step starts only once the previous one is
// durable:
//
//	S0 checkpoint STOPPING / INTENT (with the policy)
//	S1 fence the fetcher: mirror appends are refused from here on (the
//	   partition lock waits for an in-flight append)
//	S2 high watermark := log end; TRUNCATE_LSO: truncate to the last
//	   stable offset, flush, checkpoint TRUNCATED
//	S3 LMO := log end, LME := latest epoch of the epoch cache; fsync up to
//	   LMO, then checkpoint POSITION_RECORDED
//	S4 E_stop := max(local epoch, LME, latest epoch) + 1; checkpoint
//	   EPOCH_BUMPED with stop_leader_epoch
//	S5 one ABORT marker per open transaction at E_stop (producer's epoch,
//	   its coordinator epoch); fsync; checkpoint ABORTS_WRITTEN
//	S6 the MIRROR_PID_RESET barrier at E_stop with the session's source
//	   cluster id, unless one is already in the log at or after LMO;
//	   fsync; checkpoint BARRIER_WRITTEN with barrier_offset
//	S7 checkpoint STOPPED: Client and Coordinator appends are accepted.
//
// Allowed from LOG_ALIGNMENT, EPOCH_FENCING, MIRRORING, PAUSING, PAUSED
// and FAILED; from FAILED after a position was recorded in this session
// it continues at S4 with the recorded LMO/LME and policy. A STOPPED
// partition returns its recorded result. Appends of S5 and S6 are tried
// Options.MaxAttempts times; then, or on any other error, the partition
// goes FAILED (never STOPPED without a durable barrier, I6).
func (p *Partition) Stop(ctx context.Context, policy StopPolicy) (StopResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.crashed {
		return StopResult{}, ErrCrashed
	}
	if policy > AbortOpen {
		return StopResult{}, fmt.Errorf("partlog/mirror: unknown stop policy %d", policy)
	}
	switch p.cp.State {
	case StateStopped:
		return p.resultLocked(), nil
	case StateStopping:
		// Continue (a previous run returned an error before failing).
	default:
		if !CanTransition(p.cp.State, StateStopping) {
			return StopResult{}, &StateError{Op: "stop", State: p.cp.State, Err: ErrTransition}
		}
		next := p.cp
		if p.corrupt {
			next = newCheckpoint()
		}
		next.State, next.Step, next.StopPolicy = StateStopping, StepIntent, policy
		if p.cp.State == StateFailed && !p.corrupt && next.LastMirrorOffset >= 0 {
			// The position of this session is recorded: keep it and its
			// policy (S2/S3 must not be redone over local writes).
			next.Step, next.StopPolicy = StepPositionRecorded, p.cp.StopPolicy
		}
		if err := p.writeLocked(next); err != nil { // S0
			return StopResult{}, err
		}
		p.failure, p.failedLive = nil, false
		if err := p.at(crashStopIntent); err != nil {
			return StopResult{}, err
		}
	}
	return p.runStopLocked(ctx) // S1: we hold mu and the state is STOPPING
}

func (p *Partition) resultLocked() StopResult {
	return StopResult{Policy: p.cp.StopPolicy, LastMirrorOffset: p.cp.LastMirrorOffset,
		LastMirrorEpoch: p.cp.LastMirrorEpoch, StopLeaderEpoch: p.cp.StopLeaderEpoch,
		BarrierOffset: p.cp.BarrierOffset, TruncatedFrom: -1}
}

// runStopLocked runs STOPPING from the recorded step to STOPPED. Every
// step is idempotent, so a restart redoes the step it was in.
func (p *Partition) runStopLocked(ctx context.Context) (StopResult, error) {
	res := p.resultLocked()
	for {
		var err error
		switch p.cp.Step {
		case StepIntent:
			err = p.stopTruncateLocked(ctx, &res)
		case StepTruncated:
			err = p.stopRecordPositionLocked(ctx)
		case StepPositionRecorded:
			err = p.stopBumpEpochLocked()
		case StepEpochBumped:
			err = p.stopAbortLocked(ctx, &res)
		case StepAbortsWritten:
			err = p.stopBarrierLocked(ctx, &res)
		case StepBarrierWritten:
			next := p.cp
			next.State, next.Step = StateStopped, StepNone
			if err = p.writeLocked(next); err == nil { // S7
				if err = p.at(crashStopped); err == nil {
					r := p.resultLocked()
					r.TruncatedFrom, r.Truncated, r.Aborted, r.BarrierFound = res.TruncatedFrom, res.Truncated, res.Aborted, res.BarrierFound
					return r, nil
				}
			}
		default:
			err = p.failLocked("stop", fmt.Errorf("unexpected step %s in STOPPING", p.cp.Step))
		}
		if err != nil {
			return res, err
		}
	}
}

// stepLocked records step (durable) and passes crash point pt.
func (p *Partition) stepLocked(step Step, pt crashPoint, edit func(*Checkpoint)) error {
	next := p.cp
	next.Step = step
	if edit != nil {
		edit(&next)
	}
	if err := p.writeLocked(next); err != nil {
		return err
	}
	return p.at(pt)
}

// openTxns lists the producers with an open transaction, by first offset.
func openTxns(l *partlog.Log) []partlog.ProducerEntry {
	var open []partlog.ProducerEntry
	for _, e := range l.Producers() {
		if e.CurrentTxnFirstOffset >= 0 {
			open = append(open, e)
		}
	}
	slices.SortFunc(open, func(a, b partlog.ProducerEntry) int {
		return cmp.Compare(a.CurrentTxnFirstOffset, b.CurrentTxnFirstOffset)
	})
	return open
}

func txnRefs(es []partlog.ProducerEntry) []OpenTxn {
	out := make([]OpenTxn, len(es))
	for i, e := range es {
		out[i] = OpenTxn{ProducerID: e.ProducerID, ProducerEpoch: e.ProducerEpoch, FirstOffset: e.CurrentTxnFirstOffset}
	}
	return out
}

// stopTruncateLocked is S2 (and, for ABORT_OPEN, goes straight on to S3).
func (p *Partition) stopTruncateLocked(ctx context.Context, res *StopResult) error {
	l := p.log
	leo := l.LogEndOffset()
	l.SetHighWatermark(leo) // one replica: HW = LEO (acks=1)
	if p.cp.StopPolicy == AbortOpen {
		if err := l.Flush(); err != nil {
			return p.failLocked("stop S2", err)
		}
		return p.stopRecordPositionLocked(ctx)
	}
	lso := l.LastStableOffset()
	if lso < leo {
		res.TruncatedFrom = leo
		res.Truncated = txnRefs(openTxns(l))
		if err := l.TruncateTo(lso); err != nil {
			return p.failLocked("stop S2: truncate to LSO", err)
		}
		if err := p.at(crashStopTruncatedUnflushed); err != nil {
			return err
		}
	}
	if err := l.Flush(); err != nil {
		return p.failLocked("stop S2: flush", err)
	}
	return p.stepLocked(StepTruncated, crashStopTruncated, nil)
}

// stopRecordPositionLocked is S3.
func (p *Partition) stopRecordPositionLocked(ctx context.Context) error {
	l := p.log
	lmo := l.LogEndOffset()
	lme := l.LatestEpoch()
	if err := l.Sync(ctx, lmo); err != nil {
		return p.failLocked("stop S3: fsync", err)
	}
	return p.stepLocked(StepPositionRecorded, crashStopPositionRecorded, func(c *Checkpoint) {
		c.LastMirrorOffset, c.LastMirrorEpoch = lmo, lme
	})
}

// stopBumpEpochLocked is S4.
func (p *Partition) stopBumpEpochLocked() error {
	if leo := p.log.LogEndOffset(); leo < p.cp.LastMirrorOffset {
		return p.failLocked("stop S4", fmt.Errorf("%w: log end %d, recorded %d", ErrPositionLost, leo, p.cp.LastMirrorOffset))
	}
	stop := p.cp.StopLeaderEpoch
	if stop < 0 {
		stop = max(p.localEpoch, p.cp.LastMirrorEpoch, p.log.LatestEpoch()) + 1
	}
	p.localEpoch = max(p.localEpoch, stop)
	return p.stepLocked(StepEpochBumped, crashStopEpochBumped, func(c *Checkpoint) { c.StopLeaderEpoch = stop })
}

// appendControlLocked appends one control batch at E_stop with bounded
// retries.
func (p *Partition) appendControlLocked(records []byte) (partlog.AppendInfo, error) {
	var err error
	for range p.opts.MaxAttempts {
		var info partlog.AppendInfo
		if info, err = p.log.AppendAsCoordinator(records, p.cp.StopLeaderEpoch); err == nil {
			p.log.SetHighWatermark(p.log.LogEndOffset())
			return info, nil
		}
		if errors.Is(err, partlog.ErrClosed) || errors.Is(err, partlog.ErrFailed) {
			break // permanent: retrying cannot help
		}
	}
	return partlog.AppendInfo{}, err
}

// stopAbortLocked is S5: ABORT markers for the transactions still open in
// the (recovered) producer state, so a restart writes only the missing
// ones.
func (p *Partition) stopAbortLocked(ctx context.Context, res *StopResult) error {
	open := openTxns(p.log)
	if p.cp.StopPolicy == TruncateLSO && len(open) > 0 {
		return p.failLocked("stop S5", fmt.Errorf("partlog/mirror: %d transactions open after the LSO truncation (first: producer %d at %d)",
			len(open), open[0].ProducerID, open[0].CurrentTxnFirstOffset))
	}
	for _, e := range open {
		spec := batch.ControlSpec{PartitionLeaderEpoch: p.cp.StopLeaderEpoch, Timestamp: p.opts.Now().UnixMilli(),
			ProducerID: e.ProducerID, ProducerEpoch: e.ProducerEpoch}
		p.scratch = batch.AppendEndTxnMarkerBatch(p.scratch[:0], spec, false, max(e.CoordinatorEpoch, 0))
		if _, err := p.appendControlLocked(p.scratch); err != nil {
			return p.failLocked(fmt.Sprintf("stop S5: ABORT for producer %d", e.ProducerID), err)
		}
		res.Aborted = append(res.Aborted, txnRefs([]partlog.ProducerEntry{e})...)
		if err := p.at(crashStopAbortAppended); err != nil {
			return err
		}
	}
	if err := p.log.Sync(ctx, p.log.LogEndOffset()); err != nil {
		return p.failLocked("stop S5: fsync", err)
	}
	if err := p.at(crashStopAbortsSynced); err != nil {
		return err
	}
	return p.stepLocked(StepAbortsWritten, crashStopAbortsWritten, nil)
}

// stopBarrierLocked is S6. A barrier already in the log at or after LMO
// (written before a crash) is reused, never written twice.
func (p *Partition) stopBarrierLocked(ctx context.Context, res *StopResult) error {
	if p.opts.UnsafeNoBarrier {
		return p.stepLocked(StepBarrierWritten, crashStopBarrierWritten, nil)
	}
	at, found, err := findBarrier(p.log, p.cp.LastMirrorOffset)
	if err != nil {
		return p.failLocked("stop S6: look for a barrier", err)
	}
	res.BarrierFound = found
	if !found {
		spec := batch.ControlSpec{PartitionLeaderEpoch: p.cp.StopLeaderEpoch, Timestamp: p.opts.Now().UnixMilli()}
		p.scratch = batch.AppendMirrorPidResetBatch(p.scratch[:0], spec, p.cp.SourceClusterID)
		info, err := p.appendControlLocked(p.scratch)
		if err != nil {
			return p.failLocked("stop S6: barrier", err)
		}
		at = info.FirstOffset
		if err := p.at(crashStopBarrierAppended); err != nil {
			return err
		}
	}
	if err := p.log.Sync(ctx, p.log.LogEndOffset()); err != nil {
		return p.failLocked("stop S6: fsync", err)
	}
	if err := p.at(crashStopBarrierSynced); err != nil {
		return err
	}
	return p.stepLocked(StepBarrierWritten, crashStopBarrierWritten, func(c *Checkpoint) { c.BarrierOffset = at })
}
