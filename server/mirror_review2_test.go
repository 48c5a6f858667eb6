package server

import (
	"bytes"
	"context"
	"maps"
	"net"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/mirror"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMirrorFetchLargerThanSegment: the destination topic exists with a
// small segment.bytes (1 MiB, Kafka's minimum; an operator who creates
// the topic first to give it the source's configs). One fetch brings up
// to 4 MiB of whole batches, each below 1 MiB. Appended in one call they
// were refused ("append larger than a segment") and the partition went
// FAILED; the batches fit, so they must be appended segment by segment.
func TestMirrorFetchLargerThanSegment(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{})
	ra, rb := dial(t, a.addr), dial(t, b.addr)
	createTopic(t, ra, "seg", 1)
	for i := 0; i < 5; i++ {
		produceOK(t, ra, "seg", 0, records(t, 1, -1, 0, 0, false, 600<<10))
	}
	createTopicWith(t, rb, "seg", 1, map[string]string{"segment.bytes": "1048576"})
	mirrorTopic(t, b, a, "seg")
	p, _ := b.partitionFor("seg", 0)
	if st := p.mirror.State(); st != mirror.StateMirroring {
		t.Fatalf("state %s (%v), want MIRRORING", st, p.mirror.Failure())
	}
	la, lb := logOf(t, a, "seg", 0), logOf(t, b, "seg", 0)
	va, err := la.Read(0, 64<<20, la.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer va.Release()
	var got []byte
	for off := int64(0); off < lb.LogEndOffset(); {
		v, err := lb.Read(off, 64<<20, lb.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v.Records...)
		off = endOfBatches(v.Records)
		v.Release()
	}
	if !bytes.Equal(va.Records, got) {
		t.Fatalf("B's batches differ from A's (%d bytes, want %d)", len(got), len(va.Records))
	}
}

// TestBatchesUpTo: prefixes of whole batches within the limit, at least
// one batch; unframed bytes go whole.
func TestBatchesUpTo(t *testing.T) {
	b1 := records(t, 1, -1, 0, 0, false, 100)
	b2 := records(t, 1, -1, 0, 0, false, 200)
	all := append(append(append([]byte{}, b1...), b2...), b1...)
	for _, c := range []struct {
		name  string
		in    []byte
		limit int64
		head  int
	}{
		{"all fit", all, int64(len(all)), len(all)},
		{"two fit", all, int64(len(b1) + len(b2)), len(b1) + len(b2)},
		{"one fits", all, int64(len(b1) + len(b2) - 1), len(b1)},
		{"first larger than limit", all, 10, len(b1)},
		{"unframed", []byte{1, 2, 3}, 10, 3},
		{"empty", nil, 10, 0},
	} {
		head, rest := batchesUpTo(c.in, c.limit)
		if len(head) != c.head || len(head)+len(rest) != len(c.in) {
			t.Errorf("%s: head %d rest %d, want head %d of %d", c.name, len(head), len(rest), c.head, len(c.in))
		}
	}
}

// controlBatches counts the control batches of a partition's log.
func controlBatches(t *testing.T, ts *testServer, topic string) int {
	t.Helper()
	l := logOf(t, ts, topic, 0)
	v, err := l.Read(l.LogStartOffset(), 64<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	n := 0
	for b := v.Records; len(b) > 0; {
		size, err := batch.Frame(b)
		if err != nil {
			t.Fatal(err)
		}
		if batch.View(b[:size]).IsControl() {
			n++
		}
		b = b[size:]
	}
	return n
}

// TestMirrorPreparedTransactionMarkersOnce: a local transaction is
// prepared over a writable partition and one that mirrors (how it stays
// so: the window between a start's end of local transactions and the
// partition becoming read-only, or a restart, see
// TestMirrorOpenWithTransactionPreparedOnMirroredPartition). The
// housekeeping retry wrote the marker of the writable partition again at
// every tick (one control batch a second for as long as the other one
// mirrors), since a failed completion kept every partition pending. Each
// partition must get one marker.
func TestMirrorPreparedTransactionMarkersOnce(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{Tick: time.Hour})
	ra, rb := dial(t, a.addr), dial(t, b.addr)
	createTopic(t, ra, "pm2", 1)
	produceOK(t, ra, "pm2", 0, records(t, 2, -1, 0, 0, false, 10))
	createTopic(t, rb, "lx", 1)
	id := "local2"
	p := initPID(t, rb, &id, 60000)
	if c := addPartition(t, rb, id, p.ProducerID, p.ProducerEpoch, "lx", 0); c != 0 {
		t.Fatalf("AddPartitionsToTxn: %d", c)
	}
	roundTrip[*kmsg.ProduceResponse](rb, txnProduceReq(id, "lx", 0, -1, records(t, 1, p.ProducerID, p.ProducerEpoch, 0, true, 10)))
	mirrorTopic(t, b, a, "pm2")
	if err := b.meta.update(func(st *metaState) {
		tx := st.Transactions[id]
		tx.State = txnPrepareCommit
		tx.Partitions = []partlog.TopicPartition{{Topic: "lx", Partition: 0}, {Topic: "pm2", Partition: 0}}
	}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		b.txns.retryPrepared()
	}
	if n := controlBatches(t, b, "lx"); n != 1 {
		t.Fatalf("lx-0 has %d markers after 3 retries while pm2-0 mirrors, want 1", n)
	}
	if _, err := b.StopMirror(context.Background(), MirrorStopRequest{Topics: []string{"pm2"}}); err != nil {
		t.Fatal(err)
	}
	b.txns.retryPrepared()
	var state string
	b.meta.view(func(st *metaState) { state = st.Transactions[id].State })
	if state != txnCompleteCommit {
		t.Fatalf("after the stop the transaction is %s", state)
	}
	if n := controlBatches(t, b, "lx"); n != 1 {
		t.Fatalf("lx-0 has %d markers, want 1", n)
	}
	if n := controlBatches(t, b, "pm2"); n != 2 { // the barrier and the COMMIT
		t.Fatalf("pm2-0 has %d control batches, want 2 (barrier, marker)", n)
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

// TestMirrorStatusSourceDown: once the source stops answering, status
// showed the lag of the last fetch that worked (0 after catching up)
// beside the error, so an operator read "caught up" while the source
// might be taking writes elsewhere. The lag is unknown (-1) until a
// fetch works again.
func TestMirrorStatusSourceDown(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{})
	ra := dial(t, a.addr)
	createTopic(t, ra, "down", 1)
	produceOK(t, ra, "down", 0, records(t, 2, -1, 0, 0, false, 10))
	mirrorTopic(t, b, a, "down")
	deadline := time.Now().Add(20 * time.Second)
	for st := b.MirrorStatus(); len(st) != 1 || st[0].Lag != 0; st = b.MirrorStatus() {
		if time.Now().After(deadline) {
			t.Fatalf("caught up, status %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.close(t)
	for {
		st := b.MirrorStatus()
		if len(st) != 1 {
			t.Fatalf("status %+v", st)
		}
		if st[0].Error != "" {
			if st[0].Lag != -1 || st[0].SourceHighWatermark != -1 {
				t.Fatalf("source down (%s) but lag %d, source high watermark %d", st[0].Error, st[0].Lag, st[0].SourceHighWatermark)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no error in status %+v after the source closed", st)
		}
		time.Sleep(20 * time.Millisecond)
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
