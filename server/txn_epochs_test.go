package server

import (
	"context"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestInitProducerIDEpochs: KIP-360's InitProducerId (v3+) names the id
// and epoch the producer had. Its current epoch is bumped; a retry of
// the last bump (the epoch before it) gets the same answer again; any
// other epoch is a fenced producer (PRODUCER_FENCED from v4), and so is
// another producer id.
func TestInitProducerIDEpochs(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	id := "k360"
	init := func(pid int64, epoch int16) *kmsg.InitProducerIDResponse {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 4, &id, 60000
		req.ProducerID, req.ProducerEpoch = pid, epoch
		return roundTrip[*kmsg.InitProducerIDResponse](rc, req)
	}
	first := init(-1, -1)
	pid := first.ProducerID
	steps := []struct {
		name      string
		pid       int64
		epoch     int16
		code      int16
		wantEpoch int16
	}{
		{"the current epoch is bumped", pid, 0, 0, 1},
		{"and again", pid, 1, 0, 2},
		{"a retry of the last bump", pid, 1, 0, 2},
		{"an older epoch is fenced", pid, 0, errProducerFenced, -1},
		{"a future epoch is fenced", pid, 7, errProducerFenced, -1},
		{"another producer id is fenced", pid + 1, 2, errProducerFenced, -1},
		{"the current epoch still is bumped", pid, 2, 0, 3},
	}
	for _, st := range steps {
		r := init(st.pid, st.epoch)
		if r.ErrorCode != st.code || st.code == 0 && (r.ProducerID != pid || r.ProducerEpoch != st.wantEpoch) {
			t.Fatalf("%s: error %d, producer %d epoch %d; want error %d, epoch %d", st.name, r.ErrorCode, r.ProducerID, r.ProducerEpoch, st.code, st.wantEpoch)
		}
	}
}

// TestTimedOutTransactionAbortedAtBumpedEpoch: a transaction past its
// timeout is aborted with the producer epoch bumped, and its ABORT
// marker is written at the bumped epoch, so the old producer's next
// transactional write is refused.
func TestTimedOutTransactionAbortedAtBumpedEpoch(t *testing.T) {
	clock := &fakeClock{mu: make(chan struct{}, 1), t: time.Unix(1_700_000_000, 0)}
	ts := startTest(t, Config{Tick: 10 * time.Millisecond, Now: clock.now})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "tb", 1)
	id := "bump"
	p := initPID(t, rc, &id, 1000)
	addPartition(t, rc, id, p.ProducerID, p.ProducerEpoch, "tb", 0)
	roundTrip[*kmsg.ProduceResponse](rc, txnProduceReq(id, "tb", 0, 1, records(t, 2, p.ProducerID, p.ProducerEpoch, 0, true, 10)))
	l, _ := ts.Dir().Log(partlog.TopicPartition{Topic: "tb", Partition: 0})
	clock.add(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.WaitHighWatermark(ctx, 2); err != nil {
		t.Fatalf("no ABORT marker after the timeout: %v", err)
	}
	v, err := l.Read(2, 1<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	var h batch.BatchHeader
	if _, err := batch.CheckAt(v.Records, 0, &h); err != nil || !h.IsControl() {
		t.Fatalf("offset 2: control %v, %v", h.IsControl(), err)
	}
	if h.ProducerID != p.ProducerID || h.ProducerEpoch != p.ProducerEpoch+1 {
		t.Fatalf("ABORT marker of producer %d at epoch %d, want %d at the bumped epoch %d", h.ProducerID, h.ProducerEpoch, p.ProducerID, p.ProducerEpoch+1)
	}
	r := roundTrip[*kmsg.ProduceResponse](rc, txnProduceReq(id, "tb", 0, 1, records(t, 1, p.ProducerID, p.ProducerEpoch, 2, true, 10)))
	if c := r.Topics[0].Partitions[0].ErrorCode; c == 0 {
		t.Fatal("the fenced producer's write at its old epoch was accepted")
	}
}

// TestEndTxnEpochs: EndTxn at an epoch other than the producer's
// current one is a fenced producer; with transaction version 2 (EndTxn
// v5) every end bumps the epoch, and a retry of the end, at the epoch
// below, gets the same answer.
func TestEndTxnEpochs(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "et", 1)
	id := "et"
	old := initPID(t, rc, &id, 60000)
	p := initPID(t, rc, &id, 60000)
	addPartition(t, rc, id, p.ProducerID, p.ProducerEpoch, "et", 0)
	if c := endTxn(t, rc, id, old.ProducerID, old.ProducerEpoch, true); c != errProducerFenced {
		t.Fatalf("EndTxn at the older epoch %d: %d, want PRODUCER_FENCED", old.ProducerEpoch, c)
	}
	if c := endTxn(t, rc, id, p.ProducerID, p.ProducerEpoch, true); c != 0 {
		t.Fatalf("EndTxn at the current epoch: %d", c)
	}

	id2 := "et2"
	q := initPID(t, rc, &id2, 60000)
	end2 := func(epoch int16) *kmsg.EndTxnResponse {
		req := kmsg.NewPtrEndTxnRequest()
		req.Version = 5
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id2, q.ProducerID, epoch, true
		return roundTrip[*kmsg.EndTxnResponse](rc, req)
	}
	req := produceReq("et", 0, 1, records(t, 1, q.ProducerID, q.ProducerEpoch, 0, true, 10))
	req.Version, req.TransactionID = 12, &id2 // KIP-890: the produce adds the partition
	if c := roundTrip[*kmsg.ProduceResponse](rc, req).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("transactional produce v12: %d", c)
	}
	first := end2(q.ProducerEpoch)
	if first.ErrorCode != 0 || first.ProducerEpoch != q.ProducerEpoch+1 {
		t.Fatalf("EndTxn v5: error %d, epoch %d; want the epoch bumped to %d", first.ErrorCode, first.ProducerEpoch, q.ProducerEpoch+1)
	}
	if retry := end2(q.ProducerEpoch); retry.ErrorCode != 0 || retry.ProducerEpoch != first.ProducerEpoch {
		t.Fatalf("EndTxn v5 retried: error %d, epoch %d; want the first answer again", retry.ErrorCode, retry.ProducerEpoch)
	}
}

// TestListOffsetsEarliestLeaderEpoch: the earliest offset of a
// partition with no leader epoch written yet is answered at the
// partition's current epoch, not -1.
func TestListOffsetsEarliestLeaderEpoch(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "ee", 1)
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 7
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "ee"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -2
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if p := roundTrip[*kmsg.ListOffsetsResponse](rc, req).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 0 || p.LeaderEpoch != 0 {
		t.Fatalf("earliest of an empty partition: %+v, want offset 0 at epoch 0", p)
	}
}

// TestInitProducerIDEpochExhausted: a producer whose epoch reached
// 32766 gets a new producer id at epoch 0 from its next InitProducerId
// (Kafka's epoch exhaustion), and the old id is kept as the previous
// one, so that the new id's producer is not taken for another.
func TestInitProducerIDEpochExhausted(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	id := "ex"
	p := initPID(t, rc, &id, 60000)
	ts.txns.mu.Lock()
	st, _ := ts.txns.get(id)
	st.ProducerEpoch = 32766
	if err := ts.txns.put(id, st); err != nil {
		t.Fatal(err)
	}
	ts.txns.mu.Unlock()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 4, &id, 60000
	req.ProducerID, req.ProducerEpoch = p.ProducerID, 32766
	r := roundTrip[*kmsg.InitProducerIDResponse](rc, req)
	if r.ErrorCode != 0 || r.ProducerID == p.ProducerID || r.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId at epoch 32766: error %d, producer %d epoch %d; want a new producer id at epoch 0", r.ErrorCode, r.ProducerID, r.ProducerEpoch)
	}
	if st, _ := ts.txns.get(id); st.PrevProducerID != p.ProducerID {
		t.Fatalf("previous producer id %d, want %d", st.PrevProducerID, p.ProducerID)
	}
}
