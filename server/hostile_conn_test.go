package server

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Regression tests of the hostile-client review (issue 34): what one
// client can make the server allocate, hold or stop.

// frame prefixes a request body (header v1 with client id "h") with its
// size.
func frame(key, version int16, corr int32, body []byte) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = append(b, 0, 1, 'h')
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// totalAlloc returns the bytes the process has allocated so far.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// expectClosed reads from c until it is closed by the server (or fails
// the test after d).
func expectClosed(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection still open after %v", d)
		}
	}
}

// TestHostileCountsAllocateLittle: a Produce whose topic array claims
// millions of entries (kmsg allocated them before finding the bytes
// missing: 3.2 GB for a 100 MiB request), and a valid one made of a
// million empty partition entries, end the connection having allocated
// about the frame's size, not tens of times it.
func TestHostileCountsAllocateLittle(t *testing.T) {
	ts := startTest(t, Config{MaxRequestEntries: 10_000})
	const size = 8 << 20
	lying := []byte{0xff, 0xff, 0, 1, 0, 0, 0x27, 0x10} // v8: no transactional id, acks 1, timeout
	lying = binary.BigEndian.AppendUint32(lying, size/2)
	lying = append(lying, make([]byte, size-len(lying))...)

	many := []byte{0xff, 0xff, 0, 1, 0, 0, 0x27, 0x10, 0, 0, 0, 1, 0, 1, 't'}
	const parts = 1 << 20 // entries of 8 bytes: partition, null records
	many = binary.BigEndian.AppendUint32(many, parts)
	for i := 0; i < parts; i++ {
		many = append(many, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff)
	}
	for name, body := range map[string][]byte{"lying count": lying, "a million entries": many} {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			f := frame(0, 8, 1, body)
			runtime.GC()
			before := totalAlloc()
			if _, err := c.Write(f); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, c, 30*time.Second)
			if got := totalAlloc() - before; got > 4*uint64(len(f)) {
				t.Fatalf("a %d-byte request allocated %d bytes", len(f), got)
			}
		})
	}
	// The server still serves.
	rc := dial(t, ts.addr)
	createTopic(t, rc, "after", 1)
}

// TestHostileSlowFramesHoldWhatArrived: connections that declare 100 MiB
// frames and send a byte hold a few KiB each (the whole declared size
// was allocated before a byte arrived: 50 slow connections took 1.8 GiB),
// and a frame that stops arriving ends its connection after the idle
// timeout.
func TestHostileSlowFramesHoldWhatArrived(t *testing.T) {
	ts := startTest(t, Config{IdleTimeout: 300 * time.Millisecond})
	runtime.GC()
	before := totalAlloc()
	var conns []net.Conn
	for i := 0; i < 20; i++ {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte{0x06, 0x40, 0, 0, 0}); err != nil { // 100 MiB, then one byte
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	time.Sleep(100 * time.Millisecond)
	if got := totalAlloc() - before; got > 16<<20 {
		t.Fatalf("20 connections declaring 100 MiB frames made the server allocate %d bytes", got)
	}
	for _, c := range conns {
		expectClosed(t, c, 10*time.Second)
	}
}

// TestHostileSlowFrameGrowsWithWhatArrived: a connection that declares a
// 100 MiB frame and sends 512 KiB of it, the worst case of frameGrowth
// (the buffer full, so grown eightfold before another byte comes), makes
// the server allocate about nine times that, the buffers on the way
// included; not the declared size, as Kafka does.
func TestHostileSlowFrameGrowsWithWhatArrived(t *testing.T) {
	ts := startTest(t, Config{IdleTimeout: 2 * time.Second})
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const sent = 512 << 10
	frame := append([]byte{0x06, 0x40, 0, 0}, make([]byte, sent)...) // 100 MiB declared
	runtime.GC()
	before := totalAlloc()
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	// Until the server has read what was sent and its allocations settle.
	var got uint64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		g := totalAlloc() - before
		if g == got && g >= sent {
			break
		}
		got = g
	}
	if got < sent {
		t.Fatalf("the server allocated %d bytes for %d bytes sent: they were not read", got, sent)
	}
	if got > 10*sent {
		t.Fatalf("%d bytes of a declared 100 MiB frame made the server allocate %d bytes", sent, got)
	}
	expectClosed(t, c, 10*time.Second)
}

// TestHostileIdleConnections: a connection that sends nothing is closed
// after the idle timeout (connections.max.idle.ms); one waiting for a
// long poll longer than that is not.
func TestHostileIdleConnections(t *testing.T) {
	ts := startTest(t, Config{IdleTimeout: 300 * time.Millisecond})
	createTopic(t, dial(t, ts.addr), "idle", 1)

	idle, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	start := time.Now()
	expectClosed(t, idle, 10*time.Second)
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("idle connection closed after %v, before the idle timeout", d)
	}

	rc := dial(t, ts.addr)
	poll := fetchReq("idle", 0, 0, 1500, 1, 1<<20, 1<<20, 0)
	start = time.Now()
	r := roundTrip[*kmsg.FetchResponse](rc, poll)
	if d := time.Since(start); d < time.Second || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("long poll of 1.5 s answered after %v: %+v", d, r.Topics[0].Partitions[0])
	}
	// And the connection that waited serves on.
	roundTrip[*kmsg.ApiVersionsResponse](rc, kmsg.NewPtrApiVersionsRequest())
}

// TestHostileFetchDuplicatesAndCap: a small fetch naming one partition
// many times with the largest limits (it returned 387 MiB: the partition
// read once per entry, no cap) is answered with the partition once, at
// most Config.FetchMaxBytes plus one batch, as Kafka answers it
// (fetchData keeps one entry per partition; fetch.max.bytes caps the
// request's MaxBytes).
func TestHostileFetchDuplicatesAndCap(t *testing.T) {
	ts := startTest(t, Config{FetchMaxBytes: 256 << 10})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "dup", 2)
	for i := 0; i < 32; i++ {
		for p := int32(0); p < 2; p++ {
			if r := roundTrip[*kmsg.ProduceResponse](rc, produceReq("dup", p, 1, records(t, 1, -1, 0, 0, false, 32<<10))); r.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatal(r.Topics[0].Partitions[0].ErrorCode)
			}
		}
	}
	req := fetchReq("dup", 0, 0, 0, 1, 1<<30, 1<<30, 0)
	rt := req.Topics[0]
	for i := 0; i < 19; i++ {
		rt.Partitions = append(rt.Partitions, rt.Partitions[0])
	}
	// The last entry of partition 0 asks from offset 5; partition 1 sits
	// between its entries, in a topic entry of its own.
	rt.Partitions[19].FetchOffset = 5
	other := kmsg.NewFetchRequestTopicPartition()
	other.Partition, other.PartitionMaxBytes = 1, 1<<30
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "dup", Partitions: rt.Partitions[:10]},
		{Topic: "dup", Partitions: []kmsg.FetchRequestTopicPartition{other}},
		{Topic: "dup", Partitions: rt.Partitions[10:]}}
	resp := roundTrip[*kmsg.FetchResponse](rc, req)
	total := 0
	var got []int32
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			got = append(got, p.Partition)
			total += len(p.RecordBatches)
		}
	}
	if len(got) != 2 || got[0] != 0 || got[1] != 1 || len(resp.Topics) != 1 {
		t.Fatalf("answered partitions %v in %d topic entries, want [0 1] in one", got, len(resp.Topics))
	}
	if total > 256<<10+40<<10 {
		t.Fatalf("response of %d bytes, fetch.max.bytes 256 KiB", total)
	}
	first := resp.Topics[0].Partitions[0].RecordBatches
	if len(first) < 61 || int64(binary.BigEndian.Uint64(first)) != 5 {
		t.Fatal("partition 0 not read from the last entry's offset 5")
	}
}

// TestHostileLongPollOneWaiter: a long-poll fetch of thousands of
// partition entries waits without a goroutine per entry (it started one
// per entry, duplicates included, again at every high-watermark move).
func TestHostileLongPollOneWaiter(t *testing.T) {
	ts := startTest(t, Config{})
	rc := dial(t, ts.addr)
	createTopic(t, rc, "lp", 50)
	req := fetchReq("lp", 0, 0, 2000, 1, 1<<20, 1<<20, 0)
	for i := 0; i < 5000; i++ {
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.PartitionMaxBytes = int32(i%50), 1<<20
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, p)
	}
	before := runtime.NumGoroutine()
	corr := rc.send(req)
	time.Sleep(200 * time.Millisecond)
	if n := runtime.NumGoroutine() - before; n > 10 {
		t.Fatalf("a waiting long poll of 5000 entries runs %d goroutines", n)
	}
	// A produce elsewhere ends the poll with data.
	prod := dial(t, ts.addr)
	roundTrip[*kmsg.ProduceResponse](prod, produceReq("lp", 7, 1, records(t, 1, -1, 0, 0, false, 10)))
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	if got := rc.recv(resp); got != corr {
		t.Fatalf("correlation %d, want %d", got, corr)
	}
	n := 0
	for _, p := range resp.Topics[0].Partitions {
		if len(p.RecordBatches) > 0 {
			n++
			if p.Partition != 7 {
				t.Fatalf("data for partition %d", p.Partition)
			}
		}
	}
	if n != 1 || len(resp.Topics[0].Partitions) != 50 {
		t.Fatalf("%d partitions with data of %d answered", n, len(resp.Topics[0].Partitions))
	}
}

// TestHostileLargeResponseNotKept: after a large response the writer
// does not keep its buffer (a 387 MiB fetch response stayed with its
// connection), while a small one is reused.
func TestHostileLargeResponseNotKept(t *testing.T) {
	s := startTest(t, Config{})
	client, srv := net.Pipe()
	defer client.Close()
	go func() { _, _ = io.Copy(io.Discard, client) }()
	cc := &connCtx{s: s.Server, c: srv}
	q := make(chan *pending, 2)
	// A large response the writer encodes whole (a fetch's record bytes
	// are written from their mappings, not copied: fetch_write.go).
	big := kmsg.NewPtrMetadataResponse()
	big.Version = 9
	name := strings.Repeat("n", 200)
	for i := 0; i < 20_000; i++ {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = &name
		big.Topics = append(big.Topics, mt)
	}
	small := kmsg.NewPtrApiVersionsResponse()
	for _, resp := range []kmsg.Response{small, big} {
		p := &pending{resp: resp, done: make(chan struct{})}
		close(p.done)
		q <- p
	}
	close(q)
	cc.writeResponses(q, func() {})
	if cap(cc.wbuf) > retainedResponseBytes {
		t.Fatalf("the writer keeps a %d-byte buffer after a 4 MiB response", cap(cc.wbuf))
	}
	q2 := make(chan *pending, 1)
	p := &pending{resp: small, done: make(chan struct{})}
	close(p.done)
	q2 <- p
	close(q2)
	cc.writeResponses(q2, func() {})
	if cc.wbuf == nil {
		t.Fatal("a small response's buffer is not kept for the next one")
	}
}

// flakyListener fails its first accepts with the errors given.
type flakyListener struct {
	net.Listener
	mu   sync.Mutex
	errs []error
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		l.mu.Unlock()
		return nil, err
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// TestServeRetriesAcceptErrors: an accept failing with "too many open
// files" (20 000 idle connections, or partitions at the descriptor
// limit) made Serve return and `partlog serve` exit; it is retried with
// a growing pause and logged, and the server serves on.
func TestServeRetriesAcceptErrors(t *testing.T) {
	var logMu sync.Mutex
	var lines []string
	s, err := Open(Config{Dir: t.TempDir(), Logf: func(format string, args ...any) {
		logMu.Lock()
		lines = append(lines, format)
		logMu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	fl := &flakyListener{Listener: ln, errs: []error{emfile, emfile, emfile}}
	done := make(chan error, 1)
	go func() { done <- s.Serve(fl) }()
	rc := dial(t, ln.Addr().String())
	roundTrip[*kmsg.ApiVersionsResponse](rc, kmsg.NewPtrApiVersionsRequest())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if len(lines) < 3 {
		t.Fatalf("%d log lines for 3 accept failures", len(lines))
	}
	// A listener that fails for good still ends Serve.
	s2 := startTest(t, Config{})
	bad := &flakyListener{Listener: ln, errs: []error{errors.New("broken listener")}}
	if err := s2.Serve(bad); err == nil {
		t.Fatal("Serve returned nil on a permanent accept failure")
	}
}

// TestMaxConnections: at the connection bound the next client waits for
// a slot, as at Kafka's max.connections, and is served once one closes.
func TestMaxConnections(t *testing.T) {
	ts := startTest(t, Config{MaxConnections: 2})
	a, b := dial(t, ts.addr), dial(t, ts.addr)
	roundTrip[*kmsg.ApiVersionsResponse](a, kmsg.NewPtrApiVersionsRequest())
	roundTrip[*kmsg.ApiVersionsResponse](b, kmsg.NewPtrApiVersionsRequest())
	c := dial(t, ts.addr)
	c.send(kmsg.NewPtrApiVersionsRequest())
	_ = c.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := c.r.Peek(1); err == nil {
		t.Fatal("a third connection was served with MaxConnections 2")
	}
	_ = a.c.Close()
	_ = c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	c.recv(kmsg.NewPtrApiVersionsResponse())
}
