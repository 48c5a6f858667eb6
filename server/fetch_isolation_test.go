package server

import (
	"testing"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReadCommittedStopsAtLastStableOffset: behind an open transaction,
// read_committed reads and ListOffsets stop at the last stable offset,
// read_uncommitted at the high watermark. A record at the last stable
// offset itself is not listed (Kafka answers -1: nothing fetchable).
func TestReadCommittedStopsAtLastStableOffset(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "iso", 1)
	roundTrip[*kmsg.ProduceResponse](rc, produceReq("iso", 0, 1, recordsAt(t, 1000, 1, -1, 0, 0, false, 10)))
	id := "open"
	p := initPID(t, rc, &id, 60000)
	if c := addPartition(t, rc, id, p.ProducerID, p.ProducerEpoch, "iso", 0); c != 0 {
		t.Fatalf("AddPartitionsToTxn: %d", c)
	}
	r := roundTrip[*kmsg.ProduceResponse](rc, txnProduceReq(id, "iso", 0, 1, recordsAt(t, 5000, 2, p.ProducerID, p.ProducerEpoch, 0, true, 10)))
	if c := r.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("transactional produce: %d", c)
	}

	for _, c := range []struct {
		isolation int8
		batches   int
		hw, lso   int64
	}{{0, 2, 3, 1}, {1, 1, 3, 1}} {
		fr := roundTrip[*kmsg.FetchResponse](rc, fetchReq("iso", 0, 0, 0, 1, 1<<20, 1<<20, c.isolation))
		fp := fr.Topics[0].Partitions[0]
		n := 0
		for b := fp.RecordBatches; len(b) >= batch.HeaderSize; n++ {
			b = b[batch.View(b).Size():]
		}
		if fp.ErrorCode != 0 || n != c.batches || fp.HighWatermark != c.hw || fp.LastStableOffset != c.lso {
			t.Errorf("isolation %d: error %d, %d batches, hw %d, lso %d; want %d batches, hw %d, lso %d",
				c.isolation, fp.ErrorCode, n, fp.HighWatermark, fp.LastStableOffset, c.batches, c.hw, c.lso)
		}
	}

	list := func(isolation int8, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.IsolationLevel = 7, isolation
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "iso"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return roundTrip[*kmsg.ListOffsetsResponse](rc, req).Topics[0].Partitions[0]
	}
	for _, c := range []struct {
		isolation int8
		ts, want  int64
	}{
		{0, -1, 3}, {1, -1, 1}, // latest: the high watermark, the last stable offset
		{0, 5000, 1}, {1, 5000, -1}, // the open transaction's records: at the LSO, not fetchable
		{1, 1000, 0},
	} {
		if p := list(c.isolation, c.ts); p.ErrorCode != 0 || p.Offset != c.want {
			t.Errorf("ListOffsets isolation %d timestamp %d: offset %d error %d, want %d", c.isolation, c.ts, p.Offset, p.ErrorCode, c.want)
		}
	}
}

// TestFetchMaxBytesAcrossPartitions: the request's MaxBytes bounds the
// sum of the partitions' records, not each partition's: once the first
// batches have used it up, a partition whose batch does not fit in what
// is left gets nothing, however large its own PartitionMaxBytes.
func TestFetchMaxBytesAcrossPartitions(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "mb", 3)
	b := records(t, 1, -1, 0, 0, false, 4000)
	for part := int32(0); part < 3; part++ {
		roundTrip[*kmsg.ProduceResponse](rc, produceReq("mb", part, 1, b))
	}
	f := fetchReq("mb", 0, 0, 0, 1, int32(2*len(b)+len(b)/2), 1<<20, 0)
	for part := int32(1); part < 3; part++ {
		rp := f.Topics[0].Partitions[0]
		rp.Partition = part
		f.Topics[0].Partitions = append(f.Topics[0].Partitions, rp)
	}
	fr := roundTrip[*kmsg.FetchResponse](rc, f)
	var got []int
	for _, p := range fr.Topics[0].Partitions {
		got = append(got, len(p.RecordBatches))
	}
	if len(got) != 3 || got[0] != len(b) || got[1] != len(b) || got[2] != 0 {
		t.Fatalf("record bytes per partition %v, want [%d %d 0] within MaxBytes %d", got, len(b), len(b), f.MaxBytes)
	}
}

// TestReadCommittedAbortedTransactions: a read_committed fetch over an
// aborted transaction lists it (producer id, first offset), so the
// consumer drops its records; with nothing aborted the list is empty,
// not null, and read_uncommitted has none.
func TestReadCommittedAbortedTransactions(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "ab", 1)
	roundTrip[*kmsg.ProduceResponse](rc, produceReq("ab", 0, 1, records(t, 2, -1, 0, 0, false, 10)))
	fp := roundTrip[*kmsg.FetchResponse](rc, fetchReq("ab", 0, 0, 0, 1, 1<<20, 1<<20, 1)).Topics[0].Partitions[0]
	if fp.AbortedTransactions == nil || len(fp.AbortedTransactions) != 0 {
		t.Fatalf("read_committed without aborts: %v, want an empty list", fp.AbortedTransactions)
	}
	id := "ab"
	p := initPID(t, rc, &id, 60000)
	addPartition(t, rc, id, p.ProducerID, p.ProducerEpoch, "ab", 0)
	roundTrip[*kmsg.ProduceResponse](rc, txnProduceReq(id, "ab", 0, 1, records(t, 3, p.ProducerID, p.ProducerEpoch, 0, true, 10)))
	if c := endTxn(t, rc, id, p.ProducerID, p.ProducerEpoch, false); c != 0 {
		t.Fatalf("abort: %d", c)
	}
	fp = roundTrip[*kmsg.FetchResponse](rc, fetchReq("ab", 0, 0, 0, 1, 1<<20, 1<<20, 1)).Topics[0].Partitions[0]
	if len(fp.AbortedTransactions) != 1 || fp.AbortedTransactions[0].ProducerID != p.ProducerID || fp.AbortedTransactions[0].FirstOffset != 2 {
		t.Fatalf("aborted transactions %+v, want producer %d from offset 2", fp.AbortedTransactions, p.ProducerID)
	}
	if fp := roundTrip[*kmsg.FetchResponse](rc, fetchReq("ab", 0, 0, 0, 1, 1<<20, 1<<20, 0)).Topics[0].Partitions[0]; len(fp.AbortedTransactions) != 0 {
		t.Fatalf("read_uncommitted listed %v", fp.AbortedTransactions)
	}
}

// TestFetchLeaderEpochChecked: a fetch naming a leader epoch below the
// partition's is FENCED_LEADER_EPOCH, epoch 0 included; one above it
// UNKNOWN_LEADER_EPOCH; -1 is not checked.
func TestFetchLeaderEpochChecked(t *testing.T) {
	dir := t.TempDir()
	ts := startTest(t, Config{Dir: dir})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "le", 1)
	l, _ := ts.Dir().Log(partlog.TopicPartition{Topic: "le", Partition: 0})
	if _, err := l.AppendAsLeader(records(t, 1, -1, 0, 0, false, 10), 3); err != nil {
		t.Fatal(err)
	}
	ts.close(t)
	ts = startTest(t, Config{Dir: dir}) // the partition's epoch is the log's, 3
	rc = dial(t, ts.addr)
	for _, c := range []struct {
		epoch int32
		code  int16
	}{{0, errFencedLeaderEpoch}, {2, errFencedLeaderEpoch}, {3, 0}, {4, errUnknownLeaderEpoch}, {-1, 0}} {
		f := fetchReq("le", 0, 0, 0, 1, 1<<20, 1<<20, 0)
		f.Topics[0].Partitions[0].CurrentLeaderEpoch = c.epoch
		if got := roundTrip[*kmsg.FetchResponse](rc, f).Topics[0].Partitions[0].ErrorCode; got != c.code {
			t.Errorf("current leader epoch %d: error %d, want %d", c.epoch, got, c.code)
		}
	}
}
