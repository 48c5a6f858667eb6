package server

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// durableClient is one connection to a --fsync server of its own, with
// one acks=all Produce frame of a batch for each of its partitions.
type durableClient struct {
	s     *Server
	c     net.Conn
	r     *bufio.Reader
	frame []byte
	resp  []byte
}

func newDurableClient(b *testing.B, log *partlog.Options, parts, records, size int) *durableClient {
	s, err := Open(Config{Dir: b.TempDir(), AutoCreate: true, DefaultPartitions: int32(parts), Fsync: true, Log: log})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	spec := batch.NewBatchSpec(0)
	rs := make([]batch.RecordSpec, records)
	for i := range rs {
		rs[i] = batch.RecordSpec{Timestamp: 1, Value: make([]byte, size)}
	}
	var bl batch.Builder
	recs, err := bl.AppendBatch(nil, &spec, rs)
	if err != nil {
		b.Fatal(err)
	}
	req := produceReq("bench", 0, -1, recs)
	for p := 1; p < parts; p++ {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = int32(p), recs
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	d := &durableClient{s: s, c: c, r: bufio.NewReader(c), frame: frameOf(req, 1), resp: make([]byte, 1<<20)}
	d.roundTrip(b) // the topic is created
	return d
}

func (d *durableClient) roundTrip(b *testing.B) {
	if _, err := d.c.Write(d.frame); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(d.r, d.resp[:4]); err != nil {
		b.Fatal(err)
	}
	size := int(binary.BigEndian.Uint32(d.resp[:4]))
	if _, err := io.ReadFull(d.r, d.resp[:size]); err != nil {
		b.Fatal(err)
	}
}

func (d *durableClient) close() {
	_ = d.c.Close()
	_ = d.s.Close()
}

// cpuNow is the process's user+system CPU time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDurableWritePath sends acks=all Produce requests of one 8 KiB
// batch (8 records of 1 KiB) to each of 100 partitions, as kgo does to a
// `serve --fsync` over 100 partitions, to two servers in turn: one with
// the engine's default write path (stores into the mapping, pages
// populated ahead), one writing with pwritev and populating nothing. It
// reports each one's wall time and process CPU per request and their
// ratios (default/pwrite: above 1, pwrite is cheaper).
func BenchmarkDurableWritePath(b *testing.B) {
	const parts, records, size = 100, 8, 1024
	def := newDurableClient(b, nil, parts, records, size)
	defer def.close()
	pw := newDurableClient(b, &partlog.Options{WritePath: partlog.WritePwrite, PrefaultBytes: -1}, parts, records, size)
	defer pw.close()
	var wall, cpu [2]time.Duration
	clients := [2]*durableClient{def, pw}
	b.SetBytes(int64(parts * records * size))
	b.ResetTimer()
	for i := range b.N {
		for k := range 2 {
			j := (i + k) % 2
			t0, c0 := time.Now(), cpuNow()
			clients[j].roundTrip(b)
			wall[j] += time.Since(t0)
			cpu[j] += cpuNow() - c0
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(wall[0])/n, "default-ns/op")
	b.ReportMetric(float64(wall[1])/n, "pwrite-ns/op")
	b.ReportMetric(float64(cpu[0])/n, "default-cpu-ns/op")
	b.ReportMetric(float64(cpu[1])/n, "pwrite-cpu-ns/op")
	b.ReportMetric(float64(wall[0])/float64(wall[1]), "default/pwrite")
	b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "default/pwrite-cpu")
}
