package producerstate

import (
	"errors"
	"fmt"
)

// Sentinel errors of Validate (producer-state.md §2.8). Each names the
// Kafka error code a broker answers with. Validate returns them wrapped in
// a *ProducerError (or, for duplicates, a *DuplicateSequenceError); test
// with errors.Is.
var (
	// ErrOutOfOrderSequence: a Client batch whose first sequence does not
	// follow the producer's last one, or a known producer's first batch of
	// a new epoch that does not start at 0.
	// Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER (45).
	ErrOutOfOrderSequence = errors.New("partlog/producerstate: out of order sequence number")

	// ErrDuplicateSequence is matched by every *DuplicateSequenceError: a
	// Client batch equal to one of the producer's cached batches. It is
	// not a failure for the producer: the broker answers success with the
	// original offsets and writes nothing. Kafka would name it
	// DUPLICATE_SEQUENCE_NUMBER (46) but never sends that code for it.
	ErrDuplicateSequence = errors.New("partlog/producerstate: duplicate sequence number")

	// ErrInvalidProducerEpoch: a data batch or marker whose producer epoch
	// is below the stored one, from Client or Coordinator.
	// Kafka: INVALID_PRODUCER_EPOCH (47).
	ErrInvalidProducerEpoch = errors.New("partlog/producerstate: invalid producer epoch")

	// ErrProducerFenced is Kafka's PRODUCER_FENCED (90). The partition PSM
	// never returns it (since Kafka 2.7 a partition answers
	// INVALID_PRODUCER_EPOCH, §2.8); it exists so that callers mapping
	// coordinator errors share one vocabulary.
	ErrProducerFenced = errors.New("partlog/producerstate: producer fenced")

	// ErrInvalidTxnState: a non-transactional data batch of a producer
	// that has an open transaction, whatever the origin (on a replica or
	// during replay this fails the append or the load).
	// Kafka: INVALID_TXN_STATE (48).
	ErrInvalidTxnState = errors.New("partlog/producerstate: invalid transaction state")

	// ErrTransactionCoordinatorFenced: a Coordinator marker whose
	// coordinator epoch is below the stored one.
	// Kafka: TRANSACTION_COORDINATOR_FENCED (52).
	ErrTransactionCoordinatorFenced = errors.New("partlog/producerstate: transaction coordinator fenced")

	// ErrControlFromClient: a Client append contains a control batch.
	// Kafka: INVALID_RECORD (87).
	ErrControlFromClient = errors.New("partlog/producerstate: control batch from a client")

	// ErrInvalidSequence: a Client batch has a producer id but a negative
	// base sequence. Kafka: INVALID_RECORD (87).
	ErrInvalidSequence = errors.New("partlog/producerstate: producer id with a negative base sequence")

	// ErrUnknownControlType: a control batch with a producer id whose
	// first record is neither COMMIT, ABORT nor MIRROR_PID_RESET, or whose
	// key or marker value cannot be parsed. Kafka fails the append with an
	// internal error (decision table row 18): UNKNOWN_SERVER_ERROR (-1).
	ErrUnknownControlType = errors.New("partlog/producerstate: invalid control record for a producer")
)

// KafkaErrorCode returns the Kafka wire error code a broker answers with
// for err (0 for nil and for duplicates, which answer success; -1 for
// errors outside the vocabulary).
func KafkaErrorCode(err error) int16 {
	switch {
	case err == nil, errors.Is(err, ErrDuplicateSequence):
		return 0
	case errors.Is(err, ErrOutOfOrderSequence):
		return 45
	case errors.Is(err, ErrInvalidProducerEpoch):
		return 47
	case errors.Is(err, ErrInvalidTxnState):
		return 48
	case errors.Is(err, ErrTransactionCoordinatorFenced):
		return 52
	case errors.Is(err, ErrControlFromClient), errors.Is(err, ErrInvalidSequence):
		return 87
	case errors.Is(err, ErrProducerFenced):
		return 90
	}
	return -1
}

// ProducerError is the error Validate returns for a rejected batch: the
// sentinel (Err) plus what was compared.
type ProducerError struct {
	// Err is one of the sentinels above.
	Err    error
	Origin Origin
	// Offset is the base offset the batch was to get.
	Offset        int64
	ProducerID    int64
	ProducerEpoch int16
	// FirstSequence and LastSequence are the batch's (-1 for markers).
	FirstSequence, LastSequence int32
	// StoredEpoch and StoredLastSequence describe the producer state the
	// batch was checked against (-1 when unknown).
	StoredEpoch        int16
	StoredLastSequence int32
	// CoordinatorEpoch and StoredCoordinatorEpoch are set for markers.
	CoordinatorEpoch, StoredCoordinatorEpoch int32
	// Detail says which check failed, in words.
	Detail string
}

// Error describes the rejection.
func (e *ProducerError) Error() string {
	return fmt.Sprintf("%v: %s (origin %v, offset %d, producer %d epoch %d seq %d..%d; stored epoch %d last seq %d)",
		e.Err, e.Detail, e.Origin, e.Offset, e.ProducerID, e.ProducerEpoch, e.FirstSequence, e.LastSequence,
		e.StoredEpoch, e.StoredLastSequence)
}

// Unwrap returns the sentinel.
func (e *ProducerError) Unwrap() error { return e.Err }

// DuplicateSequenceError reports that a Client batch repeats one of the
// producer's cached batches. The caller answers success with FirstOffset,
// LastOffset (and Timestamp as the log-append time) and writes nothing.
// errors.Is(err, ErrDuplicateSequence) holds.
type DuplicateSequenceError struct {
	ProducerID                  int64
	ProducerEpoch               int16
	FirstSequence, LastSequence int32
	// FirstOffset and LastOffset are the offsets the original batch got.
	FirstOffset, LastOffset int64
	// Timestamp is the cached max timestamp of the original batch.
	Timestamp int64
}

// Error describes the duplicate.
func (e *DuplicateSequenceError) Error() string {
	return fmt.Sprintf("%v: producer %d epoch %d seq %d..%d already written at offsets %d..%d",
		ErrDuplicateSequence, e.ProducerID, e.ProducerEpoch, e.FirstSequence, e.LastSequence, e.FirstOffset, e.LastOffset)
}

// Is reports whether target is ErrDuplicateSequence.
func (e *DuplicateSequenceError) Is(target error) bool { return target == ErrDuplicateSequence }
