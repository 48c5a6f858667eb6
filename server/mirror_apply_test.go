package server

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/mirror"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestWholeBatchesFrom: what a fetched response's bytes are cut to.
func TestWholeBatchesFrom(t *testing.T) {
	at := func(base int64, n int) []byte {
		spec := batch.NewBatchSpec(base)
		rs := make([]batch.RecordSpec, n)
		var bb batch.Builder
		out, err := bb.AppendBatch(nil, &spec, rs)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	b0, b1, b2 := at(0, 2), at(2, 3), at(5, 1)
	all := append(append(append([]byte{}, b0...), b1...), b2...)
	cases := []struct {
		name string
		in   []byte
		from int64
		want []byte
	}{
		{"empty", nil, 0, nil},
		{"all", all, 0, all},
		{"cut inside the last", all[:len(all)-3], 0, all[:len(b0)+len(b1)]},
		{"cut inside the header", all[:len(b0)+10], 0, b0},
		{"skip below from", all, 2, all[len(b0):]},
		{"from inside a batch", all, 3, all[len(b0):]},
		{"all below", all, 6, nil},
		{"garbage", bytes.Repeat([]byte{0xff}, 100), 0, nil},
	}
	for _, c := range cases {
		if got := wholeBatchesFrom(c.in, c.from); !bytes.Equal(got, c.want) {
			t.Errorf("%s: %d bytes, want %d", c.name, len(got), len(c.want))
		}
	}
}

// FuzzWholeBatchesFrom: fetched bytes come from another server. The
// cut never panics and returns a run of whole frames taken from the
// input, starting where a frame starts.
func FuzzWholeBatchesFrom(f *testing.F) {
	spec := batch.NewBatchSpec(3)
	var bb batch.Builder
	one, err := bb.AppendBatch(nil, &spec, make([]batch.RecordSpec, 2))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(one, int64(0))
	f.Add(append(append([]byte{}, one...), one[:20]...), int64(4))
	f.Add([]byte{}, int64(-1))
	f.Fuzz(func(t *testing.T, b []byte, from int64) {
		got := wholeBatchesFrom(b, from)
		if len(got) == 0 {
			return
		}
		start := len(b) - len(got)
		for start >= 0 && !bytes.Equal(b[start:start+len(got)], got) {
			start--
		}
		if start < 0 {
			t.Fatalf("output is not a part of the input")
		}
		for rest := got; len(rest) > 0; {
			n, err := batch.Frame(rest)
			if err != nil {
				t.Fatalf("output holds a partial frame: %v", err)
			}
			rest = rest[n:]
		}
	})
}

// TestMirrorFsyncHighWatermark: with Fsync the mirrored records become
// visible (high watermark) once durable, and they do.
func TestMirrorFsyncHighWatermark(t *testing.T) {
	a := startTest(t, Config{})
	b := startTest(t, Config{Fsync: true})
	ra := dial(t, a.addr)
	createTopic(t, ra, "f", 1)
	produceOK(t, ra, "f", 0, records(t, 3, -1, 0, 0, false, 10))
	mirrorTopic(t, b, a, "f")
	l := logOf(t, b, "f", 0)
	deadline := time.Now().Add(20 * time.Second)
	for l.HighWatermark() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("high watermark %d, want 3", l.HighWatermark())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rp := l.RecoveryPoint(); rp < 3 {
		t.Fatalf("high watermark 3 above the durable offset %d", rp)
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
