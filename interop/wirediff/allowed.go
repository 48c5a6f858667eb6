package wirediff

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AllowedDifferences are the answers in which partlog serve differs from
// Kafka 4.4 on purpose, each with why; server/doc.go lists the same
// ones. A step showing one names it (Step.Allowed) and states partlog's
// answer (Step.Expect); the Rules of norm.go marked "allowed" are the
// others.
var AllowedDifferences = map[string]string{
	"invalid-record-not-unknown": "Kafka answers UNKNOWN_SERVER_ERROR for a batch it cannot decompress or whose codec it does not know; partlog INVALID_RECORD: both refuse it, and the code tells the client its batch is at fault",
	"record-offset-deltas":       "Kafka stores an uncompressed batch whose records' offset deltas are not 0..n-1 (and fails the same batch compressed); partlog refuses it (INVALID_RECORD): such a record would be read at an offset its batch does not hold",
	"producer-epoch-below-none":  "Kafka stores a batch without a producer id whose producer epoch is below -1; partlog refuses it (INVALID_RECORD): recovery takes such a header for damage and would cut the log there",
	"null-records":               "Kafka never answers a produce whose records are null (the request times out); partlog answers INVALID_RECORD at once",
}

// produceCode expects every partition of a Produce answer to carry code.
func produceCode(code int16) func(kmsg.Response) error {
	return func(r kmsg.Response) error {
		resp, ok := r.(*kmsg.ProduceResponse)
		if !ok {
			return fmt.Errorf("answer %T, want a ProduceResponse", r)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != code {
					return fmt.Errorf("%s[%d]: error code %d, want %d", t.Topic, p.Partition, p.ErrorCode, code)
				}
			}
		}
		return nil
	}
}

// fetchedNothing expects a Fetch answer without errors or records, at
// high watermark 0: the refused batch was not stored.
func fetchedNothing(r kmsg.Response) error {
	resp, ok := r.(*kmsg.FetchResponse)
	if !ok {
		return fmt.Errorf("answer %T, want a FetchResponse", r)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 0 {
				return fmt.Errorf("partition %d: error %d, %d record bytes, high watermark %d; want nothing stored", p.Partition, p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
			}
		}
	}
	return nil
}

// createCode expects every topic of a CreateTopics answer to carry code.
func createCode(code int16) func(kmsg.Response) error {
	return func(r kmsg.Response) error {
		resp, ok := r.(*kmsg.CreateTopicsResponse)
		if !ok {
			return fmt.Errorf("answer %T, want a CreateTopicsResponse", r)
		}
		for _, t := range resp.Topics {
			if t.ErrorCode != code {
				return fmt.Errorf("%s: error code %d, want %d", t.Topic, t.ErrorCode, code)
			}
		}
		return nil
	}
}
