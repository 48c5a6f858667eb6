package server

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMirrorOpenWithTransactionPreparedOnMirroredPartition: a local
// transaction is open on a partition when the mirror starts on it; its
// EndTxn persists PrepareCommit but the markers are refused (the
// partition is read-only). The server must still open after a restart
// (the transaction stays prepared until the mirror stops) and complete
// the transaction once the partition is writable again.
func TestMirrorOpenWithTransactionPreparedOnMirroredPartition(t *testing.T) {
	a := startTest(t, Config{})
	dir := t.TempDir()
	b := startTest(t, Config{Dir: dir})
	ra, rb := dial(t, a.addr), dial(t, b.addr)
	createTopic(t, ra, "pm", 1)
	produceOK(t, ra, "pm", 0, records(t, 2, -1, 0, 0, false, 10))
	createTopic(t, rb, "pm", 1)
	id := "local"
	p := initPID(t, rb, &id, 60000)
	if c := addPartition(t, rb, id, p.ProducerID, p.ProducerEpoch, "pm", 0); c != 0 {
		t.Fatalf("AddPartitionsToTxn: %d", c)
	}
	roundTrip[*kmsg.ProduceResponse](rb, produceReq("pm", 0, -1, records(t, 1, p.ProducerID, p.ProducerEpoch, 0, true, 10)))
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"pm"}}); err != nil {
		t.Fatal(err)
	}
	if c := endTxn(t, rb, id, p.ProducerID, p.ProducerEpoch, true); c == 0 {
		t.Fatalf("EndTxn on a mirroring partition answered NONE")
	}
	b.close(t)
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatalf("the server does not open with a transaction prepared on a mirrored partition: %v", err)
	}
	b = &testServer{Server: s}
	defer s.Close()
	if _, err := b.StopMirror(context.Background(), MirrorStopRequest{Topics: []string{"pm"}}); err != nil {
		t.Fatal(err)
	}
	b.txns.retryPrepared()
	var state string
	b.meta.view(func(st *metaState) { state = st.Transactions[id].State })
	if state != txnCompleteCommit {
		t.Fatalf("after the stop the transaction is %s", state)
	}
}

// TestMirrorStopDuringCloseFinishes: Close cancels the server's context
// and then waits for a running stop (mirror mutex). The stop used that
// context for its fsyncs, so a shutdown (SIGTERM) during a stop left the
// partition FAILED and read-only after the restart instead of STOPPED.
func TestMirrorStopDuringCloseFinishes(t *testing.T) {
	a := startTest(t, Config{})
	dir := t.TempDir()
	b := startTest(t, Config{Dir: dir})
	ra := dial(t, a.addr)
	createTopic(t, ra, "sc", 1)
	produceOK(t, ra, "sc", 0, records(t, 3, 0, 0, 0, false, 10))
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"sc"}}); err != nil {
		t.Fatal(err)
	}
	waitMirrored(t, b, a, "sc", 0)
	b.cancel() // what Close does first, before it waits for the stop
	_, err := b.StopMirror(context.Background(), MirrorStopRequest{Topics: []string{"sc"}})
	b.close(t)
	b = startTest(t, Config{Dir: dir})
	st := b.MirrorStatus()
	if len(st) != 1 || st[0].State != "STOPPED" || st[0].BarrierOffset != 3 {
		t.Fatalf("stop during shutdown (err %v): after restart %+v", err, st)
	}
}
