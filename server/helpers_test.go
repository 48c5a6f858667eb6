package server

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testServer is a Server on 127.0.0.1 with a free port.
type testServer struct {
	*Server
	addr string
	done chan error
}

func startTest(t testing.TB, cfg Config) *testServer {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { ts.done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ts.close(t)
		// Registered after the test's own cleanups of the same server
		// only run later: a test that reopens the directory has closed it
		// again by now.
		if err := partlog.Check(cfg.Dir, nil); err != nil {
			t.Errorf("consistency check of %s: %v", cfg.Dir, err)
		}
	})
	return ts
}

func (ts *testServer) close(t testing.TB) {
	t.Helper()
	if ts.done == nil {
		return
	}
	if err := ts.Server.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := <-ts.done; err != nil {
		t.Errorf("serve: %v", err)
	}
	ts.done = nil
}

// frameClient sends one prepared Produce frame over and over and reads
// each answer's bytes without decoding them (a benchmark's client: it
// allocates nothing per frame).
type frameClient struct {
	c     net.Conn
	r     *bufio.Reader
	frame []byte
	resp  []byte
}

// dialProduce connects to addr with a Produce frame (acks) of one batch
// of records records of size bytes for each of partitions 0..parts-1 of
// topic "bench", and sends it once (a server with AutoCreate creates the
// topic). It returns the client and the batch's size.
func dialProduce(tb testing.TB, addr string, acks int16, parts, records, size int) (*frameClient, int) {
	tb.Helper()
	spec := batch.NewBatchSpec(0)
	rs := make([]batch.RecordSpec, records)
	for i := range rs {
		rs[i] = batch.RecordSpec{Timestamp: 1, Value: make([]byte, size)}
	}
	var bl batch.Builder
	recs, err := bl.AppendBatch(nil, &spec, rs)
	if err != nil {
		tb.Fatal(err)
	}
	req := produceReq("bench", 0, acks, recs)
	for p := 1; p < parts; p++ {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = int32(p), recs
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	fc := &frameClient{c: c, r: bufio.NewReader(c), frame: frameOf(req, 1), resp: make([]byte, 1<<20)}
	fc.roundTrip(tb)
	return fc, len(recs)
}

// roundTrip sends the frame and reads the answer.
func (fc *frameClient) roundTrip(tb testing.TB) {
	if _, err := fc.c.Write(fc.frame); err != nil {
		tb.Fatal(err)
	}
	if _, err := io.ReadFull(fc.r, fc.resp[:4]); err != nil {
		tb.Fatal(err)
	}
	size := int(binary.BigEndian.Uint32(fc.resp[:4]))
	if size > len(fc.resp) {
		tb.Fatalf("a %d-byte answer", size)
	}
	if _, err := io.ReadFull(fc.r, fc.resp[:size]); err != nil {
		tb.Fatal(err)
	}
}

// rawConn speaks the protocol with kmsg types, one request at a time or
// pipelined.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	r    *bufio.Reader
	corr int32
}

func dial(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

// send writes req at its version and returns the correlation id used.
func (rc *rawConn) send(req kmsg.Request) int32 {
	rc.t.Helper()
	rc.corr++
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(rc.corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatal(err)
	}
	return rc.corr
}

// recv reads one response into resp (at resp's version) and returns its
// correlation id.
func (rc *rawConn) recv(resp kmsg.Response) int32 {
	rc.t.Helper()
	var hdr [8]byte
	if _, err := io.ReadFull(rc.r, hdr[:]); err != nil {
		rc.t.Fatalf("read response: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:])-4)
	if _, err := io.ReadFull(rc.r, body); err != nil {
		rc.t.Fatal(err)
	}
	if resp.IsFlexible() && resp.Key() != 18 {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		rc.t.Fatalf("decode %T: %v", resp, err)
	}
	return int32(binary.BigEndian.Uint32(hdr[4:]))
}

// roundTrip sends req and reads its response.
func roundTrip[R kmsg.Response](rc *rawConn, req kmsg.Request) R {
	rc.t.Helper()
	corr := rc.send(req)
	resp := req.ResponseKind().(R)
	if got := rc.recv(resp); got != corr {
		rc.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	return resp
}

// records builds one batch of n records (producer pid/epoch/seq when pid
// >= 0).
func records(t *testing.T, n int, pid int64, epoch int16, seq int32, txn bool, size int) []byte {
	t.Helper()
	return recordsAt(t, time.Now().UnixMilli(), n, pid, epoch, seq, txn, size)
}

// recordsAt is records with every record's timestamp ts.
func recordsAt(t *testing.T, ts int64, n int, pid int64, epoch int16, seq int32, txn bool, size int) []byte {
	t.Helper()
	spec := batch.NewBatchSpec(0)
	if pid >= 0 {
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, epoch, seq
		spec.Transactional = txn
	}
	var rs []batch.RecordSpec
	for i := 0; i < n; i++ {
		rs = append(rs, batch.RecordSpec{Timestamp: ts, Value: make([]byte, size)})
	}
	var b batch.Builder
	out, err := b.AppendBatch(nil, &spec, rs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func produceReq(topic string, part int32, acks int16, recs []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, acks, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, recs
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// txnProduceReq is produceReq for a transactional producer of
// transactional id id.
func txnProduceReq(id, topic string, part int32, acks int16, recs []byte) *kmsg.ProduceRequest {
	req := produceReq(topic, part, acks, recs)
	req.TransactionID = &id
	return req
}

func fetchReq(topic string, part int32, offset int64, maxWait, minBytes, maxBytes, partMax int32, isolation int8) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.IsolationLevel = 11, maxWait, minBytes, maxBytes, isolation
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = part, offset, partMax
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func createTopic(t *testing.T, rc *rawConn, name string, parts int32) {
	t.Helper()
	createTopicWith(t, rc, name, parts, nil)
}

// createTopicWith creates a topic with configs.
func createTopicWith(t *testing.T, rc *rawConn, name string, parts int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 5
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp := roundTrip[*kmsg.CreateTopicsResponse](rc, req)
	if c := resp.Topics[0].ErrorCode; c != 0 {
		t.Fatalf("create %s: error %d", name, c)
	}
}
