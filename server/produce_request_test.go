package server

import (
	"testing"

	"github.com/partlog/partlog/batch"

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

// TestProduceRecordsShape: a partition's records must be exactly one
// batch of magic 2 (INVALID_RECORD), zstd only from Produce v7
// (UNSUPPORTED_COMPRESSION_TYPE), as Kafka checks before appending;
// nothing refused is written.
func TestProduceRecordsShape(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "sh", 1)
	one := records(t, 1, -1, 0, 0, false, 5)
	magic1 := append([]byte(nil), one...)
	magic1[batch.OffMagic] = 1
	zstd := func() []byte {
		spec := batch.NewBatchSpec(0)
		spec.Compression = batch.CompressionZstd
		var b batch.Builder
		out, err := b.AppendBatch(nil, &spec, []batch.RecordSpec{{Value: []byte("z")}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}()
	for _, c := range []struct {
		name    string
		version int16
		recs    []byte
		code    int16
	}{
		{"two batches", 9, append(append([]byte(nil), one...), one...), errInvalidRecord},
		{"magic 1", 9, magic1, errInvalidRecord},
		{"zstd at v6", 6, zstd, errUnsupportedCompression},
		{"zstd at v7", 7, zstd, 0},
	} {
		req := produceReq("sh", 0, 1, c.recs)
		req.Version = c.version
		if got := roundTrip[*kmsg.ProduceResponse](rc, req).Topics[0].Partitions[0].ErrorCode; got != c.code {
			t.Errorf("%s: error %d, want %d", c.name, got, c.code)
		}
	}
	if hw := roundTrip[*kmsg.FetchResponse](rc, fetchReq("sh", 0, 0, 0, 1, 1<<20, 1<<20, 0)).Topics[0].Partitions[0].HighWatermark; hw != 1 {
		t.Fatalf("high watermark %d, want 1 (only the zstd batch at v7)", hw)
	}
}
