package mirror

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
)

// Options configure a Partition. The zero value is usable.
type Options struct {
	// LeaderEpoch is the partition's local leader epoch as the broker's
	// metadata knows it. The partition uses max(LeaderEpoch, the log's
	// latest epoch, the recorded stop epoch) and raises it in memory on
	// EPOCH_FENCING; LeaderEpoch() reports the current value so the caller
	// can persist it. Default 0.
	LeaderEpoch int32
	// LookupPosition, if set, lets Open finish a LOG_ALIGNMENT that was
	// interrupted at step INTENT: it asks the session's source for
	// LastMirrorPosition(ourClusterID, topic, partition). Without it the
	// partition stays LOG_ALIGNMENT / INTENT (read-only) until Start is
	// called again with the same source.
	LookupPosition func(ctx context.Context, c Checkpoint) (Position, error)
	// MaxAttempts bounds the attempts of each ABORT marker and barrier
	// append in STOPPING before the partition goes FAILED (mirror.md §2.7).
	// Default 3.
	MaxAttempts int
	// Now is the clock for marker and barrier timestamps and updated_ms.
	// Default time.Now.
	Now func() time.Time

	// HighWatermarkByCaller leaves the high watermark of mirrored
	// appends to the caller (a server that serves only durable records
	// raises it after its fsync); by default AppendMirror sets it to the
	// log end (one replica, acks=1, mirror.md §2.6).
	HighWatermarkByCaller bool
	// UnsafeNoBarrier makes STOPPING skip S6: no MIRROR_PID_RESET barrier
	// is written and the mirrored producer state stays in place when the
	// partition becomes writable. It exists only so that tests and
	// demonstrations can show what the barrier prevents (mirror.md §1.2:
	// local producers rejected, swallowed as duplicates, or closing a
	// mirrored transaction); never set it on a real partition.
	UnsafeNoBarrier bool

	// crash, set by tests, is called at every crash point; returning true
	// stops the partition there as if the process had died.
	crash func(crashPoint) bool
}

func (o Options) withDefaults() Options {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Position is a last mirror position (LME, LMO) as LastMirrorPosition
// answers it. Found is false when the source had none for us.
type Position struct {
	Found  bool
	Epoch  int32 // LME: partition leader epoch of the last mirrored batch, -1 if none
	Offset int64 // LMO: exclusive end of the mirrored range
}

// Partition is the mirror state machine of one partition, a client of its
// *partlog.Log. It owns the partition directory's mirror.checkpoint.
//
// Concurrency: all methods are safe for concurrent use. mu serializes
// appends through the Partition and every state change, so a state change
// (S1 of STOPPING in particular) waits for an in-flight append and no
// append of a fenced state or session lands after it. LastMirrorPosition,
// State and Session read a published copy and never wait for a running
// stop. Appends that bypass the Partition (calling the Log directly) are
// not checked.
type Partition struct {
	log  *partlog.Log
	dir  string
	opts Options

	mu         sync.Mutex // guards every field below
	cp         Checkpoint // as last written (or read); State is StateNone without a file
	corrupt    bool       // the file on disk could not be decoded
	failure    error      // *FailedError when cp.State is FAILED
	failedLive bool       // failed while mirroring with an intact log: Resume may retry
	localEpoch int32
	crashed    bool
	scratch    []byte

	published atomic.Pointer[Checkpoint] // copy of cp for lock-free readers
}

// Open attaches the mirror state machine to l: it reads l.Dir()'s
// mirror.checkpoint and reconciles as mirror.md §2.8 says: an interrupted
// LOG_ALIGNMENT continues (from its recorded target; from INTENT only with
// Options.LookupPosition), EPOCH_FENCING resumes MIRRORING, PAUSING
// becomes PAUSED, and an interrupted STOPPING is finished (never writing a
// second barrier). A corrupt checkpoint leaves the partition FAILED and
// read-only, with Failure() saying why (a *CheckpointError inside). If
// finishing a procedure fails, the partition is FAILED and Open still
// returns it. Only an I/O error reading the checkpoint fails Open.
func Open(l *partlog.Log, opts Options) (*Partition, error) {
	p := &Partition{log: l, dir: l.Dir(), opts: opts.withDefaults()}
	cp, found, err := ReadCheckpoint(p.dir)
	var ce *CheckpointError
	switch {
	case errors.As(err, &ce):
		p.cp = newCheckpoint()
		p.cp.State = StateFailed
		p.corrupt = true
		p.failure = &FailedError{Op: "open", From: StateNone, Reason: err}
	case err != nil:
		return nil, err
	case !found:
		p.cp = newCheckpoint()
		p.cp.State = StateNone
	default:
		p.cp = cp
	}
	p.localEpoch = max(p.opts.LeaderEpoch, l.LatestEpoch(), p.cp.StopLeaderEpoch)
	p.publish()

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.corrupt {
		return p, nil
	}
	ctx := context.Background()
	switch p.cp.State {
	case StateFailed:
		p.failure = &FailedError{Op: "open", From: StateFailed, Reason: errors.New("FAILED recorded in " + CheckpointFile)}
	case StateULERecovery:
		// Unclean-election recovery on the source is out of the engine's
		// scope (mirror.md §2.2): the partition goes FAILED.
		p.failLocked("open", errors.New("ULE_RECOVERY recorded: unclean-election recovery is out of scope, the partition is FAILED"))
	case StatePausing:
		err = p.setStateLocked(StatePaused, StepNone)
	case StateEpochFencing:
		err = p.setStateLocked(StateMirroring, StepNone)
	case StateLogAlignment:
		if p.cp.Step == StepIntent {
			if p.opts.LookupPosition == nil {
				break
			}
			var pos Position
			if pos, err = p.opts.LookupPosition(ctx, p.cp); err != nil {
				p.failLocked("open: position lookup", err)
				break
			}
			err = p.resolveLocked(pos)
		}
		if err == nil {
			err = p.alignLocked(-1)
		}
	case StateStopping:
		_, err = p.runStopLocked(ctx)
	}
	// A failure above left the partition FAILED (see Failure); a test
	// crash left it stopped at its crash point.
	return p, nil
}

// Log returns the partition's log.
func (p *Partition) Log() *partlog.Log { return p.log }

// State returns the current state (never blocks on a running procedure).
func (p *Partition) State() State { return p.published.Load().State }

// Step returns the step recorded inside LOG_ALIGNMENT or STOPPING.
func (p *Partition) Step() Step { return p.published.Load().Step }

// Session returns the current session id (the one AppendMirror accepts).
func (p *Partition) Session() SessionID { return p.published.Load().Session }

// Checkpoint returns a copy of the mirror checkpoint as last written.
func (p *Partition) Checkpoint() Checkpoint { return *p.published.Load() }

// LeaderEpoch returns the local leader epoch (raised by EPOCH_FENCING and
// by STOPPING's S4).
func (p *Partition) LeaderEpoch() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.localEpoch
}

// Failure returns why the partition is FAILED (a *FailedError), or nil.
func (p *Partition) Failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cp.State != StateFailed {
		return nil
	}
	return p.failure
}

func (p *Partition) publish() {
	c := p.cp
	p.published.Store(&c)
}

// at is a crash point: with a test hook that asks for it, the partition
// stops there for good, as if the process had died.
func (p *Partition) at(pt crashPoint) error {
	if p.opts.crash != nil && p.opts.crash(pt) {
		p.crashed = true
		return fmt.Errorf("%w: %s", ErrCrashed, pt)
	}
	return nil
}

// writeLocked makes next durable in mirror.checkpoint and then adopts it.
// A failed write leaves the partition FAILED in memory (the file may hold
// either version), so it is read-only whatever happened on disk.
func (p *Partition) writeLocked(next Checkpoint) error {
	if p.crashed {
		return ErrCrashed
	}
	next.UpdatedMs = p.opts.Now().UnixMilli()
	if err := WriteCheckpoint(p.dir, &next); err != nil {
		p.cp.State = StateFailed
		p.failure = &FailedError{Op: "write " + CheckpointFile, From: next.State, Reason: err}
		p.failedLive = false
		p.publish()
		return p.failure
	}
	p.cp, p.corrupt = next, false
	p.publish()
	return nil
}

// setStateLocked moves to state/step if the transition table allows it.
func (p *Partition) setStateLocked(state State, step Step) error {
	if !CanTransition(p.cp.State, state) {
		return &StateError{Op: "transition to " + state.String(), State: p.cp.State, Err: ErrTransition}
	}
	next := p.cp
	next.State, next.Step = state, step
	if err := p.writeLocked(next); err != nil {
		return err
	}
	if state != StateFailed {
		p.failure, p.failedLive = nil, false
	}
	return nil
}

// failLocked moves to FAILED (persisted if possible, in memory anyway) and
// returns the *FailedError.
func (p *Partition) failLocked(op string, reason error) error {
	from := p.cp.State
	f := &FailedError{Op: op, From: from, Reason: reason}
	if !p.crashed && !p.corrupt {
		next := p.cp
		next.State, next.Step = StateFailed, StepNone
		_ = p.writeLocked(next)
	}
	p.cp.State, p.cp.Step = StateFailed, StepNone
	p.failure = f
	p.failedLive = false
	p.publish()
	return f
}

// checkWritableLocked refuses Client and Coordinator appends while
// read-only.
func (p *Partition) checkWritableLocked() error {
	if p.crashed {
		return ErrCrashed
	}
	if s := p.cp.State; s.ReadOnly() {
		var reason error
		if s == StateFailed {
			reason = p.failure
		}
		return &ReadOnlyError{State: s, Reason: reason}
	}
	return nil
}

// AppendClient appends a produce request (Client origin) with
// Log.AppendAsLeader. It fails with a *ReadOnlyError in every state but
// NONE and STOPPED; the Log refuses control batches from clients and
// epochs below its latest one (so below E_stop after a stop).
func (p *Partition) AppendClient(records []byte, leaderEpoch int32) (partlog.AppendInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return partlog.AppendInfo{}, err
	}
	return p.log.AppendAsLeader(records, leaderEpoch)
}

// AppendCoordinator appends transaction markers of the local coordinator
// (Coordinator origin) with Log.AppendAsCoordinator, under the same rule
// as AppendClient.
func (p *Partition) AppendCoordinator(records []byte, leaderEpoch int32) (partlog.AppendInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkWritableLocked(); err != nil {
		return partlog.AppendInfo{}, err
	}
	return p.log.AppendAsCoordinator(records, leaderEpoch)
}

// AppendFollower appends batches a follower fetched from its local leader
// (Replication origin, Log.AppendAsFollower): allowed in every state
// (mirror.md §2.3).
func (p *Partition) AppendFollower(records []byte) (partlog.AppendInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.crashed {
		return partlog.AppendInfo{}, ErrCrashed
	}
	return p.log.AppendAsFollower(records)
}

// AppendMirror appends batches fetched from the source (Mirror origin,
// Log.AppendAsMirror): bytes, offsets (gaps included) and partition leader
// epochs are kept, and the high watermark follows the log end (one
// replica, acks=1 semantics; mirror.md §2.6).
//
// It is refused without effect outside MIRRORING (ErrNotMirroring) and for
// any session but the current one (ErrFencedSession). A fetched batch with
// an epoch above the local epoch is not stored: the partition goes through
// EPOCH_FENCING to that epoch + 10 and the call returns ErrEpochFenced; an
// epoch within 3 of the local one raises it the same way first and is
// stored. Bytes that fail validation (framing, CRC, header rules,
// offsets below the log end or not increasing, decreasing epochs) leave
// the log untouched and the partition FAILED (a *FailedError wrapping the
// Log's error). An empty log sent a first batch that begins below its
// log end and ends at or above it (the source's log start is inside that
// batch) restarts at the batch's base offset and takes it.
func (p *Partition) AppendMirror(session SessionID, records []byte) (partlog.AppendInfo, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.sessionLocked("mirror append", session); err != nil {
		return partlog.AppendInfo{}, err
	}
	if top, ok := maxBatchEpoch(records); ok && top > p.localEpoch-epochMargin {
		// Slow path, rare: validate before acting on header fields.
		if err := checkBatches(records); err != nil {
			return partlog.AppendInfo{}, p.failMirrorLocked(err)
		}
		old := p.localEpoch
		if err := p.fenceLocked(top); err != nil {
			return partlog.AppendInfo{}, err
		}
		if top > old {
			// top was above the old local epoch: not stored (T09).
			return partlog.AppendInfo{}, fmt.Errorf("%w: batch epoch %d, local epoch now %d", ErrEpochFenced, top, p.localEpoch)
		}
	}
	if err := p.restartEmptyAtBatchLocked(records); err != nil {
		return partlog.AppendInfo{}, err
	}
	info, err := p.log.AppendAsMirror(records)
	if err != nil {
		if errors.Is(err, partlog.ErrClosed) {
			return info, err
		}
		return info, p.failMirrorLocked(err)
	}
	if !p.opts.HighWatermarkByCaller {
		p.log.SetHighWatermark(info.LastOffset + 1)
	}
	return info, nil
}

// restartEmptyAtBatchLocked handles a source log start inside a batch
// (a DeleteRecords at the source): an empty log restarted at the source's
// log start (AdvanceLogStart) is then sent the batch holding that offset,
// which begins below it. As Kafka's follower does, the empty log restarts
// at the batch's base offset; the log start is raised again by the next
// AdvanceLogStart. A log with data is left alone (the append fails).
func (p *Partition) restartEmptyAtBatchLocked(records []byte) error {
	leo := p.log.LogEndOffset()
	if leo != p.log.LogStartOffset() || len(records) < batch.HeaderSize {
		return nil
	}
	v := batch.View(records)
	base := v.BaseOffset()
	if base >= leo || v.LastOffset() < leo {
		return nil
	}
	// Rare: validate before acting on header fields.
	if err := checkBatches(records); err != nil {
		return p.failMirrorLocked(err)
	}
	if err := p.log.TruncateFullyAndStartAt(base); err != nil {
		return p.failLocked("mirror append: restart the empty log at the batch start", err)
	}
	return nil
}

// Epoch fencing constants of mirror.md §2.5 step 5 and §2.6 (the
// prototype's values).
const (
	epochBump   = 10 // local epoch := source epoch + epochBump
	epochMargin = 3  // bump when the source epoch is above local - epochMargin
)

func (p *Partition) failMirrorLocked(err error) error {
	f := p.failLocked("mirror append", err)
	p.failedLive = true // the log is intact: Resume may retry
	return f
}

// fenceLocked runs EPOCH_FENCING: local epoch := sourceEpoch + 10 (if
// higher), then back to MIRRORING. The raised epoch lives in memory (the
// checkpoint format has no field for it); LeaderEpoch reports it.
func (p *Partition) fenceLocked(sourceEpoch int32) error {
	if err := p.setStateLocked(StateEpochFencing, StepNone); err != nil {
		return err
	}
	p.localEpoch = max(p.localEpoch, sourceEpoch+epochBump)
	if err := p.at(crashFenced); err != nil {
		return err
	}
	return p.setStateLocked(StateMirroring, StepNone)
}

// Pause removes the fetcher (PAUSING, then PAUSED): log and producer state
// are untouched and mirror appends are refused until Resume.
func (p *Partition) Pause() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.crashed {
		return ErrCrashed
	}
	if p.cp.State == StatePaused {
		return nil
	}
	if err := p.setStateLocked(StatePausing, StepNone); err != nil {
		return err
	}
	return p.setStateLocked(StatePaused, StepNone)
}

// Resume returns to MIRRORING from PAUSED, or from FAILED when the failure
// happened while mirroring with the log intact (a retry). Fetching goes on
// from the log end, without truncation, in the same session, which it
// returns.
func (p *Partition) Resume() (SessionID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.crashed {
		return 0, ErrCrashed
	}
	switch p.cp.State {
	case StateMirroring:
		return p.cp.Session, nil
	case StatePaused:
	case StateFailed:
		if !p.failedLive {
			return 0, &StateError{Op: "resume (the failure did not happen while mirroring; start a new session or stop)",
				State: p.cp.State, Err: ErrTransition}
		}
	default:
		return 0, &StateError{Op: "resume", State: p.cp.State, Err: ErrTransition}
	}
	if err := p.setStateLocked(StateMirroring, StepNone); err != nil {
		return 0, err
	}
	return p.cp.Session, nil
}

// Fail moves the partition to FAILED with reason (for example where the
// prototype would enter ULE_RECOVERY). It stays read-only until Start,
// Resume or Stop. It fails the partition in any state; a session's
// fetcher uses FailMirror.
func (p *Partition) Fail(reason error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.crashed {
		return ErrCrashed
	}
	p.failLocked("operator", reason)
	return nil
}

// FailMirror is Fail for the fetcher of a session: it moves the partition
// to FAILED with reason only while it is MIRRORING in that session, and
// is refused without effect otherwise (ErrNotMirroring, ErrFencedSession),
// as AppendMirror is. A fetcher's verdict (divergence, a topic created
// again at the source) is about the session it fetched for: once a stop
// ended that session it must not make the stopped, writable partition
// read-only again, nor fail a newer session.
func (p *Partition) FailMirror(session SessionID, reason error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.sessionLocked("mirror fail", session); err != nil {
		return err
	}
	p.failLocked("mirror fetch", reason)
	return nil
}

// sessionLocked refuses op by the fetcher of session unless the partition
// is MIRRORING in that session (ErrNotMirroring, ErrFencedSession): the
// check of every call a session's fetcher makes. Caller holds mu.
func (p *Partition) sessionLocked(op string, session SessionID) error {
	if p.crashed {
		return ErrCrashed
	}
	if p.cp.State != StateMirroring {
		return &StateError{Op: op, State: p.cp.State, Err: ErrNotMirroring}
	}
	if session != p.cp.Session {
		return &StateError{Op: fmt.Sprintf("%s of session %d (current %d)", op, session, p.cp.Session),
			State: p.cp.State, Err: ErrFencedSession}
	}
	return nil
}

// AdvanceLogStart follows the source's log start offset (mirror.md §2.6):
// when it moved past the local log end the log is emptied and restarted
// there (producer state emptied; no barrier needed since no data
// remains, T55), otherwise the local log start is raised to it. Only the
// current session may call it, while MIRRORING.
func (p *Partition) AdvanceLogStart(session SessionID, sourceLogStart int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.sessionLocked("advance log start", session); err != nil {
		return err
	}
	if sourceLogStart > p.log.LogEndOffset() {
		if err := p.log.TruncateFullyAndStartAt(sourceLogStart); err != nil {
			return p.failLocked("advance log start", err)
		}
		return nil
	}
	if err := p.log.SetLogStartOffset(sourceLogStart); err != nil {
		return p.failLocked("advance log start", err)
	}
	return nil
}

// LastMirrorPosition answers an old source's failback lookup (mirror.md
// §2.4): (LME, LMO) if the partition is STOPPED, the session's source is
// requesterClusterID and the topic and partition match; ErrNotReady while
// STOPPING; ErrNotFound otherwise. It never waits for a running procedure.
func (p *Partition) LastMirrorPosition(requesterClusterID string, topicID TopicID, partition int32) (Position, error) {
	c := p.published.Load()
	switch {
	case c.State == StateStopping:
		return Position{}, ErrNotReady
	case c.State != StateStopped, c.SourceClusterID != requesterClusterID, c.TopicID != topicID,
		c.Partition != partition, c.LastMirrorOffset < 0:
		return Position{}, ErrNotFound
	}
	return Position{Found: true, Epoch: c.LastMirrorEpoch, Offset: c.LastMirrorOffset}, nil
}
