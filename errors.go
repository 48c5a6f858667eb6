package partlog

import (
	"errors"
	"fmt"
)

// Errors returned by a Log. Each says when it is returned.
var (
	// ErrClosed: the Log was closed.
	ErrClosed = errors.New("partlog: log is closed")
	// ErrLocked: another Log (in this or another process) holds the
	// partition directory, or another holder the log directory
	// (ErrDirLocked wraps it).
	ErrLocked = errors.New("partlog: directory is locked by another holder")
	// ErrNeedsRecovery: Open found a directory that was not closed
	// cleanly (a torn or padded tail, leftovers of interrupted renames,
	// indexes failing their checks). Recovery opens it.
	ErrNeedsRecovery = errors.New("partlog: directory needs crash recovery")
	// ErrFlushedDamage: Open of a cleanly shut down directory found
	// damage whose repair would cut data below the recovery point (a
	// corrupt batch of the active segment, say). Kafka trusts such a
	// directory and would not look; partlog cuts nothing and refuses the
	// partition, naming the damage: `partlog recover --apply --force` cuts
	// it as Kafka's crash recovery would.
	ErrFlushedDamage = errors.New("partlog: damage below the recovery point of a cleanly shut down partition")
	// ErrInvalidRecords: an append carried bytes that are not a sequence
	// of valid batches; nothing was written. It wraps the batch package's
	// ErrCorrupt or ErrTornTail with the position.
	ErrInvalidRecords = errors.New("partlog: invalid record batches")
	// ErrPolicy: an append broke a leader rule (control batch from a
	// client, offset deltas not matching the record count, an idempotent
	// batch without a sequence, a legacy batch); nothing was written.
	ErrPolicy = errors.New("partlog: batch rejected by the leader's rules")
	// ErrRecordTooLarge: a leader's batch exceeds MaxBatchBytes
	// (max.message.bytes). Kafka: MESSAGE_TOO_LARGE.
	ErrRecordTooLarge = errors.New("partlog: record batch too large")
	// ErrRecordListTooLarge: an append as a whole exceeds SegmentBytes,
	// so no segment can hold it. Kafka: RECORD_LIST_TOO_LARGE.
	ErrRecordListTooLarge = errors.New("partlog: append larger than a segment")
	// ErrOffsetOutOfRange: a read or truncation named an offset outside
	// [LogStartOffset, LogEndOffset].
	ErrOffsetOutOfRange = errors.New("partlog: offset out of range")

	// ErrTruncated is returned by Sync when a truncation removed offsets
	// below the one it waited for: those bytes will never be durable.
	ErrTruncated = errors.New("partlog: offsets truncated while waiting for them to be durable")
	// ErrUnexpectedOffset: a follower append whose offsets do not follow
	// the log end, or go backwards between batches.
	ErrUnexpectedOffset = errors.New("partlog: unexpected append offset")
	// ErrStaleLeaderEpoch: an append whose leader epoch (given, or carried
	// by a fetched batch) is below the latest epoch of the leader-epoch
	// cache, or epochs that go down inside one append. Recovery treats a
	// decreasing epoch as damage and cuts there, so such bytes are never
	// written (mirror.md: the stop epoch is raised above every mirrored
	// one for the same reason).
	ErrStaleLeaderEpoch = errors.New("partlog: leader epoch below the latest one")
	// ErrOpenTransactions: a MIRROR_PID_RESET barrier was appended while
	// transactions are open (producer-state.md §6.8 R2). Retriable: close
	// them first (truncate to the last stable offset, or append ABORT
	// markers) and append the barrier again.
	ErrOpenTransactions = errors.New("partlog: barrier refused while transactions are open")
	// ErrNotBatchBoundary is no longer returned: TruncateTo inside a
	// batch removes the whole batch, as Kafka does (see TruncateAt).
	//
	// Deprecated: kept so that callers testing for it still compile.
	ErrNotBatchBoundary = errors.New("partlog: truncation offset inside a batch")
	// ErrInvalidTimestamp: a CreateTime batch whose timestamps lie
	// outside [now - MessageTimestampBeforeMaxMs, now +
	// MessageTimestampAfterMaxMs]; nothing was written. Kafka:
	// INVALID_TIMESTAMP.
	ErrInvalidTimestamp = errors.New("partlog: batch timestamp outside the accepted window")
	// ErrInconsistentTopicID: a partition's partition.metadata names
	// another topic id than the one expected (Options.TopicID, or the id
	// given to Dir.Create).
	ErrInconsistentTopicID = errors.New("partlog: topic id does not match partition.metadata")
	// ErrFailed: an earlier flush or roll failed; the log refuses writes
	// until it is reopened (a failed fsync is never retried).
	ErrFailed = errors.New("partlog: log failed and must be reopened")
)

// OffsetError details ErrOffsetOutOfRange and ErrUnexpectedOffset.
type OffsetError struct {
	Err            error // ErrOffsetOutOfRange or ErrUnexpectedOffset
	Offset         int64 // the offending offset
	LogStartOffset int64
	LogEndOffset   int64
}

func (e *OffsetError) Error() string {
	return fmt.Sprintf("%v: %d (log start %d, log end %d)", e.Err, e.Offset, e.LogStartOffset, e.LogEndOffset)
}

func (e *OffsetError) Unwrap() error { return e.Err }

// RecordErrors is an append refused for some of its records (a
// timestamp outside the accepted window): which ones and why, as Kafka's
// produce response lists them (KIP-467). Err is the sentinel the refusal
// answers to (ErrInvalidTimestamp, ErrInvalidRecords); errors.Is sees it.
type RecordErrors struct {
	Err     error
	Records []RecordError
}

// RecordError is one refused record: its index in its batch and why.
type RecordError struct {
	Index   int
	Message string
}

func (e *RecordErrors) Error() string {
	if len(e.Records) == 0 {
		return e.Err.Error()
	}
	return fmt.Sprintf("%v: record %d: %s (%d records refused)", e.Err, e.Records[0].Index, e.Records[0].Message, len(e.Records))
}

func (e *RecordErrors) Unwrap() error { return e.Err }
