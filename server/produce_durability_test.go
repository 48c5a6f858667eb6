package server

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/internal/testhook"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// slowFlushes makes every flush of a log under dir take d before its
// fsyncs, for the rest of the test.
func slowFlushes(t *testing.T, dir string, d time.Duration) {
	f := func(logDir string) error {
		if strings.HasPrefix(logDir, dir) {
			time.Sleep(d)
		}
		return nil
	}
	testhook.LogFlushFault.Store(&f)
	t.Cleanup(func() { testhook.LogFlushFault.Store(nil) })
}

// TestAcksAllAnsweredWhenDurable: with Fsync, an acks=-1 produce is
// answered only once its records are durable (the recovery point has
// passed them), and so is the retry of a batch already written by an
// acks=1 produce whose sync is still running: a duplicate is not
// acknowledged before the batch it duplicates is durable.
// TestFsyncServerPopulatesNothing: a --fsync server's template for every
// partition's options (Config.Log after Open) keeps no prefault window
// unless the caller set one (every partition is synced from its first
// append: pages populated ahead would be dirty zeros for its
// fdatasyncs); without --fsync the engine's default stays.
func TestFsyncServerPopulatesNothing(t *testing.T) {
	for _, tc := range []struct {
		fsync bool
		set   int64
		want  int64
	}{
		{fsync: true, want: -1},
		{fsync: true, set: 1 << 20, want: 1 << 20},
		{fsync: false, want: partlog.DefaultPrefaultBytes},
		{fsync: false, set: -1, want: -1},
	} {
		s := startTest(t, Config{Fsync: tc.fsync, Log: &partlog.Options{PrefaultBytes: tc.set}})
		if got := s.cfg.Log.Effective().PrefaultBytes; got != tc.want {
			t.Errorf("fsync %v, template %d: partitions' PrefaultBytes %d, want %d", tc.fsync, tc.set, got, tc.want)
		}
	}
}

func TestAcksAllAnsweredWhenDurable(t *testing.T) {
	dir := t.TempDir()
	ts := startTest(t, Config{Dir: dir, Fsync: true})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "d", 1)
	l, _ := ts.Dir().Log(partlog.TopicPartition{Topic: "d", Partition: 0})
	slowFlushes(t, dir, 300*time.Millisecond)

	r := roundTrip[*kmsg.ProduceResponse](rc, produceReq("d", 0, -1, records(t, 2, -1, 0, 0, false, 10)))
	if p := r.Topics[0].Partitions[0]; p.ErrorCode != 0 || l.RecoveryPoint() < p.BaseOffset+2 {
		t.Fatalf("acks=-1 answered %+v with the recovery point at %d: before its fsync", p, l.RecoveryPoint())
	}

	pid := initPID(t, rc, nil, 0)
	b := records(t, 3, pid.ProducerID, pid.ProducerEpoch, 0, false, 10)
	first := roundTrip[*kmsg.ProduceResponse](rc, produceReq("d", 0, 1, b)).Topics[0].Partitions[0]
	retry := roundTrip[*kmsg.ProduceResponse](rc, produceReq("d", 0, -1, b)).Topics[0].Partitions[0]
	if retry.ErrorCode != 0 || retry.BaseOffset != first.BaseOffset {
		t.Fatalf("retry answered %+v, want the first write's offset %d", retry, first.BaseOffset)
	}
	if rp := l.RecoveryPoint(); rp < first.BaseOffset+3 {
		t.Fatalf("the retried duplicate was acknowledged with the recovery point at %d, below its end %d", rp, first.BaseOffset+3)
	}
}

// TestListOffsetsLatestByVersion: with Fsync, records not yet durable
// are above the high watermark; ListOffsets v2+ answers the high
// watermark as the latest offset, v0 and v1 (no isolation level) the
// log end, as Kafka does.
func TestListOffsetsLatestByVersion(t *testing.T) {
	dir := t.TempDir()
	ts := startTest(t, Config{Dir: dir, Fsync: true})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "lv", 1)
	slowFlushes(t, dir, 2*time.Second)
	if c := roundTrip[*kmsg.ProduceResponse](rc, produceReq("lv", 0, 1, records(t, 3, -1, 0, 0, false, 10))).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("produce: %d", c)
	}
	latest := func(version int16) int64 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = version
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lv"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return roundTrip[*kmsg.ListOffsetsResponse](rc, req).Topics[0].Partitions[0].Offset
	}
	if v1, v2 := latest(1), latest(2); v1 != 3 || v2 != 0 {
		t.Fatalf("latest before the sync: v1 %d (want the log end 3), v2 %d (want the high watermark 0)", v1, v2)
	}
}

// TestEndTxnAnsweredWhenMarkersDurable: with Fsync, EndTxn is answered
// once the transaction's markers are durable.
func TestEndTxnAnsweredWhenMarkersDurable(t *testing.T) {
	dir := t.TempDir()
	ts := startTest(t, Config{Dir: dir, Fsync: true})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "em", 1)
	l, _ := ts.Dir().Log(partlog.TopicPartition{Topic: "em", Partition: 0})
	id := "em"
	p := initPID(t, rc, &id, 60000)
	addPartition(t, rc, id, p.ProducerID, p.ProducerEpoch, "em", 0)
	roundTrip[*kmsg.ProduceResponse](rc, txnProduceReq(id, "em", 0, -1, records(t, 2, p.ProducerID, p.ProducerEpoch, 0, true, 10)))
	slowFlushes(t, dir, 300*time.Millisecond)
	if c := endTxn(t, rc, id, p.ProducerID, p.ProducerEpoch, true); c != 0 {
		t.Fatalf("commit: %d", c)
	}
	if rp := l.RecoveryPoint(); rp < 3 {
		t.Fatalf("EndTxn answered with the recovery point at %d, below the COMMIT marker's end 3", rp)
	}
}

// TestCloseUnderDurableLoad: with Fsync, a server under acks=-1
// producers writing to many partitions stops when closed (partlog serve
// --fsync of 1 000 partitions once outlived the 20 s a benchmark gave
// it after SIGTERM: its partitions closed one after another, a few
// fsyncs each; partlog's TestDirCloseInParallel pins that part). The
// bound is for "it stops", not for its speed.
func TestCloseUnderDurableLoad(t *testing.T) {
	const parts, producers = 100, 4
	ts := startTest(t, Config{Fsync: true})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "sd", parts)
	recs := records(t, 10, -1, 0, 0, false, 100)
	var wg sync.WaitGroup
	var answered atomic.Int64
	for w := range producers {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := produceReq("sd", int32(w), -1, recs)
		for p := int32(w + producers); p < parts; p += producers {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, recs
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
		}
		frame := frameOf(req, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := bufio.NewReader(c)
			var hdr [4]byte
			for {
				if _, err := c.Write(frame); err != nil {
					return
				}
				if _, err := io.ReadFull(r, hdr[:]); err != nil {
					return
				}
				if _, err := r.Discard(int(binary.BigEndian.Uint32(hdr[:]))); err != nil {
					return
				}
				answered.Add(1)
			}
		}()
	}
	for answered.Load() < 2*producers {
		time.Sleep(10 * time.Millisecond)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		ts.close(t)
	}()
	select {
	case <-closed:
	case <-time.After(60 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("Close under acks=-1 load did not return in 60 s:\n%s", buf[:runtime.Stack(buf, true)])
	}
	wg.Wait()
}
