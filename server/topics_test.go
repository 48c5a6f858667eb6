package server

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestNewPartitionsReadyToAppend: a created partition records its leader
// epoch at its start before any produce, as Kafka's leader does when it
// takes it (its checkpoint then holds 0 0), and has its active segment's
// index files, as Kafka's segment does from its creation: a partition's
// first produce creates and fsyncs no file. OffsetForLeaderEpoch answers
// epoch 0 ending at 0, as Kafka's does.
func TestNewPartitionsReadyToAppend(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "fresh", 3)
	for n := int32(0); n < 3; n++ {
		l, ok := ts.dir.Log(partlog.TopicPartition{Topic: "fresh", Partition: n})
		if !ok {
			t.Fatalf("partition %d not open", n)
		}
		if got := l.LeaderEpochs(); len(got) != 1 || got[0] != (partlog.EpochEntry{Epoch: 0, StartOffset: 0}) {
			t.Fatalf("partition %d: epochs %v", n, got)
		}
		for _, name := range []string{"00000000000000000000.index", "00000000000000000000.timeindex"} {
			if _, err := os.Stat(filepath.Join(l.Dir(), name)); err != nil {
				t.Fatalf("partition %d: %v", n, err)
			}
		}
	}
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.Version = 4
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "fresh"
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.LeaderEpoch, op.CurrentLeaderEpoch = 0, 0
	ot.Partitions = append(ot.Partitions, op)
	oe.Topics = append(oe.Topics, ot)
	r := roundTrip[*kmsg.OffsetForLeaderEpochResponse](rc, oe)
	if p := r.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LeaderEpoch != 0 || p.EndOffset != 0 {
		t.Fatalf("OffsetForLeaderEpoch of a new partition: %+v", p)
	}
}

// BenchmarkNewTopicProduce creates a topic of 1 000 partitions and sends
// two Produce requests holding a batch of 100 records of 100 B for each
// partition, acks=1, as a producer to a new topic does first (the second
// batch of a segment is the first with an index entry); it reports
// the creation's and the produce's milliseconds apart (create-ms,
// produce-ms) besides their sum. Iterations are slow: -benchtime=2x.
func BenchmarkNewTopicProduce(b *testing.B) {
	const parts = 1000
	s, err := Open(Config{Dir: b.TempDir(), MaxPartitions: (b.N + 1) * parts})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	spec := batch.NewBatchSpec(0)
	rs := make([]batch.RecordSpec, 100)
	for i := range rs {
		rs[i] = batch.RecordSpec{Timestamp: 1, Value: make([]byte, 100)}
	}
	var bl batch.Builder
	recs, err := bl.AppendBatch(nil, &spec, rs)
	if err != nil {
		b.Fatal(err)
	}
	send := func(req kmsg.Request, resp kmsg.Response) {
		if _, err := c.Write(frameOf(req, 1)); err != nil {
			b.Fatal(err)
		}
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			b.Fatal(err)
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[:])-4)
		if _, err := io.ReadFull(r, body); err != nil {
			b.Fatal(err)
		}
		if resp.IsFlexible() {
			body = body[1:]
		}
		if err := resp.ReadFrom(body); err != nil {
			b.Fatal(err)
		}
	}
	var create, produce time.Duration
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("t%d", i)
		ct := kmsg.NewPtrCreateTopicsRequest()
		ct.Version = 4
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, 1
		ct.Topics = append(ct.Topics, rt)
		ctResp := kmsg.NewPtrCreateTopicsResponse()
		ctResp.Version = ct.Version
		start := time.Now()
		send(ct, ctResp)
		if code := ctResp.Topics[0].ErrorCode; code != 0 {
			b.Fatalf("create %s: error %d", name, code)
		}
		created := time.Now()
		create += created.Sub(start)
		req := produceReq(name, 0, 1, recs)
		for p := int32(1); p < parts; p++ {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, recs
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
		}
		for range 2 { // the second batch of a segment has an index entry
			pr := kmsg.NewPtrProduceResponse()
			pr.Version = req.Version
			send(req, pr)
			for _, p := range pr.Topics[0].Partitions {
				if p.ErrorCode != 0 {
					b.Fatalf("produce %s-%d: error %d", name, p.Partition, p.ErrorCode)
				}
			}
		}
		produce += time.Since(created)
	}
	b.ReportMetric(float64(create.Milliseconds())/float64(b.N), "create-ms/op")
	b.ReportMetric(float64(produce.Milliseconds())/float64(b.N), "produce-ms/op")
}
