package partlog

import (
	"context"
	"errors"
	"io/fs"
	"syscall"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/corrupt"
	"github.com/partlog/partlog/producerstate"
	"github.com/partlog/partlog/segment"
)

// Errors of the packages below that a Log returns (wrapped), re-exported
// so a broker tests them with errors.Is against one package. Their
// documentation is in producerstate and batch; ErrCorrupt is the one
// corruption marker, which every package's corruption error answers
// (batch.ErrCorrupt, index.ErrCorrupt, snapshot.ErrCorrupt, ...).
var (
	ErrOutOfOrderSequence           = producerstate.ErrOutOfOrderSequence
	ErrDuplicateSequence            = producerstate.ErrDuplicateSequence
	ErrInvalidProducerEpoch         = producerstate.ErrInvalidProducerEpoch
	ErrProducerFenced               = producerstate.ErrProducerFenced
	ErrInvalidTxnState              = producerstate.ErrInvalidTxnState
	ErrTransactionCoordinatorFenced = producerstate.ErrTransactionCoordinatorFenced
	ErrControlFromClient            = producerstate.ErrControlFromClient
	ErrInvalidSequence              = producerstate.ErrInvalidSequence
	ErrUnknownControlType           = producerstate.ErrUnknownControlType
	ErrCorrupt                      = corrupt.ErrCorrupt
	ErrTornTail                     = batch.ErrTornTail
)

// Kafka's wire error codes (org.apache.kafka.common.protocol.Errors)
// that KafkaErrorCode answers.
const (
	codeUnknownServerError          int16 = -1
	codeNone                        int16 = 0
	codeOffsetOutOfRange            int16 = 1
	codeCorruptMessage              int16 = 2
	codeUnknownTopicOrPartition     int16 = 3
	codeNotLeaderOrFollower         int16 = 6
	codeRequestTimedOut             int16 = 7
	codeMessageTooLarge             int16 = 10
	codeInvalidTopic                int16 = 17
	codeRecordListTooLarge          int16 = 18
	codeInvalidTimestamp            int16 = 32
	codeDuplicateSequenceNumber     int16 = 46
	codeConcurrentTransactions      int16 = 51
	codeKafkaStorageError           int16 = 56
	codeFencedLeaderEpoch           int16 = 74
	codeInvalidRecord               int16 = 87
	codeInconsistentTopicID         int16 = 103
	codeOutOfOrderSequenceNumber    int16 = 45
	codeInvalidProducerEpoch        int16 = 47
	codeInvalidTxnState             int16 = 48
	codeTransactionCoordinatorFence int16 = 52
	codeProducerFenced              int16 = 90
)

// KafkaErrorCode returns the Kafka error code a broker answers with for
// an error returned by this module (0 for nil):
//
//	ErrOffsetOutOfRange                  OFFSET_OUT_OF_RANGE (1)
//	ErrInvalidRecords, ErrCorrupt,
//	  ErrTornTail                        CORRUPT_MESSAGE (2)
//	ErrUnknownPartition                  UNKNOWN_TOPIC_OR_PARTITION (3)
//	ErrClosed                            NOT_LEADER_OR_FOLLOWER (6): the
//	                                     broker closed the replica
//	ErrTruncated                         NOT_LEADER_OR_FOLLOWER (6): the
//	                                     replica was truncated (it follows)
//	context.Canceled, DeadlineExceeded   REQUEST_TIMED_OUT (7)
//	ErrRecordTooLarge                    MESSAGE_TOO_LARGE (10)
//	ErrInvalidTopic                      INVALID_TOPIC_EXCEPTION (17)
//	ErrRecordListTooLarge                RECORD_LIST_TOO_LARGE (18)
//	ErrInvalidTimestamp                  INVALID_TIMESTAMP (32)
//	ErrOutOfOrderSequence                OUT_OF_ORDER_SEQUENCE_NUMBER (45)
//	ErrDuplicateSequence                 DUPLICATE_SEQUENCE_NUMBER (46)
//	ErrInvalidProducerEpoch              INVALID_PRODUCER_EPOCH (47)
//	ErrInvalidTxnState                   INVALID_TXN_STATE (48)
//	ErrOpenTransactions                  CONCURRENT_TRANSACTIONS (51):
//	                                     retriable
//	ErrTransactionCoordinatorFenced      TRANSACTION_COORDINATOR_FENCED (52)
//	ErrLocked, ErrDirLocked,
//	  ErrNeedsRecovery, ErrFlushedDamage,
//	  ErrFailed, and
//	  file-system, index and checkpoint
//	  errors                             KAFKA_STORAGE_ERROR (56)
//	ErrStaleLeaderEpoch                  FENCED_LEADER_EPOCH (74)
//	ErrPolicy, ErrControlFromClient,
//	  ErrInvalidSequence                 INVALID_RECORD (87)
//	ErrProducerFenced                    PRODUCER_FENCED (90)
//	ErrInconsistentTopicID               INCONSISTENT_TOPIC_ID (103)
//	ErrUnexpectedOffset,
//	  ErrUnknownControlType,
//	  ErrNotBatchBoundary,
//	  ErrCleaningStopped,
//	  ErrUncleanable, anything else     UNKNOWN_SERVER_ERROR (-1)
//
// A duplicate (errors.Is(err, ErrDuplicateSequence)) is not a failure
// for the producer: like Kafka, a broker answers it with NONE and the
// original offsets of the *producerstate.DuplicateSequenceError; the
// code is the error's own. An error wrapping several of these answers
// the first in this order: producer-state rules, then record checks,
// then storage.
func KafkaErrorCode(err error) int16 {
	if err == nil {
		return codeNone
	}
	if errors.Is(err, ErrDuplicateSequence) {
		return codeDuplicateSequenceNumber
	}
	if c := producerstate.KafkaErrorCode(err); c != codeUnknownServerError && c != codeNone {
		return c
	}
	for _, m := range kafkaCodes {
		if errors.Is(err, m.err) {
			return m.code
		}
	}
	var pathErr *fs.PathError
	var errno syscall.Errno
	// Corrupt bytes other than a batch's (which matched batch.ErrCorrupt
	// above): an index, a snapshot, a checkpoint of the storage.
	if errors.As(err, &pathErr) || errors.As(err, &errno) || corrupt.Is(err) {
		return codeKafkaStorageError
	}
	return codeUnknownServerError
}

// kafkaCodes maps the sentinels, in the order they are tested.
var kafkaCodes = []struct {
	err  error
	code int16
}{
	{ErrTruncated, codeNotLeaderOrFollower},
	{ErrOffsetOutOfRange, codeOffsetOutOfRange},
	{ErrRecordTooLarge, codeMessageTooLarge},
	{ErrRecordListTooLarge, codeRecordListTooLarge},
	{ErrInvalidTimestamp, codeInvalidTimestamp},
	{ErrStaleLeaderEpoch, codeFencedLeaderEpoch},
	{ErrPolicy, codeInvalidRecord},
	{ErrInvalidRecords, codeCorruptMessage},
	{batch.ErrCorrupt, codeCorruptMessage},
	{batch.ErrTornTail, codeCorruptMessage},
	{ErrOpenTransactions, codeConcurrentTransactions},
	{ErrInconsistentTopicID, codeInconsistentTopicID},
	{ErrUnknownPartition, codeUnknownTopicOrPartition},
	{ErrInvalidTopic, codeInvalidTopic},
	{ErrClosed, codeNotLeaderOrFollower},
	{ErrLocked, codeKafkaStorageError},
	{ErrDirLocked, codeKafkaStorageError},
	{ErrNeedsRecovery, codeKafkaStorageError},
	{ErrFlushedDamage, codeKafkaStorageError},
	{ErrFailed, codeKafkaStorageError},
	{segment.ErrClosed, codeKafkaStorageError},
	{segment.ErrFull, codeKafkaStorageError},
	{segment.ErrNeedsRecovery, codeKafkaStorageError},
	{segment.ErrOffsetOverflow, codeKafkaStorageError},
	{context.Canceled, codeRequestTimedOut},
	{context.DeadlineExceeded, codeRequestTimedOut},
	{ErrUnexpectedOffset, codeUnknownServerError},
	{ErrNotBatchBoundary, codeUnknownServerError},
	{ErrCleaningStopped, codeUnknownServerError},
	{ErrUncleanable, codeUnknownServerError},
}
