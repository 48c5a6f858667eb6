package server

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// frameOf encodes req as a client sends it (size, header, body).
func frameOf(req kmsg.Request, corr int32) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 0)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// TestProduceFramesReuseBuffer: a connection reads each Produce frame
// into the buffer of the one before, so a producer's steady stream of
// requests allocates a fraction of its bytes (each frame was a new
// buffer grown from 64 KiB: about twice its size), and every batch is
// stored as sent, though the buffer it came in was overwritten since.
// The larger frame is about kgo's largest (a 1 MB batch): grown with
// append's rounding, its buffer ended past retainedRequestBytes and was
// dropped after every frame.
func TestProduceFramesReuseBuffer(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "frames", 1)
	// Two requests of different sizes and contents, alternated.
	var frames [2][]byte
	var sent [2][]byte
	for i := range frames {
		spec := batch.NewBatchSpec(0)
		rs := make([]batch.RecordSpec, 8)
		for j := range rs {
			rs[j] = batch.RecordSpec{Timestamp: 1, Value: bytes.Repeat([]byte{byte(0x11 * (i + 1))}, (40+82*i)<<10)}
		}
		var bl batch.Builder
		recs, err := bl.AppendBatch(nil, &spec, rs)
		if err != nil {
			t.Fatal(err)
		}
		sent[i] = recs
		frames[i] = frameOf(produceReq("frames", 0, 1, recs), int32(i))
	}
	const n = 40
	var resp [64]byte
	roundTripRaw := func(f []byte) {
		if _, err := rc.c.Write(f); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(rc.r, resp[:4]); err != nil {
			t.Fatal(err)
		}
		size := int(binary.BigEndian.Uint32(resp[:4]))
		if size > len(resp) {
			t.Fatalf("produce response of %d bytes", size)
		}
		if _, err := io.ReadFull(rc.r, resp[:size]); err != nil {
			t.Fatal(err)
		}
	}
	roundTripRaw(frames[0]) // the first frame's buffer is allocated
	before := totalAlloc()
	for i := 1; i < n; i++ {
		roundTripRaw(frames[i%2])
	}
	frameBytes := uint64((n - 1) / 2 * (len(frames[0]) + len(frames[1])))
	if got := totalAlloc() - before; got > frameBytes/4 {
		t.Fatalf("%d Produce frames of %d bytes allocated %d bytes", n-1, frameBytes, got)
	}
	var off int64
	for i := 0; i < n; i++ {
		r := roundTrip[*kmsg.FetchResponse](rc, fetchReq("frames", 0, off, 0, 1, 4<<20, 4<<20, 0))
		got := r.Topics[0].Partitions[0].RecordBatches
		want := sent[i%2]
		if len(got) < len(want) || !bytes.Equal(got[61:len(want)], want[61:]) {
			t.Fatalf("batch %d: stored records differ from the ones sent", i)
		}
		off += 8
	}
}

// TestLargeProduceFramesKeptWhileBusy: a Produce frame larger than
// retainedRequestBytes (4 MiB: a batch of about 1 MB for each of four
// partitions) is read into the buffer of the frame before while frames
// keep coming (each was a new buffer grown from 64 KiB, twice its size
// in allocations), and the buffer is let go once the connection is quiet
// for largeFrameKeep (the next frame grows a new one).
func TestLargeProduceFramesKeptWhileBusy(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	const parts = 4
	createTopic(t, rc, "large", parts)
	spec := batch.NewBatchSpec(0)
	rs := make([]batch.RecordSpec, 1000)
	for i := range rs {
		rs[i] = batch.RecordSpec{Timestamp: 1, Value: bytes.Repeat([]byte{0x5a}, 1000)}
	}
	var bl batch.Builder
	recs, err := bl.AppendBatch(nil, &spec, rs)
	if err != nil {
		t.Fatal(err)
	}
	req := produceReq("large", 0, 1, recs)
	for p := int32(1); p < parts; p++ {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, recs
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	frame := frameOf(req, 1)
	if len(frame) <= retainedRequestBytes {
		t.Fatalf("a frame of %d bytes is not a large one", len(frame))
	}
	send := func() {
		t.Helper()
		if _, err := rc.c.Write(frame); err != nil {
			t.Fatal(err)
		}
		var resp kmsg.ProduceResponse
		resp.Version = req.Version
		rc.recv(&resp)
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
			}
		}
	}
	send() // the first frame's buffer is allocated
	const n = 10
	before := totalAlloc()
	for range n {
		send()
	}
	if got := totalAlloc() - before; got > uint64(n*len(frame)/4) {
		t.Fatalf("%d back-to-back frames of %d bytes allocated %d bytes", n, len(frame), got)
	}
	time.Sleep(largeFrameKeep + 500*time.Millisecond)
	before = totalAlloc()
	send()
	if got := totalAlloc() - before; got < uint64(len(frame)) {
		t.Fatalf("a frame after %v of quiet allocated %d bytes: the large buffer was kept", largeFrameKeep, got)
	}
}

// BenchmarkProduceRoundTrip sends one connection's Produce frames (one
// batch of 8 000 records of 100 B, acks=1; one of kgo's largest, a batch
// of about 1 MB; and requests of 4 and 16 such batches, one per
// partition, as a producer with a large max.request.size sends them;
// and one of 1 000 small batches, one per partition, as kgo sends them
// when spread over 1 000 partitions) to
// a server in this process and reads each answer; -benchmem shows what a
// frame costs the server in allocations (the client side allocates
// nothing per frame).
func BenchmarkProduceRoundTrip(b *testing.B) {
	for _, bc := range []struct {
		name                 string
		parts, records, size int
	}{{"8000x100B", 1, 8000, 100}, {"kgo-1MB", 1, 975, 1000}, {"4MiB", 4, 1020, 1000}, {"16MiB", 16, 1020, 1000}, {"1000x30x100B", 1000, 30, 100}} {
		b.Run(bc.name, func(b *testing.B) { benchmarkProduceRoundTrip(b, bc.parts, bc.records, bc.size) })
	}
}

// BenchmarkProduceFirstFrame sends one request of 16 batches of about
// 1 MB (one per partition) on a new connection per operation, the frame
// no kept buffer fits: what a producer's first large request costs the
// server, the buffer grown as the bytes arrive (readFrame). The client's
// dial is in B/op too (a few hundred bytes).
func BenchmarkProduceFirstFrame(b *testing.B) {
	ts := startTest(b, Config{AutoCreate: true, DefaultPartitions: 16})
	fc, n := dialProduce(b, ts.addr, 1, 16, 1020, 1000)
	b.SetBytes(int64(16 * n))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			b.Fatal(err)
		}
		fc.c = c
		fc.r.Reset(c)
		fc.roundTrip(b)
		_ = c.Close()
	}
}

func benchmarkProduceRoundTrip(b *testing.B, parts, records, size int) {
	ts := startTest(b, Config{AutoCreate: true, DefaultPartitions: int32(parts)})
	fc, n := dialProduce(b, ts.addr, 1, parts, records, size)
	b.SetBytes(int64(parts * n))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		fc.roundTrip(b)
	}
}
