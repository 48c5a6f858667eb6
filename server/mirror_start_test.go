package server

import (
	"context"
	"errors"
	"maps"
	"net"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMirrorResumesAfterRestart: a destination closed while mirroring
// fetches again after Open from its state file, from its log end.
func TestMirrorResumesAfterRestart(t *testing.T) {
	a := startTest(t, Config{})
	dir := t.TempDir()
	b := startTest(t, Config{Dir: dir})
	ra := dial(t, a.addr)
	createTopic(t, ra, "r", 1)
	produceOK(t, ra, "r", 0, records(t, 3, -1, 0, 0, false, 10))
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"r"}, Name: "dr"}); err != nil {
		t.Fatal(err)
	}
	waitMirrored(t, b, a, "r", 0)
	b.close(t)
	produceOK(t, ra, "r", 0, records(t, 2, -1, 0, 0, false, 10))
	b = startTest(t, Config{Dir: dir})
	waitMirrored(t, b, a, "r", 0)
	st := b.MirrorStatus()
	if len(st) != 1 || st[0].State != "MIRRORING" || st[0].Mirror != "dr" || st[0].Source != a.addr || st[0].Session != 1 {
		t.Fatalf("after restart: %+v", st)
	}
	if _, err := b.StopMirror(context.Background(), MirrorStopRequest{Topics: []string{"r"}, Policy: "ABORT_OPEN"}); err != nil {
		t.Fatal(err)
	}
	b.close(t)
	b = startTest(t, Config{Dir: dir})
	if st := b.MirrorStatus(); len(st) != 1 || st[0].State != "STOPPED" || st[0].BarrierOffset != 5 {
		t.Fatalf("after the second restart: %+v", st)
	}
	var links int
	b.meta.view(func(m *metaState) { links = len(m.Mirrors) })
	if links != 0 {
		t.Errorf("state file keeps %d links after the stop", links)
	}
}

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
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"pm"}, AllowTruncation: true}); err != nil {
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
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"lt"}, AllowTruncation: true}); err != nil {
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

// TestMirrorStartAgainIsNoError: a start run again over partitions that
// already mirror in the link (the way to pick up the partitions a first
// start could not start, or a FAILED one) answered each of them "state
// transition not allowed", so the CLI exited 4 although every partition
// mirrors. They are left alone and reported as mirroring.
func TestMirrorStartAgainIsNoError(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{})
	ra := dial(t, a.addr)
	createTopic(t, ra, "again", 2)
	produceOK(t, ra, "again", 0, records(t, 2, -1, 0, 0, false, 10))
	req := MirrorStartRequest{Source: a.addr, Topics: []string{"again"}}
	if _, err := b.StartMirror(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	waitMirrored(t, b, a, "again", 0)
	st, err := b.StartMirror(context.Background(), req)
	if err != nil {
		t.Fatalf("second start: %v", err)
	}
	if len(st) != 2 || st[0].State != "MIRRORING" || st[1].State != "MIRRORING" || st[0].Session != 1 {
		t.Fatalf("second start: status %+v", st)
	}
	produceOK(t, ra, "again", 0, records(t, 1, -1, 0, 0, false, 10))
	waitMirrored(t, b, a, "again", 0)
}

// TestMirrorFailedStartKeepsLinkAdmin: a start of more topics on a
// running link with a wrong --source-admin fails (its lookups fail), but
// it had already written that address into the link's state, so the
// running topics' restart lookups (a crash at INTENT) asked the wrong
// address from then on.
func TestMirrorFailedStartKeepsLinkAdmin(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{})
	ra := dial(t, a.addr)
	createTopic(t, ra, "ka", 1)
	createTopic(t, ra, "kb", 1)
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"ka"}}); err != nil {
		t.Fatal(err)
	}
	// Nothing listens there: the lookup fails at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bad := ln.Addr().String()
	ln.Close()
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, SourceAdmin: bad, Topics: []string{"kb"}}); err == nil {
		t.Fatal("a start with an unreachable source admin succeeded")
	}
	var admin string
	var topics []string
	b.meta.view(func(m *metaState) {
		for _, l := range m.Mirrors {
			admin, topics = l.SourceAdmin, l.Topics
		}
	})
	if admin != "" || len(topics) != 1 || topics[0] != "ka" {
		t.Fatalf("link state after the failed start: admin %q topics %v, want \"\" [ka]", admin, topics)
	}
}

// TestMirrorCopiesTopicConfigs: a topic the mirror creates gets the
// configs the source set on it (it rolled and retained with this
// server's defaults instead); a topic the operator created first keeps
// its own.
func TestMirrorCopiesTopicConfigs(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{})
	ra, rb := dial(t, a.addr), dial(t, b.addr)
	set := map[string]string{"segment.bytes": "1048576", "retention.ms": "3600000", "message.timestamp.type": "LogAppendTime"}
	createTopicWith(t, ra, "cfg", 2, set)
	createTopicWith(t, ra, "mine", 1, set)
	createTopicWith(t, rb, "mine", 1, map[string]string{"retention.ms": "60000"})
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"cfg", "mine"}}); err != nil {
		t.Fatal(err)
	}
	if got := b.meta.topicConfigs("cfg"); !maps.Equal(got, set) {
		t.Errorf("mirrored topic's configs %v, want the source's %v", got, set)
	}
	if got := b.meta.topicConfigs("mine"); len(got) != 1 || got["retention.ms"] != "60000" {
		t.Errorf("existing topic's configs %v, want its own", got)
	}
	if p, _ := b.partitionFor("cfg", 1); p == nil || p.segmentBytes != 1<<20 {
		t.Errorf("mirrored partition's segment.bytes not applied")
	}
}

// TestMirrorFailedStartRemovesCreatedTopic: a start none of whose
// partitions started left the topic it had created behind (empty, with
// this server's defaults); an operator fixing the cause and starting
// again then got a topic the start had not made. The start removes it.
func TestMirrorFailedStartRemovesCreatedTopic(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{})
	createTopic(t, dial(t, a.addr), "gone", 2)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, SourceAdmin: dead, Topics: []string{"gone"}}); err == nil {
		t.Fatal("a start with an unreachable source admin succeeded")
	}
	if b.topicByName("gone") != nil {
		t.Fatal("the failed start left the topic it created")
	}
	if _, err := b.StartMirror(context.Background(), MirrorStartRequest{Source: a.addr, Topics: []string{"gone"}}); err != nil {
		t.Fatal(err)
	}
	if b.topicByName("gone") == nil {
		t.Fatal("no topic after a start that worked")
	}
}
