package mirror

import "fmt"

// State is the mirror state of a partition (mirror.md §2.2).
type State uint8

// The mirror states. StateNone is an ordinary partition that has never
// mirrored (no mirror.checkpoint file); it is never written to the file.
const (
	// StateNone: an ordinary, writable partition.
	StateNone State = iota
	// StateLogAlignment: a session starts; the log is truncated to the
	// alignment target (§2.5). Read-only.
	StateLogAlignment
	// StateEpochFencing: the local leader epoch is raised above the
	// source's (§2.6). Read-only.
	StateEpochFencing
	// StateULERecovery is accepted in files for completeness; the engine
	// never enters it (it goes FAILED instead). Read-only.
	StateULERecovery
	// StateMirroring: fetched batches are appended as they are. Read-only
	// for clients and coordinators.
	StateMirroring
	// StatePausing: the fetcher is being removed. Read-only.
	StatePausing
	// StatePaused: no fetcher; log and producer state untouched. Read-only.
	StatePaused
	// StateStopping: the stop procedure runs (§2.7). Read-only.
	StateStopping
	// StateStopped: the session ended with a durable barrier; writable.
	StateStopped
	// StateFailed: something went wrong; read-only until an operator (or
	// a retry) starts a session, resumes or stops.
	StateFailed
)

var stateNames = [...]string{
	StateNone:         "NONE",
	StateLogAlignment: "LOG_ALIGNMENT",
	StateEpochFencing: "EPOCH_FENCING",
	StateULERecovery:  "ULE_RECOVERY",
	StateMirroring:    "MIRRORING",
	StatePausing:      "PAUSING",
	StatePaused:       "PAUSED",
	StateStopping:     "STOPPING",
	StateStopped:      "STOPPED",
	StateFailed:       "FAILED",
}

// String returns the name used in mirror.checkpoint (NONE for StateNone).
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// parseState reads a state name of mirror.checkpoint, accepting the old
// aliases PREPARING and LOG_TRUNCATION of LOG_ALIGNMENT (§2.2). NONE is
// not a valid file state.
func parseState(s string) (State, bool) {
	switch s {
	case "PREPARING", "LOG_TRUNCATION":
		return StateLogAlignment, true
	}
	for i, n := range stateNames {
		if n == s && State(i) != StateNone {
			return State(i), true
		}
	}
	return 0, false
}

// ReadOnly reports whether Client and Coordinator appends are refused in
// state s (every state but NONE and STOPPED; mirror.md I3).
func (s State) ReadOnly() bool { return s != StateNone && s != StateStopped }

// allowedFrom lists, per target state, the states it may be entered from
// (mirror.md §2.2, "Allowed transitions"). FAILED may be entered from any
// state; same-state transitions are no-ops and checked by CanTransition.
var allowedFrom = map[State][]State{
	StateLogAlignment: {StateNone, StateStopped, StateFailed},
	StateEpochFencing: {StateLogAlignment, StateMirroring},
	StateMirroring:    {StateLogAlignment, StateEpochFencing, StatePaused, StateFailed},
	StatePausing:      {StateMirroring},
	StatePaused:       {StatePausing},
	StateStopping:     {StateLogAlignment, StateEpochFencing, StateMirroring, StatePausing, StatePaused, StateFailed},
	StateStopped:      {StateStopping},
}

// CanTransition reports whether the state machine of §2.2 allows moving
// from one state to another. A same-state transition is allowed (a no-op);
// FAILED is reachable from every state; nothing leads back to NONE or to
// ULE_RECOVERY.
func CanTransition(from, to State) bool {
	if from == to || to == StateFailed {
		return true
	}
	for _, s := range allowedFrom[to] {
		if s == from {
			return true
		}
	}
	return false
}

// Step is the progress recorded inside LOG_ALIGNMENT and STOPPING
// (mirror.md §2.5, §2.7); StepNone ("-") in every other state.
type Step uint8

// Steps of LOG_ALIGNMENT (Intent, PositionResolved, Truncated) and of
// STOPPING (Intent, Truncated, PositionRecorded, EpochBumped,
// AbortsWritten, BarrierWritten), in the order they are reached.
const (
	StepNone Step = iota
	StepIntent
	StepPositionResolved
	StepTruncated
	StepPositionRecorded
	StepEpochBumped
	StepAbortsWritten
	StepBarrierWritten
)

var stepNames = [...]string{
	StepNone:             "-",
	StepIntent:           "INTENT",
	StepPositionResolved: "POSITION_RESOLVED",
	StepTruncated:        "TRUNCATED",
	StepPositionRecorded: "POSITION_RECORDED",
	StepEpochBumped:      "EPOCH_BUMPED",
	StepAbortsWritten:    "ABORTS_WRITTEN",
	StepBarrierWritten:   "BARRIER_WRITTEN",
}

// String returns the name used in mirror.checkpoint.
func (s Step) String() string {
	if int(s) < len(stepNames) {
		return stepNames[s]
	}
	return fmt.Sprintf("Step(%d)", uint8(s))
}

func parseStep(s string) (Step, bool) {
	for i, n := range stepNames {
		if n == s {
			return Step(i), true
		}
	}
	return 0, false
}

// validStep reports whether step may be recorded with state.
func validStep(state State, step Step) bool {
	switch state {
	case StateLogAlignment:
		return step == StepIntent || step == StepPositionResolved || step == StepTruncated
	case StateStopping:
		return step == StepIntent || step >= StepTruncated && step != StepPositionResolved
	default:
		return step == StepNone
	}
}

// StopPolicy says what STOPPING does with transactions that are open at
// stop time (mirror.md §2.7).
type StopPolicy uint8

const (
	// TruncateLSO (the default) truncates the log to its last stable
	// offset, removing every open transaction (and every later record).
	TruncateLSO StopPolicy = iota
	// AbortOpen keeps the mirrored data and closes every open transaction
	// with an ABORT marker written at the stop epoch.
	AbortOpen
)

// String returns the name used in mirror.checkpoint.
func (p StopPolicy) String() string {
	switch p {
	case TruncateLSO:
		return "TRUNCATE_LSO"
	case AbortOpen:
		return "ABORT_OPEN"
	}
	return fmt.Sprintf("StopPolicy(%d)", uint8(p))
}

func parseStopPolicy(s string) (StopPolicy, bool) {
	switch s {
	case "TRUNCATE_LSO":
		return TruncateLSO, true
	case "ABORT_OPEN":
		return AbortOpen, true
	}
	return 0, false
}
