package server

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProduceAcks: acks must be -1, 0 or 1 (INVALID_REQUIRED_ACKS
// otherwise, nothing written); acks=0 is never answered.
func TestProduceAcks(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "ak", 1)
	for _, c := range []struct {
		acks int16
		code int16
	}{{2, errInvalidRequiredAcks}, {-2, errInvalidRequiredAcks}, {1, 0}, {-1, 0}} {
		p := roundTrip[*kmsg.ProduceResponse](rc, produceReq("ak", 0, c.acks, records(t, 1, -1, 0, 0, false, 5))).Topics[0].Partitions[0]
		if p.ErrorCode != c.code {
			t.Errorf("acks %d: error %d, want %d", c.acks, p.ErrorCode, c.code)
		}
	}
	if hw := roundTrip[*kmsg.FetchResponse](rc, fetchReq("ak", 0, 0, 0, 1, 1<<20, 1<<20, 0)).Topics[0].Partitions[0].HighWatermark; hw != 2 {
		t.Fatalf("high watermark %d after two accepted produces, want 2", hw)
	}
}

// TestFetchPartitionMaxBytes: a partition's PartitionMaxBytes bounds
// its records once an earlier partition returned some (the first
// partition with records always gets one whole batch).
func TestFetchPartitionMaxBytes(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "pm", 2)
	b := records(t, 1, -1, 0, 0, false, 3000)
	for part := int32(0); part < 2; part++ {
		roundTrip[*kmsg.ProduceResponse](rc, produceReq("pm", part, 1, b))
	}
	f := fetchReq("pm", 0, 0, 0, 1, 1<<20, 100, 0)
	rp := f.Topics[0].Partitions[0]
	rp.Partition = 1
	f.Topics[0].Partitions = append(f.Topics[0].Partitions, rp)
	fr := roundTrip[*kmsg.FetchResponse](rc, f)
	if p0, p1 := fr.Topics[0].Partitions[0], fr.Topics[0].Partitions[1]; len(p0.RecordBatches) != len(b) || len(p1.RecordBatches) != 0 {
		t.Fatalf("partition max bytes 100: %d and %d record bytes, want %d and 0", len(p0.RecordBatches), len(p1.RecordBatches), len(b))
	}
}

// TestFetchErrorAnswersCarryNoOffsets: a partition answered with an
// error carries -1 offsets, as Kafka's error answers do.
func TestFetchErrorAnswersCarryNoOffsets(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "fe", 1)
	p := roundTrip[*kmsg.FetchResponse](rc, fetchReq("fe", 3, 0, 0, 1, 1<<20, 1<<20, 0)).Topics[0].Partitions[0]
	if p.ErrorCode != errUnknownTopicOrPartition || p.HighWatermark != -1 || p.LastStableOffset != -1 || p.LogStartOffset != -1 {
		t.Fatalf("unknown partition: %+v", p)
	}
}
