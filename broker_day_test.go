package partlog_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/producerstate"
)

// dayClock is the broker's clock, moved by the test.
type dayClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *dayClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *dayClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// produce builds a client batch of n records stamped ts, ts+1, ...;
// pid < 0 means a plain (non-idempotent) producer.
func produce(t *testing.T, pid int64, epoch int16, seq int32, txn bool, n int, ts int64) []byte {
	t.Helper()
	spec := batch.NewBatchSpec(0)
	if pid >= 0 {
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, epoch, seq
	}
	spec.Transactional = txn
	recs := make([]batch.RecordSpec, n)
	for i := range recs {
		recs[i] = batch.RecordSpec{Timestamp: ts + int64(i), Key: fmt.Appendf(nil, "k%d", i), Value: make([]byte, 100)}
	}
	var b batch.Builder
	out, err := b.AppendBatch(nil, &spec, recs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func marker(pid int64, epoch int16, commit bool, ts int64) []byte {
	return batch.AppendEndTxnMarkerBatch(nil, batch.ControlSpec{PartitionLeaderEpoch: -1, Timestamp: ts,
		ProducerID: pid, ProducerEpoch: epoch}, commit, 0)
}

// fetchAll reads [from, upTo) as a fetch loop does and returns the
// batches' (base, last, producer id, control) in order.
type fetched struct {
	base, last, pid int64
	control         bool
	maxTs           int64
}

func fetchAll(t *testing.T, l *partlog.Log, from, upTo int64) []fetched {
	t.Helper()
	var out []fetched
	for next := from; next < upTo; {
		v, err := l.Read(next, 4096, upTo)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Records) == 0 {
			v.Release()
			break
		}
		it := batch.NewIterator(v.Records, 0)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			out = append(out, fetched{b.BaseOffset(), b.LastOffset(), b.ProducerID(), b.IsControl(), b.MaxTimestamp()})
			next = b.NextOffset()
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		v.Release()
	}
	return out
}

// TestBrokerDay plays a broker's day on one log directory through the
// public API only: create three partitions, idempotent and transactional
// produce from several goroutines, fetch at the high watermark and at the
// last stable offset with the aborted transactions, long-poll, look up
// offsets by timestamp, answer OffsetForLeaderEpoch, follow a leader and
// truncate on a leader change, apply retention, delete a partition,
// close, and reopen with the high watermarks intact.
func TestBrokerDay(t *testing.T) {
	root := t.TempDir()
	clock := &dayClock{now: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}
	cache, err := partlog.NewMappingCache(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	template := &partlog.Options{SegmentBytes: 16 << 10, MaxIndexBytes: 4096, IndexIntervalBytes: 1024,
		PrefaultBytes: -1, MappingCache: cache, Now: clock.Now, RetentionMs: 3_600_000, FileDeleteDelayMs: 10}
	audit := *template
	audit.MessageTimestampType = partlog.LogAppendTime
	dirOpts := &partlog.DirOptions{Log: template, PartitionOptions: func(tp partlog.TopicPartition) *partlog.Options {
		if tp.Topic == "audit" {
			return &audit
		}
		return nil
	}}
	d, err := partlog.OpenDir(root, dirOpts)
	if err != nil {
		t.Fatal(err)
	}
	ordersID, auditID := partlog.TopicID{0xA1}, partlog.TopicID{0xB2}

	// 1. Three partitions.
	leader, err := d.Create("orders", 0, ordersID, nil)
	if err != nil {
		t.Fatal(err)
	}
	follower, err := d.Create("orders", 1, ordersID, nil)
	if err != nil {
		t.Fatal(err)
	}
	auditLog, err := d.Create("audit", 0, auditID, nil)
	if err != nil {
		t.Fatal(err)
	}

	// 2. Produce at leader epoch 1: three idempotent producers on their
	// own goroutines, and the audit topic (LogAppendTime) beside them.
	start := clock.Now().UnixMilli()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for p := int64(0); p < 3; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := int32(0); seq < 60; seq += 3 {
				if _, err := leader.AppendAsLeader(produce(t, 100+p, 0, seq, false, 3, start+int64(seq)), 1); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			if _, err := auditLog.AppendAsLeader(produce(t, -1, 0, 0, false, 2, 5), 1); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A retried batch is a duplicate: Kafka answers success with the
	// original offsets.
	_, err = leader.AppendAsLeader(produce(t, 100, 0, 57, false, 3, start+57), 1)
	var dup *producerstate.DuplicateSequenceError
	if !errors.As(err, &dup) || partlog.KafkaErrorCode(err) != 46 || dup.LastOffset-dup.FirstOffset != 2 {
		t.Fatalf("retry: %v (code %d)", err, partlog.KafkaErrorCode(err))
	}
	// A sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER.
	if _, err := leader.AppendAsLeader(produce(t, 100, 0, 99, false, 1, start), 1); partlog.KafkaErrorCode(err) != 45 {
		t.Fatalf("gap: %v", err)
	}
	if got := leader.LogEndOffset(); got != 180 {
		t.Fatalf("LEO %d, want 180", got)
	}

	// 3. Transactions at leader epoch 2: producer 200 aborts, 201 commits,
	// 202 stays open.
	clock.Add(time.Minute)
	txnTs := clock.Now().UnixMilli()
	mustLeader := func(b []byte) partlog.AppendInfo {
		t.Helper()
		info, err := leader.AppendAsLeader(b, 2)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	mustCoord := func(b []byte) {
		t.Helper()
		if _, err := leader.AppendAsCoordinator(b, 2); err != nil {
			t.Fatal(err)
		}
	}
	aborted := mustLeader(produce(t, 200, 0, 0, true, 4, txnTs))
	mustLeader(produce(t, 201, 0, 0, true, 4, txnTs+10))
	mustCoord(marker(200, 0, false, txnTs+20))
	mustCoord(marker(201, 0, true, txnTs+21))
	open := mustLeader(produce(t, 202, 0, 0, true, 2, txnTs+30))
	mustLeader(produce(t, -1, 0, 0, false, 5, txnTs+40))
	leo := leader.LogEndOffset()

	// 4. Long-poll: a delayed fetch at the high watermark is woken when
	// the followers' progress moves it.
	woken := make(chan int64, 1)
	go func() {
		hw, err := leader.WaitHighWatermark(context.Background(), 100)
		if err != nil {
			t.Error(err)
		}
		woken <- hw
	}()
	leader.SetHighWatermark(100)
	select {
	case hw := <-woken:
		t.Fatalf("woken at %d, not above 100", hw)
	case <-time.After(20 * time.Millisecond):
	}
	leader.SetHighWatermark(leo)
	if hw := <-woken; hw != leo {
		t.Fatalf("woken at %d, want %d", hw, leo)
	}

	// 5. Fetch at the high watermark (read_uncommitted) and at the last
	// stable offset (read_committed) with the aborted transactions.
	o := leader.Offsets()
	if o.HighWatermark != leo || o.LastStableOffset != open.FirstOffset || o.LogEndOffset != leo || o.LogStartOffset != 0 {
		t.Fatalf("offsets %+v (open txn at %d)", o, open.FirstOffset)
	}
	if got := fetchAll(t, leader, 0, o.HighWatermark); got[len(got)-1].last != leo-1 {
		t.Fatalf("fetch at HW ends at %d", got[len(got)-1].last)
	}
	committed := fetchAll(t, leader, 0, o.LastStableOffset)
	if last := committed[len(committed)-1]; !last.control || last.last != open.FirstOffset-1 {
		t.Fatalf("fetch at LSO ends with %+v", last)
	}
	txns, err := leader.AbortedTransactions(0, o.LastStableOffset)
	if err != nil || len(txns) != 1 || txns[0].ProducerID != 200 || txns[0].FirstOffset != aborted.FirstOffset {
		t.Fatalf("aborted transactions %+v, %v", txns, err)
	}
	// Producer 202 commits; the last stable offset catches up.
	mustCoord(marker(202, 0, true, txnTs+50))
	leader.SetHighWatermark(leader.LogEndOffset())
	if o := leader.Offsets(); o.LastStableOffset != o.HighWatermark {
		t.Fatalf("after commit: %+v", o)
	}

	// 6. ListOffsets.
	for _, c := range []struct {
		ts     int64
		offset int64
		epoch  int32
	}{
		{start, 0, 1},
		{txnTs, aborted.FirstOffset, 2},
		{txnTs + 40, open.FirstOffset + 2, 2},
		{partlog.ListEarliest, 0, 1},
		{partlog.ListLatest, leader.LogEndOffset(), 2},
		{partlog.ListMaxTimestamp, leader.LogEndOffset() - 1, 2}, // 202's COMMIT marker is the newest
	} {
		r, ok, err := leader.OffsetForTimestamp(c.ts)
		if err != nil || !ok || r.Offset != c.offset || r.LeaderEpoch != c.epoch {
			t.Fatalf("ListOffsets(%d) = %+v %v %v, want offset %d epoch %d", c.ts, r, ok, err, c.offset, c.epoch)
		}
	}
	if r, ok, err := auditLog.OffsetForTimestamp(6); err != nil || !ok || r.Timestamp < start {
		t.Fatalf("LogAppendTime topic: %+v %v %v", r, ok, err)
	}

	// 7. The follower (orders-1) copies the leader up to its high
	// watermark, then answers OffsetForLeaderEpoch like the leader.
	for next := follower.LogEndOffset(); next < leader.HighWatermark(); {
		v, err := leader.Read(next, 8192, leader.HighWatermark())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follower.AppendAsFollower(v.Records); err != nil {
			t.Fatal(err)
		}
		v.Release()
		next = follower.LogEndOffset()
	}
	follower.SetHighWatermark(follower.LogEndOffset())
	for _, epoch := range []int32{0, 1, 2, 3} {
		le, lo := leader.EndOffsetForEpoch(epoch)
		fe, fo := follower.EndOffsetForEpoch(epoch)
		if le != fe || lo != fo {
			t.Fatalf("epoch %d: leader %d/%d follower %d/%d", epoch, le, lo, fe, fo)
		}
	}
	if e, off := leader.EndOffsetForEpoch(1); e != 1 || off != 180 {
		t.Fatalf("EndOffsetForEpoch(1) = %d, %d", e, off)
	}

	// 8. Leader change: the new leader's epoch 2 ended inside our last
	// batch; the follower truncates there (the whole batch goes) and
	// follows the new leader at epoch 3.
	var inside fetched // the follower's last data batch of several records
	for _, b := range fetchAll(t, follower, 0, follower.LogEndOffset()) {
		if b.last > b.base && !b.control {
			inside = b
		}
	}
	cut := inside.base + 1
	newLEO, err := follower.TruncateAt(cut)
	if err != nil || newLEO != inside.base {
		t.Fatalf("TruncateAt(%d) = %d, %v; want %d", cut, newLEO, err, inside.base)
	}
	if follower.HighWatermark() > newLEO {
		t.Fatalf("high watermark %d above the new end %d", follower.HighWatermark(), newLEO)
	}
	b := produce(t, -1, 0, 0, false, 3, clock.Now().UnixMilli())
	v := batch.View(b)
	v.SetBaseOffset(newLEO)
	v.SetPartitionLeaderEpoch(3)
	if _, err := follower.AppendAsFollower(b); err != nil {
		t.Fatal(err)
	}
	if e, off := follower.EndOffsetForEpoch(2); e != 2 || off != newLEO {
		t.Fatalf("after the leader change: EndOffsetForEpoch(2) = %d, %d", e, off)
	}

	// 9. Retention: two hours later the old segments of the leader go,
	// but never past the high watermark.
	if err := leader.Roll(); err != nil {
		t.Fatal(err)
	}
	clock.Add(2 * time.Hour)
	mustLeader(produce(t, -1, 0, 0, false, 2, clock.Now().UnixMilli()))
	leader.SetHighWatermark(leader.LogEndOffset())
	segsBefore := len(leader.Segments())
	n, err := leader.DeleteOldSegments(clock.Now())
	if err != nil || n == 0 || len(leader.Segments()) != segsBefore-n {
		t.Fatalf("retention deleted %d of %d segments: %v", n, segsBefore, err)
	}
	if o := leader.Offsets(); o.LogStartOffset != leader.Segments()[0] || o.LogStartOffset != o.LogEndOffset-2 {
		t.Fatalf("after retention: %+v segments %v", o, leader.Segments())
	}
	if r, _, _ := leader.OffsetForTimestamp(partlog.ListEarliest); r.Offset != leader.LogStartOffset() {
		t.Fatalf("earliest %d, log start %d", r.Offset, leader.LogStartOffset())
	}
	if _, err := leader.Read(0, 100, leader.HighWatermark()); partlog.KafkaErrorCode(err) != 1 {
		t.Fatalf("read below the log start: %v", err)
	}

	// 10. Delete the audit partition.
	if err := d.Delete("audit", 0); err != nil {
		t.Fatal(err)
	}

	// 11. Close and reopen: the high watermarks, log starts and topic ids
	// come back, and reads at the high watermark return the data.
	want := map[partlog.TopicPartition]partlog.Offsets{
		{Topic: "orders", Partition: 0}: leader.Offsets(),
		{Topic: "orders", Partition: 1}: follower.Offsets(),
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = partlog.OpenDir(root, dirOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !d.CleanShutdown() || len(d.Logs()) != 2 || len(d.Problems()) != 0 {
		t.Fatalf("reopened: clean %v logs %d problems %+v", d.CleanShutdown(), len(d.Logs()), d.Problems())
	}
	for tp, w := range want {
		l, ok := d.Log(tp)
		if !ok {
			t.Fatalf("%s missing", tp)
		}
		got := l.Offsets()
		if got.HighWatermark != w.HighWatermark || got.LogStartOffset != w.LogStartOffset || got.LogEndOffset != w.LogEndOffset || got.LastStableOffset != w.LastStableOffset {
			t.Fatalf("%s: reopened %+v, closed with %+v", tp, got, w)
		}
		if l.TopicID() != ordersID {
			t.Fatalf("%s: topic id %v", tp, l.TopicID())
		}
		if got := fetchAll(t, l, got.LogStartOffset, got.HighWatermark); len(got) == 0 || got[len(got)-1].last != w.HighWatermark-1 {
			t.Fatalf("%s: fetch at HW after reopen: %d batches", tp, len(got))
		}
	}
}
