package server

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMirrorOpenWithTransactionPreparedOnMirroredPartition: a local
// transaction is left prepared (PrepareCommit persisted, markers not
// written) on a partition that mirrors. Its markers are refused while the
// partition is read-only; the server must still open after a restart
// (the transaction stays prepared) and complete the transaction once the
// partition is writable again.
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
	roundTrip[*kmsg.ProduceResponse](rb, txnProduceReq(id, "pm", 0, -1, records(t, 1, p.ProducerID, p.ProducerEpoch, 0, true, 10)))
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"pm"}}); err != nil {
		t.Fatal(err)
	}
	// As a crash between PrepareCommit and the markers, or a marker
	// refused because the partition mirrors, leaves it.
	if err := b.meta.update(func(st *metaState) {
		tx := st.Transactions[id]
		tx.State, tx.Partitions = txnPrepareCommit, []partlog.TopicPartition{{Topic: "pm", Partition: 0}}
	}); err != nil {
		t.Fatal(err)
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
	mirrorTopic(t, b, a, "sc")
	b.cancel() // what Close does first, before it waits for the stop
	_, err := b.StopMirror(context.Background(), MirrorStopRequest{Topics: []string{"sc"}})
	b.close(t)
	b = startTest(t, Config{Dir: dir})
	st := b.MirrorStatus()
	if len(st) != 1 || st[0].State != "STOPPED" || st[0].BarrierOffset != 3 {
		t.Fatalf("stop during shutdown (err %v): after restart %+v", err, st)
	}
}

// linkNames returns the running links and those of the state file.
func linkNames(ts *testServer) (running, stored []string) {
	ts.lmu.RLock()
	for n := range ts.links {
		running = append(running, n)
	}
	ts.lmu.RUnlock()
	ts.meta.view(func(m *metaState) {
		for n := range m.Mirrors {
			stored = append(stored, n)
		}
	})
	return running, stored
}

// TestMirrorFailedStartLeavesNoLink: a start whose every partition was
// refused (here: a second source for a partition that already mirrors,
// and an unreachable source admin) must not leave a link behind. The
// leftover link kept a client and a fetch loop, stayed in the state file
// (restarted at every Open), and made the next start from that cluster
// at another address a usage error.
func TestMirrorFailedStartLeavesNoLink(t *testing.T) {
	a := startTest(t, Config{})
	c := startTest(t, Config{})
	b := startTest(t, Config{})
	createTopic(t, dial(t, a.addr), "fl", 1)
	createTopic(t, dial(t, c.addr), "fl", 1)
	ctx := context.Background()
	if _, err := b.StartMirror(ctx, MirrorStartRequest{Source: a.addr, Topics: []string{"fl"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.StartMirror(ctx, MirrorStartRequest{Source: c.addr, Topics: []string{"fl"}}); err == nil {
		t.Fatal("second source accepted")
	}
	running, stored := linkNames(b)
	if len(running) != 1 || len(stored) != 1 || running[0] != "from-"+a.meta.clusterID() {
		t.Fatalf("after a refused second source: running %v, stored %v", running, stored)
	}
	if _, err := b.StopMirror(ctx, MirrorStopRequest{Topics: []string{"fl"}}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := b.StartMirror(sctx, MirrorStartRequest{Source: c.addr, SourceAdmin: dead, Topics: []string{"fl"}}); err == nil {
		t.Fatal("unreachable admin accepted")
	}
	if running, stored := linkNames(b); len(running) != 0 || len(stored) != 0 {
		t.Fatalf("after a start that started nothing: running %v, stored %v", running, stored)
	}
}

// TestMirrorRestartAfterStopCrashDropsLink: a crash after a partition's
// stop reached STOPPED but before the state file dropped the topic from
// its link (StopMirror does the partitions first). The restart must not
// bring the link back: it has nothing to fetch.
func TestMirrorRestartAfterStopCrashDropsLink(t *testing.T) {
	a := startTest(t, Config{})
	dir := t.TempDir()
	b := startTest(t, Config{Dir: dir})
	createTopic(t, dial(t, a.addr), "sk", 1)
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"sk"}, Name: "dr"}); err != nil {
		t.Fatal(err)
	}
	var saved mirrorLinkState
	b.meta.view(func(m *metaState) { saved = *m.Mirrors["dr"] })
	if _, err := b.StopMirror(context.Background(), MirrorStopRequest{Topics: []string{"sk"}}); err != nil {
		t.Fatal(err)
	}
	// The state file as the crash left it.
	if err := b.meta.update(func(m *metaState) { m.Mirrors = map[string]*mirrorLinkState{"dr": &saved} }); err != nil {
		t.Fatal(err)
	}
	b.close(t)
	b = startTest(t, Config{Dir: dir})
	if running, stored := linkNames(b); len(running) != 0 || len(stored) != 0 {
		t.Fatalf("after the restart: running %v, stored %v", running, stored)
	}
}

// TestFollowMirrorEpochNeverLowers: concurrent raises from the fetch
// loop and a stop leave the served epoch at the mirror's latest, never
// at a value read before it.
func TestFollowMirrorEpochNeverLowers(t *testing.T) {
	s := startTest(t, Config{})
	createTopic(t, dial(t, s.addr), "ep", 1)
	p, _ := s.partitionFor("ep", 0)
	p.epoch.Store(40) // a served epoch above the mirror's (0)
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 1000 {
				s.followMirrorEpoch(p)
			}
		}()
	}
	for range 4 {
		<-done
	}
	if e := p.epoch.Load(); e != 40 {
		t.Fatalf("served epoch %d, want 40 (never lowered)", e)
	}
}

// TestCloseDoesNotWaitForSlowStart: a start waits for the source admin
// (15 s per partition) under the mirror mutex, which Close needs too.
// Called with a context that never ends (an embedding broker), Close hung
// until every lookup timed out; the start must end with the server.
func TestCloseDoesNotWaitForSlowStart(t *testing.T) {
	a := startTest(t, Config{})
	createTopic(t, dial(t, a.addr), "slow", 3)
	hang, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	b := startTest(t, Config{})
	started := make(chan error, 1)
	go func() {
		_, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, SourceAdmin: hang.Addr().String(), Topics: []string{"slow"}})
		started <- err
	}()
	time.Sleep(300 * time.Millisecond) // the start is waiting for the admin
	closed := make(chan struct{})
	go func() { b.close(t); close(closed) }()
	select {
	case <-closed:
	case <-time.After(14 * time.Second):
		t.Fatal("Close still waits for the start's lookups after 14 s (3 partitions x 15 s)")
	}
	if err := <-started; err == nil {
		t.Fatal("the start succeeded against an admin that never answers")
	}
}

// TestMirrorSourceTopicRecreated: the source deletes the mirrored topic
// and creates it again (a new topic id, offsets from 0). The link
// learned the new id from the source's metadata and went on fetching
// from its log end: the new incarnation's batches above it were appended
// after the old one's, one partition made of two different topics. The
// session's topic id (in mirror.checkpoint) must be checked: the
// partition fails instead.
func TestMirrorSourceTopicRecreated(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{})
	ra := dial(t, a.addr)
	createTopic(t, ra, "rc", 1)
	produceOK(t, ra, "rc", 0, records(t, 5, -1, 0, 0, false, 10))
	mirrorTopic(t, b, a, "rc")
	if err := a.deleteTopic("rc"); err != nil {
		t.Fatal(err)
	}
	createTopic(t, ra, "rc", 1)
	produceOK(t, ra, "rc", 0, records(t, 5, -1, 0, 0, false, 10))
	produceOK(t, ra, "rc", 0, records(t, 3, -1, 0, 0, false, 10))
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if logOf(t, b, "rc", 0).LogEndOffset() != 5 {
			t.Fatalf("B appended the new topic's records after the old one's: log end %d", logOf(t, b, "rc", 0).LogEndOffset())
		}
		if st := b.MirrorStatus(); len(st) == 1 && st[0].State == "FAILED" {
			// A new start mirrors the new topic from its start.
			if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"rc"}}); err != nil {
				t.Fatal(err)
			}
			waitMirrored(t, b, a, "rc", 0)
			if !bytes.Equal(segmentBytes(t, a, "rc", 0), segmentBytes(t, b, "rc", 0)) {
				t.Fatal("after the new start the bytes differ from the source's")
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the partition still mirrors a different topic: %+v", b.MirrorStatus())
}

// TestMirrorSourceLogStartInsideBatch: the source's log start offset is
// inside a batch (Kafka's DeleteRecords does that). A new mirror gets
// OFFSET_OUT_OF_RANGE at 0, restarts its log at the source's log start,
// and the source then returns the batch holding that offset, which
// begins below it. Kafka's follower restarts its log at the batch's base
// offset in that case (an empty log only); the mirror must not fail.
func TestMirrorSourceLogStartInsideBatch(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{})
	ra := dial(t, a.addr)
	createTopic(t, ra, "ls", 1)
	produceOK(t, ra, "ls", 0, records(t, 5, -1, 0, 0, false, 10))
	produceOK(t, ra, "ls", 0, records(t, 3, -1, 0, 0, false, 10))
	if err := logOf(t, a, "ls", 0).SetLogStartOffset(2); err != nil {
		t.Fatal(err)
	}
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"ls"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for logOf(t, b, "ls", 0).LogEndOffset() != 8 {
		if st := b.MirrorStatus(); time.Now().After(deadline) || len(st) == 1 && st[0].State == "FAILED" {
			t.Fatalf("log end %d; status %+v", logOf(t, b, "ls", 0).LogEndOffset(), st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMirrorStartBadSourceAddressIsUsage: a source address the client
// cannot parse is the request's fault (admin 400, CLI exit 16), not a
// partial failure (200, exit 4).
func TestMirrorStartBadSourceAddressIsUsage(t *testing.T) {
	b := startTest(t, Config{})
	for _, src := range []string{"a:b:c", "host:99999999"} {
		_, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: src, Topics: []string{"x"}})
		if !errors.Is(err, errMirrorUsage) {
			t.Errorf("source %q: %v, want a usage error", src, err)
		}
	}
	if running, stored := linkNames(b); len(running) != 0 || len(stored) != 0 {
		t.Fatalf("links %v %v", running, stored)
	}
}

// TestMirrorChainMiddleStopTruncates: A → B → C, and B stops with
// TRUNCATE_LSO while A's transaction is open: B truncates the open
// transaction that C already fetched (read_uncommitted), writes its
// barrier there and takes writes. C must not go on fetching from its own
// log end as if nothing happened: its log would keep the open
// transaction (never closed), miss B's barrier and continue with B's
// records from another offset on.
func TestMirrorChainMiddleStopTruncates(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{})
	c := startTest(t, Config{})
	ra, rb := dial(t, a.addr), dial(t, b.addr)
	createTopic(t, ra, "ch", 1)
	produceOK(t, ra, "ch", 0, records(t, 5, 0, 0, 0, false, 10))     // [0, 5)
	appendBypassing(t, a, "ch", 0, records(t, 3, 1, 0, 0, true, 10)) // [5, 8) open
	ctx := context.Background()
	if _, err := b.StartMirror(ctx, MirrorStartRequest{Source: a.addr, Topics: []string{"ch"}}); err != nil {
		t.Fatal(err)
	}
	waitMirrored(t, b, a, "ch", 0)
	if _, err := c.StartMirror(ctx, MirrorStartRequest{Source: b.addr, Topics: []string{"ch"}}); err != nil {
		t.Fatal(err)
	}
	waitMirrored(t, c, b, "ch", 0) // C has the open transaction too
	if _, err := b.StopMirror(ctx, MirrorStopRequest{Topics: []string{"ch"}}); err != nil {
		t.Fatal(err)
	}
	// B: [0, 5) of A, its barrier at 5, then its own batches.
	produceOK(t, rb, "ch", 0, records(t, 2, 0, 0, 0, false, 10)) // [6, 8)
	produceOK(t, rb, "ch", 0, records(t, 4, 0, 0, 2, false, 10)) // [8, 12)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		st := c.MirrorStatus()
		if len(st) == 1 && st[0].State == "FAILED" {
			// Divergence seen; a new start mirrors B's history.
			if _, err := c.StartMirror(ctx, MirrorStartRequest{Source: b.addr, Topics: []string{"ch"}}); err != nil {
				t.Fatal(err)
			}
			waitMirrored(t, c, b, "ch", 0)
			if !bytes.Equal(segmentBytes(t, b, "ch", 0), segmentBytes(t, c, "ch", 0)) {
				t.Fatal("after the new start C's bytes differ from B's")
			}
			return
		}
		cl, bl := logOf(t, c, "ch", 0), logOf(t, b, "ch", 0)
		if cl.LogEndOffset() == bl.LogEndOffset() {
			if !bytes.Equal(segmentBytes(t, b, "ch", 0), segmentBytes(t, c, "ch", 0)) {
				t.Fatalf("C's log differs from B's (C kept A's open transaction at 5 and took B's batches from 8): C %d, B %d", cl.LastStableOffset(), bl.LastStableOffset())
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("C neither follows B nor fails: %+v; C log end %d, B %d", c.MirrorStatus(), logOf(t, c, "ch", 0).LogEndOffset(), logOf(t, b, "ch", 0).LogEndOffset())
}

// metadataEpoch returns the leader epoch ts's Metadata answers for the
// partition.
func metadataEpoch(t *testing.T, ts *testServer, topic string, n int32) int32 {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp := roundTrip[*kmsg.MetadataResponse](dial(t, ts.addr), req)
	for _, p := range resp.Topics[0].Partitions {
		if p.Partition == n {
			return p.LeaderEpoch
		}
	}
	t.Fatalf("%s-%d not in the metadata", topic, n)
	return 0
}

// TestMirrorLeaderEpochSurvivesRestart: EPOCH_FENCING raises the epoch a
// mirroring partition is served at (source epoch + 10) in memory only;
// mirror.Options.LeaderEpoch is how the caller gives it back after a
// restart. The server did not keep it: after a restart its Metadata
// answered a lower leader epoch than before, which clients take for stale
// metadata (franz-go keeps the higher epoch and its fetches are answered
// UNKNOWN_LEADER_EPOCH until the source writes again).
func TestMirrorLeaderEpochSurvivesRestart(t *testing.T) {
	a := startTest(t, Config{})
	dir := t.TempDir()
	b := startTest(t, Config{Dir: dir})
	createTopic(t, dial(t, a.addr), "le", 1)
	produceOK(t, dial(t, a.addr), "le", 0, records(t, 2, -1, 0, 0, false, 10))
	mirrorTopic(t, b, a, "le")
	before := metadataEpoch(t, b, "le", 0)
	b.close(t)
	b = startTest(t, Config{Dir: dir})
	if after := metadataEpoch(t, b, "le", 0); after < before {
		t.Fatalf("leader epoch %d after the restart, %d before", after, before)
	}
}

// TestMirrorStartEndsLocalTransactions: a transaction of this cluster is
// open on a partition when a mirror starts on it. Its markers would be
// refused while the partition mirrors (EndTxn failing, the transactional
// id stuck until the stop); the start aborts it first, fencing the
// producer as a timeout does, and the id can start again at once.
func TestMirrorStartEndsLocalTransactions(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{})
	ra, rb := dial(t, a.addr), dial(t, b.addr)
	createTopic(t, ra, "lt", 1)
	createTopic(t, rb, "lt", 1)
	createTopic(t, rb, "other", 1)
	id := "local"
	p := initPID(t, rb, &id, 60000)
	for _, topic := range []string{"lt", "other"} {
		if c := addPartition(t, rb, id, p.ProducerID, p.ProducerEpoch, topic, 0); c != 0 {
			t.Fatalf("AddPartitionsToTxn %s: %d", topic, c)
		}
		roundTrip[*kmsg.ProduceResponse](rb, txnProduceReq(id, topic, 0, -1, records(t, 1, p.ProducerID, p.ProducerEpoch, 0, true, 10)))
	}
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"lt"}}); err != nil {
		t.Fatal(err)
	}
	var state string
	b.meta.view(func(st *metaState) { state = st.Transactions[id].State })
	if state != txnCompleteAbort {
		t.Fatalf("the local transaction is %s after the start", state)
	}
	// The whole transaction is aborted, its other partition included.
	if l := logOf(t, b, "other", 0); l.LastStableOffset() != l.LogEndOffset() {
		t.Fatalf("other-0: LSO %d, log end %d", l.LastStableOffset(), l.LogEndOffset())
	}
	if c := endTxn(t, rb, id, p.ProducerID, p.ProducerEpoch, true); c != errProducerFenced {
		t.Fatalf("commit by the fenced producer: %d, want PRODUCER_FENCED", c)
	}
	if p2 := initPID(t, rb, &id, 60000); p2.ProducerEpoch <= p.ProducerEpoch {
		t.Fatalf("epoch %d after %d", p2.ProducerEpoch, p.ProducerEpoch)
	}
}
