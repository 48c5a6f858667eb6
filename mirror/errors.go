package mirror

import (
	"errors"
	"fmt"
)

// Errors of package mirror. Each says when it is returned.
var (
	// ErrReadOnly: a Client or Coordinator append in a state other than
	// NONE and STOPPED (mirror.md I3). The concrete error is a
	// *ReadOnlyError; nothing was written.
	ErrReadOnly = errors.New("partlog/mirror: partition is read-only while mirroring")
	// ErrTransition: the requested state change is not in the table of
	// mirror.md §2.2 (e.g. a second mirror started for a partition that
	// is MIRRORING). Returned inside a *StateError; nothing changed.
	ErrTransition = errors.New("partlog/mirror: state transition not allowed")
	// ErrNotMirroring: AppendMirror, AdvanceLogStart or FailMirror outside
	// MIRRORING (STOPPING included: the fetcher is fenced at S1). Returned
	// inside a *StateError; nothing was written and the state is unchanged.
	ErrNotMirroring = errors.New("partlog/mirror: partition is not mirroring")
	// ErrFencedSession: AppendMirror, AdvanceLogStart or FailMirror from a
	// session older (or other) than the current one, e.g. a late fetch
	// response of a stopped fetch loop (T30). Nothing was written and the
	// state is unchanged.
	ErrFencedSession = errors.New("partlog/mirror: mirror session is fenced")
	// ErrEpochFenced: a fetched batch carried a partition leader epoch
	// above the local leader epoch. Nothing was written; the partition went
	// through EPOCH_FENCING, raised its epoch to that batch's epoch + 10
	// and is MIRRORING again: deliver the same bytes again (T09).
	ErrEpochFenced = errors.New("partlog/mirror: fetched epoch above the local epoch; epoch raised, retry")
	// ErrLoop: Start for a source that mirrors this partition from us
	// (mirror.md §2.2).
	ErrLoop = errors.New("partlog/mirror: mirror loop")
	// ErrFailed: the partition is (or just went) FAILED. The concrete error
	// is a *FailedError carrying the reason.
	ErrFailed = errors.New("partlog/mirror: mirror partition failed")
	// ErrPositionLost: on restart in STOPPING / POSITION_RECORDED the log
	// ends below the recorded last mirrored offset, i.e. data that was
	// fsynced before the position was recorded is gone (mirror.md §2.8).
	ErrPositionLost = errors.New("partlog/mirror: log ends below the recorded last mirrored offset")
	// ErrNotReady: LastMirrorPosition while the partition is STOPPING
	// (retriable).
	ErrNotReady = errors.New("partlog/mirror: last mirror position not ready")
	// ErrNotFound: LastMirrorPosition has no position for this requester,
	// topic and partition.
	ErrNotFound = errors.New("partlog/mirror: no last mirror position")
	// ErrCrashed is returned by every method after a test crash hook
	// stopped the partition at a crash point.
	ErrCrashed = errors.New("partlog/mirror: stopped at a crash point")
)

// StateError is an operation refused because of the partition's state.
type StateError struct {
	Op    string // "start", "mirror append", "pause", ...
	State State  // the state at the time
	Err   error  // ErrTransition, ErrNotMirroring, ErrFencedSession, ErrLoop
}

// Error describes the refused operation and the state.
func (e *StateError) Error() string {
	return fmt.Sprintf("partlog/mirror: %s in state %s: %v", e.Op, e.State, e.Err)
}

// Unwrap returns Err.
func (e *StateError) Unwrap() error { return e.Err }

// ReadOnlyError is a Client or Coordinator append refused because the
// partition is read-only. errors.Is(err, ErrReadOnly) holds; Unwrap gives
// the reason when the partition is FAILED (a *FailedError).
type ReadOnlyError struct {
	State  State
	Reason error // the failure when State is FAILED, else nil
}

// Error says the partition is read-only, and why when FAILED.
func (e *ReadOnlyError) Error() string {
	if e.Reason != nil {
		return fmt.Sprintf("%v (state %s: %v)", ErrReadOnly, e.State, e.Reason)
	}
	return fmt.Sprintf("%v (state %s)", ErrReadOnly, e.State)
}

// Is reports whether target is ErrReadOnly.
func (e *ReadOnlyError) Is(target error) bool { return target == ErrReadOnly }

// Unwrap returns the reason, if any.
func (e *ReadOnlyError) Unwrap() error { return e.Reason }

// FailedError says why the partition went FAILED. errors.Is(err,
// ErrFailed) holds, and Unwrap gives the cause (a *CheckpointError for a
// corrupt checkpoint, partlog.ErrInvalidRecords or ErrUnexpectedOffset
// for a bad fetched batch, ErrPositionLost, an I/O error, ...).
type FailedError struct {
	Op     string // what was running: "open", "mirror append", "stop S5", ...
	From   State  // the state it failed in
	Reason error
}

// Error describes the failure.
func (e *FailedError) Error() string {
	return fmt.Sprintf("partlog/mirror: FAILED during %s (from %s): %v", e.Op, e.From, e.Reason)
}

// Is reports whether target is ErrFailed.
func (e *FailedError) Is(target error) bool { return target == ErrFailed }

// Unwrap returns the reason.
func (e *FailedError) Unwrap() error { return e.Reason }
