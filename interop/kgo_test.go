package interop

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumeAll reads partitions of topic from the start until it has want
// records (or ctx ends), with the given isolation.
func consumeAll(t *testing.T, s *server, topic string, want int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	c := s.client(t, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	ctx := testContext(t, 30*time.Second)
	var got []*kgo.Record
	for len(got) < want {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s before the deadline", len(got), want, topic)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		got = append(got, fs.Records()...)
	}
	return got
}

func produceSync(t testing.TB, c *kgo.Client, rs ...*kgo.Record) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	if err := c.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// TestKgoIdempotentProduceConsume produces idempotently (kgo's default)
// with retries allowed to several partitions, and reads everything back
// read_uncommitted, in order per partition.
func TestKgoIdempotentProduceConsume(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "--partitions", "3")
	p := s.client(t, kgo.DefaultProduceTopic("orders"), kgo.RecordRetries(10), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const n = 300
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Partition: int32(i % 3), Key: []byte(fmt.Sprint(i % 3)), Value: []byte(fmt.Sprintf("v%03d", i))})
	}
	produceSync(t, p, rs...)
	for _, r := range rs {
		if r.ProducerID < 0 {
			t.Fatalf("record %s produced without a producer id (not idempotent)", r.Value)
		}
	}
	got := consumeAll(t, s, "orders", n)
	if len(got) != n {
		t.Fatalf("consumed %d records, want %d", len(got), n)
	}
	next := map[int32]int{0: 0, 1: 1, 2: 2}
	for _, r := range got {
		if want := fmt.Sprintf("v%03d", next[r.Partition]); string(r.Value) != want {
			t.Fatalf("partition %d: got %s, want %s", r.Partition, r.Value, want)
		}
		next[r.Partition] += 3
	}
	s.stop()
	if out, code := runPartlog(t, "verify", dir+"/orders-0", dir+"/orders-1", dir+"/orders-2"); code != 0 {
		t.Fatalf("partlog verify exited %d:\n%s", code, out)
	}
}

// TestKgoTransactions commits one transaction and aborts another across
// two topics and several partitions; read_committed sees only the
// committed records, read_uncommitted sees both; afterwards partlog
// verify passes and dump shows the COMMIT and ABORT markers.
func TestKgoTransactions(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "--partitions", "2")
	ctx := testContext(t, 60*time.Second)
	p := s.client(t, kgo.TransactionalID("txn-test"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(20*time.Second))
	run := func(commit bool, tag string) {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			for _, topic := range []string{"ta", "tb"} {
				r := &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(fmt.Sprintf("%s-%d", tag, i))}
				if err := p.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatalf("produce in transaction: %v", err)
				}
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction (commit %v): %v", commit, err)
		}
	}
	run(true, "committed")
	run(false, "aborted")
	run(true, "committed2")

	for _, topic := range []string{"ta", "tb"} {
		committed := consumeAll(t, s, topic, 20, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		// A second consumer reads the topic until it has the 20 committed
		// records (a slow machine may take seconds to start it: the wait
		// is generous), then a moment longer for anything else that might
		// (wrongly) arrive. The aborted records lie before the second
		// committed transaction's, so a consumer that showed them would
		// show them before it had 20.
		extra := s.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		var all []*kgo.Record
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) && len(all) < 20 {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			all = append(all, extra.PollFetches(pctx).Records()...)
			cancel()
		}
		for grace := time.Now().Add(time.Second); time.Now().Before(grace) && len(all) < 40; {
			pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			all = append(all, extra.PollFetches(pctx).Records()...)
			cancel()
		}
		for _, r := range append(committed, all...) {
			if strings.HasPrefix(string(r.Value), "aborted") {
				t.Fatalf("read_committed consumer of %s saw an aborted record %s", topic, r.Value)
			}
		}
		if len(all) != 20 {
			t.Fatalf("read_committed consumer of %s read %d records, want 20", topic, len(all))
		}
		uncommitted := consumeAll(t, s, topic, 30, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
		aborted := 0
		for _, r := range uncommitted {
			if strings.HasPrefix(string(r.Value), "aborted") {
				aborted++
			}
		}
		if aborted != 10 {
			t.Fatalf("read_uncommitted consumer of %s saw %d aborted records, want 10", topic, aborted)
		}
	}
	s.stop()
	parts := []string{dir + "/ta-0", dir + "/ta-1", dir + "/tb-0", dir + "/tb-1"}
	if out, code := runPartlog(t, append([]string{"verify"}, parts...)...); code != 0 {
		t.Fatalf("partlog verify exited %d:\n%s", code, out)
	}
	out, code := runPartlog(t, "dump", "--deep-iteration", dir+"/ta-0/00000000000000000000.log")
	if code != 0 {
		t.Fatalf("partlog dump exited %d:\n%s", code, out)
	}
	if !strings.Contains(out, "endTxnMarker: COMMIT") || !strings.Contains(out, "endTxnMarker: ABORT") {
		t.Fatalf("dump shows no COMMIT and ABORT markers:\n%s", out)
	}
}

// TestKgoListOffsetsByTimestamp produces records with set timestamps and
// looks offsets up by timestamp and with the special values.
func TestKgoListOffsetsByTimestamp(t *testing.T) {
	s := startServer(t, t.TempDir())
	p := s.client(t, kgo.DefaultProduceTopic("times"))
	base := time.UnixMilli(1_700_000_000_000)
	for i := range 10 {
		produceSync(t, p, &kgo.Record{Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	ctx := testContext(t, 20*time.Second)
	lookup := func(ts int64) (int64, int64) {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "times"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = 0, ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		got := resp.Topics[0].Partitions[0]
		if got.ErrorCode != 0 {
			t.Fatalf("ListOffsets %d: error %d", ts, got.ErrorCode)
		}
		return got.Offset, got.Timestamp
	}
	cases := []struct {
		name       string
		ts         int64
		wantOffset int64
	}{
		{"exact", base.Add(4 * time.Second).UnixMilli(), 4},
		{"between", base.Add(4500 * time.Millisecond).UnixMilli(), 5},
		{"before all", base.Add(-time.Hour).UnixMilli(), 0},
		{"after all", base.Add(time.Hour).UnixMilli(), -1},
		{"earliest", -2, 0},
		{"latest", -1, 10},
		{"max timestamp", -3, 9},
	}
	for _, c := range cases {
		if off, _ := lookup(c.ts); off != c.wantOffset {
			t.Errorf("%s: offset %d, want %d", c.name, off, c.wantOffset)
		}
	}
	// kgo's own consumer start by timestamp.
	c := s.client(t, kgo.ConsumeTopics("times"), kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(base.Add(7*time.Second).UnixMilli())))
	var vals []int
	for len(vals) < 3 {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("no records after the timestamp")
		}
		for _, r := range fs.Records() {
			vals = append(vals, int(r.Value[0]))
		}
	}
	sort.Ints(vals)
	if vals[0] != 7 {
		t.Fatalf("consuming after timestamp 7s started at record %d", vals[0])
	}
}

// TestKgoTransactionTimeout: a kgo transaction left open past its
// timeout is aborted by the server (ABORT markers, producer fenced): the
// producer's late commit fails, read_committed sees none of it, and the
// same transactional id starts afresh.
func TestKgoTransactionTimeout(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	ctx := testContext(t, 60*time.Second)
	p := s.client(t, kgo.TransactionalID("slow-txn"), kgo.DefaultProduceTopic("slow"),
		kgo.TransactionTimeout(1500*time.Millisecond))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("late-%d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(4 * time.Second) // past the timeout and at least one housekeeping tick
	if err := p.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("committing a transaction past its timeout succeeded")
	} else {
		t.Logf("late commit refused: %v", err)
	}
	// A new session of the transactional id commits normally.
	p2 := s.client(t, kgo.TransactionalID("slow-txn"), kgo.DefaultProduceTopic("slow"))
	if err := p2.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceSync(t, p2, &kgo.Record{Value: []byte("fresh")})
	if err := p2.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit of the new session: %v", err)
	}
	got := consumeAll(t, s, "slow", 1, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if len(got) != 1 || string(got[0].Value) != "fresh" {
		t.Fatalf("read_committed after the timeout: %d records, first %q", len(got), got[0].Value)
	}
	s.stop()
	out, code := runPartlog(t, "dump", "--deep-iteration", dir+"/slow-0/00000000000000000000.log")
	if code != 0 || !strings.Contains(out, "endTxnMarker: ABORT") || !strings.Contains(out, "endTxnMarker: COMMIT") {
		t.Fatalf("dump (exit %d) lacks the timeout's ABORT or the COMMIT:\n%s", code, out)
	}
}
