package interop

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/partlog/partlog/interop/kafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkBrokers puts `partlog serve` and Apache Kafka 4.4 side by
// side on this machine: the same clients and loads against both, each
// cell measured on the two brokers alternately (partlog, Kafka, then
// Kafka, partlog, …; -benchtime Nx gives N rounds per cell).
//
// Clients: Kafka's own ProducerPerformance, ConsumerPerformance and
// EndToEndLatency (in one client JVM with a fixed 1 GiB heap, warmed up
// with the brokers before the first cell), and kgo (this process).
// Loads: produce, consume (from the page cache) and end-to-end latency
// at a fixed rate, over 1, 100 and 1 000 partitions, with 100 B and
// 1 KiB records, acks=1, acks=all, and durable: `serve --fsync` (acks=all
// waits for fdatasync, group commit) against Kafka topics with
// flush.messages=1 (log.flush.interval.messages=1: every append is
// flushed before it is acknowledged).
//
// Each measurement reports records/s and MB/s, latency percentiles
// (produce: from send to acknowledgement; end-to-end: from send to
// receipt), the broker process's CPU seconds (utime+stime from /proc,
// the whole JVM for Kafka) per GB of record values and records per CPU
// second, the client's CPU per GB, and the broker's peak RSS over the
// measurement. Each cell reports the partlog/Kafka ratio of each
// figure, the median of the per-round ratios.
//
// Without -brokers.full or -brokers.window it runs one small cell of
// each kind (CI's benchmark smoke, -short). With
// -brokers.report=../bench/RESULTS.md it writes the table and a chart
// (brokers.svg beside it) into that file. The full run (about half an
// hour on 2 cores: go test runs each cell once, then -benchtime 3x runs
// its three measured rounds):
//
//	cd interop && go test -run '^$' -bench BenchmarkBrokers -benchtime 3x -timeout 4h \
//	    -brokers.full -brokers.report ../bench/RESULTS.md
//
// The quiet-window run (about ten minutes: every partition count, size
// and acknowledgement, fewer records, kgo everywhere and Kafka's tools
// at one partition, one round per cell with the first broker alternated
// from cell to cell):
//
//	cd interop && go test -run '^$' -bench BenchmarkBrokers -benchtime 1x -timeout 1h \
//	    -brokers.window -brokers.report ../bench/RESULTS.md
func BenchmarkBrokers(b *testing.B) {
	in := kafka.Need(b)
	m := brokersMatrix()
	e := newBrokersEnv(b, in)
	e.warmUp(b, m)
	cells := brokerCells(m, testing.Short())
	for i, c := range cells {
		if m == windowMatrix && c.parts != e.sharedParts {
			e.dropShared(b)
			e.prepareShared(b, c.parts)
		}
		b.Run(c.name(), func(b *testing.B) {
			res := e.runCell(b, c, i, b.N)
			res.report(b)
			e.mu.Lock()
			e.results[c.name()] = res
			e.mu.Unlock()
		})
	}
	e.dropShared(b)
	if *brokersReport != "" {
		var rs []*cellResult
		for _, c := range cells {
			if r := e.results[c.name()]; r != nil {
				rs = append(rs, r)
			}
		}
		if err := writeBrokersReport(*brokersReport, rs, e.describe(m)); err != nil {
			b.Fatal(err)
		}
	}
}

var (
	brokersFull    = flag.Bool("brokers.full", false, "BenchmarkBrokers: run the whole matrix (1, 100, 1 000 partitions × 100 B, 1 KiB × acks=1, acks=all, durable × both clients), not one small cell of each kind")
	brokersWindow  = flag.Bool("brokers.window", false, "BenchmarkBrokers: the quiet-window matrix (every partition count, size and acks with kgo, Kafka's tools at one partition, fewer records: about ten minutes with -benchtime 1x)")
	brokersReport  = flag.String("brokers.report", "", "BenchmarkBrokers: write the table into this RESULTS.md (between its brokers markers) and the chart beside it (brokers.svg)")
	brokersProfile = flag.String("brokers.profile", "", "BenchmarkBrokers: a directory for partlog serve's CPU and allocation profiles (serve --cpuprofile, --memprofile)")
	brokersNote    = flag.String("brokers.note", "", "BenchmarkBrokers: a line about the run for the report (e.g. \"shared machine, indicative\")")
)

// matrix is which cells a run measures.
type matrix int

const (
	smokeMatrix  matrix = iota // one small cell of each kind (CI)
	windowMatrix               // every dimension, fewer records: a quiet window of ~10 minutes
	fullMatrix                 // every dimension with both clients: about half an hour
)

func brokersMatrix() matrix {
	switch {
	case *brokersFull:
		return fullMatrix
	case *brokersWindow:
		return windowMatrix
	}
	return smokeMatrix
}

// ackMode is how a cell's records are acknowledged.
type ackMode struct {
	name    string
	acks    string // the Java clients' acks
	durable bool   // partlog: serve --fsync; Kafka: flush.messages=1
}

var (
	acks1     = ackMode{"acks=1", "1", false}
	acksAll   = ackMode{"acks=all", "all", false}
	durable   = ackMode{"durable", "all", true}
	allModes  = []ackMode{acks1, acksAll, durable}
	clientsOf = []string{"perf", "kgo"}
)

func (m ackMode) kgoAcks() kgo.Acks {
	if m.acks == "1" {
		return kgo.LeaderAck()
	}
	return kgo.AllISRAcks()
}

type cellKind string

const (
	produceCell cellKind = "produce"
	consumeCell cellKind = "consume"
	e2eCell     cellKind = "e2e"
)

// brokerCell is one load, measured on both brokers.
type brokerCell struct {
	kind    cellKind
	client  string // "perf": Kafka's tool; "kgo": franz-go in this process
	parts   int
	size    int
	mode    ackMode
	records int // per measurement
}

func (c brokerCell) name() string {
	size := strconv.Itoa(c.size) + "B"
	if c.size%1024 == 0 {
		size = strconv.Itoa(c.size>>10) + "KiB"
	}
	return fmt.Sprintf("%s/%s/p=%d/%s/%s", c.kind, c.client, c.parts, size, c.mode.name)
}

// e2eRate is the end-to-end cells' producing rate, records/s: a steady
// load far below either broker's capacity, so the latency is the
// brokers' path and not a queue.
const e2eRate = 5000

// cellRecords is a produce or consume measurement's record count:
// seconds of steady state on either broker (about 1 GB of page cache for
// a cell's three rounds on two brokers at most), fewer for durable
// loads, whose records Kafka flushes one append at a time.
// The quiet window's are a third to a fifth of them: tenths of a second
// of steady state, still hundreds of /proc's 10 ms ticks of CPU.
func cellRecords(size int, kind cellKind, mode ackMode, short bool) int {
	switch {
	case short:
		return (2 << 20) / size
	case kind == e2eCell:
		return 4 * e2eRate // four seconds
	case mode.durable && size < 1024:
		return 200_000
	case mode.durable:
		return 50_000
	case size < 1024:
		return 1_000_000
	}
	return 200_000
}

// windowRecords is cellRecords for the quiet window.
func windowRecords(size int, kind cellKind, mode ackMode) int {
	switch {
	case kind == e2eCell:
		return 2 * e2eRate // two seconds
	case mode.durable && size < 1024:
		return 60_000
	case mode.durable:
		return 15_000
	case size < 1024:
		return 300_000
	}
	return 60_000
}

// brokerCells is the matrix: the full one, the quiet window's, or one
// small cell of each kind and client.
func brokerCells(m matrix, short bool) []brokerCell {
	if m == windowMatrix {
		// kgo for every partition count, size and acknowledgement (exact
		// latencies); Kafka's own tools at one partition and 100 B.
		var cells []brokerCell
		for _, parts := range []int{1, 100, 1000} {
			for _, size := range []int{100, 1024} {
				for _, mode := range allModes {
					cells = append(cells, brokerCell{produceCell, "kgo", parts, size, mode, windowRecords(size, produceCell, mode)})
					if parts == 1 && size == 100 {
						cells = append(cells, brokerCell{produceCell, "perf", parts, size, mode, windowRecords(size, produceCell, mode)})
					}
				}
				cells = append(cells, brokerCell{consumeCell, "kgo", parts, size, acks1, windowRecords(size, consumeCell, acks1)})
				if parts == 1 && size == 100 {
					cells = append(cells, brokerCell{consumeCell, "perf", parts, size, acks1, windowRecords(size, consumeCell, acks1)})
				}
			}
			for _, mode := range []ackMode{acks1, durable} {
				if parts == 1 && mode == acks1 {
					cells = append(cells, brokerCell{e2eCell, "perf", 1, 100, mode, 1000})
				}
				cells = append(cells, brokerCell{e2eCell, "kgo", parts, 100, mode, windowRecords(100, e2eCell, mode)})
			}
		}
		return cells
	}
	if m == smokeMatrix {
		n := func(kind cellKind, m ackMode) int { return min(cellRecords(100, kind, m, true), 20000) }
		e2e := 500
		if !short {
			e2e = e2eRate
		}
		return []brokerCell{
			{produceCell, "perf", 1, 100, acks1, n(produceCell, acks1)},
			{produceCell, "kgo", 1, 100, acksAll, n(produceCell, acksAll)},
			{consumeCell, "perf", 1, 100, acks1, n(consumeCell, acks1)},
			{consumeCell, "kgo", 1, 100, acks1, n(consumeCell, acks1)},
			{e2eCell, "perf", 1, 100, acks1, e2e / 10},
			{e2eCell, "kgo", 1, 100, durable, e2e},
		}
	}
	var cells []brokerCell
	for _, parts := range []int{1, 100, 1000} {
		for _, size := range []int{100, 1024} {
			for _, m := range allModes {
				for _, cl := range clientsOf {
					cells = append(cells, brokerCell{produceCell, cl, parts, size, m, cellRecords(size, produceCell, m, short)})
				}
			}
			for _, cl := range clientsOf {
				cells = append(cells, brokerCell{consumeCell, cl, parts, size, acks1, cellRecords(size, consumeCell, acks1, short)})
			}
		}
		// End to end: 100 B records at e2eRate, acknowledged and durable.
		// EndToEndLatency sends one record at a time and reads it back
		// (one partition: it checks each poll returns just that record).
		for _, m := range []ackMode{acks1, durable} {
			if parts == 1 {
				cells = append(cells, brokerCell{e2eCell, "perf", 1, 100, m, 2000})
			}
			cells = append(cells, brokerCell{e2eCell, "kgo", parts, 100, m, cellRecords(100, e2eCell, m, short)})
		}
	}
	return cells
}

// brokerTarget is one broker under test: partlog's two serve processes
// (plain and --fsync) or the one Kafka broker (durable topics flush
// every message).
type brokerTarget struct {
	name           string
	addr           [2]string // [durable]
	pid            [2]func() int
	durableConfigs map[string]string
	window         [2]string // partlog with -brokers.profile: serve's CPU profile window file
}

func (t *brokerTarget) addrFor(m ackMode) string {
	if m.durable {
		return t.addr[1]
	}
	return t.addr[0]
}

func (t *brokerTarget) pidFor(m ackMode) int {
	if m.durable {
		return t.pid[1]()
	}
	return t.pid[0]()
}

type brokersEnv struct {
	tools   *kafka.Tools
	targets []*brokerTarget // partlog first
	scratch string          // directory of the page-warming file
	topics  atomic.Int64
	mu      sync.Mutex
	results map[string]*cellResult

	// The quiet window's topics, one per broker, acknowledgement
	// (durable or not) and partition count, made and primed once for
	// all the cells of that count (sharedParts): at 1 000 partitions
	// Kafka took 35-45 s for each of the first two rounds of the
	// priming's appends, partlog 5 s to create the topic.
	shared      map[sharedKey]string
	sharedParts int
	// consumeFrom is where a size's records start in a shared topic:
	// the ends before its first produce cell, where its consume cell
	// reads from.
	consumeFrom map[sharedKey]map[int32]kgo.Offset
}

// sharedKey names a shared topic (size 0) or a size's records in it.
type sharedKey struct {
	target  int
	durable bool
	size    int
}

func newBrokersEnv(b *testing.B, in *kafka.Install) *brokersEnv {
	e := &brokersEnv{results: map[string]*cellResult{}, scratch: b.TempDir()}
	var profile [2][]string
	var window [2]string
	if dir := *brokersProfile; dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for i, name := range []string{"plain", "fsync"} {
			// Each measurement is a window of the CPU profile (SIGUSR1 to
			// SIGUSR2), kept under the cell's name.
			window[i] = filepath.Join(dir, "serve-"+name+".window.pprof")
			profile[i] = []string{"--cpuprofile", window[i], "--profile-signals",
				"--memprofile", filepath.Join(dir, "serve-"+name+".allocs.pprof")}
		}
	}
	plain := startServer(b, b.TempDir(), profile[0]...)
	fsync := startServer(b, b.TempDir(), append([]string{"--fsync"}, profile[1]...)...)
	e.targets = append(e.targets, &brokerTarget{
		name:   "partlog",
		addr:   [2]string{plain.addr, fsync.addr},
		pid:    [2]func() int{func() int { return plain.cmd.Process.Pid }, func() int { return fsync.cmd.Process.Pid }},
		window: window,
	})
	kb := in.StartBroker(b, kafka.BrokerConfig{HeapMB: 1024, Props: map[string]string{
		// A deleted cell's files go at once, not a minute into a later
		// cell's measurement.
		"log.segment.delete.delay.ms": "0",
	}})
	e.targets = append(e.targets, &brokerTarget{
		name:           "kafka",
		addr:           [2]string{kb.Addr, kb.Addr},
		pid:            [2]func() int{kb.Pid, kb.Pid},
		durableConfigs: map[string]string{"flush.messages": "1"},
	})
	e.tools = in.StartToolsJVM(b, "-Xms1g", "-Xmx1g", "-XX:+UseG1GC")
	return e
}

// prepareShared creates the quiet window's topics of parts partitions
// on every broker and primes them, the primings at once (Kafka's are
// mostly waiting).
func (e *brokersEnv) prepareShared(b *testing.B, parts int) {
	e.shared = map[sharedKey]string{}
	e.consumeFrom = map[sharedKey]map[int32]kgo.Offset{}
	e.sharedParts = parts
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(e.targets))
	for i, t := range e.targets {
		for _, m := range []ackMode{acks1, durable} {
			topic := e.newTopic()
			e.createTopic(b, t, topic, parts, m)
			e.shared[sharedKey{target: i, durable: m.durable}] = topic
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := primePartitions(t.addrFor(m), topic, parts); err != nil {
					errs <- fmt.Errorf("priming %s on %s: %w", topic, t.name, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// dropShared deletes the shared topics.
func (e *brokersEnv) dropShared(b *testing.B) {
	for k, topic := range e.shared {
		m := acks1
		if k.durable {
			m = durable
		}
		e.deleteTopic(b, e.targets[k.target], topic, m)
	}
	e.shared, e.sharedParts = nil, 0
}

// describe is the report's header: the machine and the run.
func (e *brokersEnv) describe(m matrix) runInfo {
	return runInfo{note: *brokersNote, matrix: m}
}

// newTopic returns a topic name not used before in this run.
func (e *brokersEnv) newTopic() string {
	return fmt.Sprintf("bench-%d", e.topics.Add(1))
}

// warmUp runs every client against every broker before the first cell,
// unmeasured: the JVMs compile their hot paths, the brokers' first
// connections and topics are made.
func (e *brokersEnv) warmUp(b *testing.B, m matrix) {
	n := 200000
	switch m {
	case windowMatrix:
		n = 100000
	case smokeMatrix:
		n = 20000
	}
	for _, t := range e.targets {
		for _, m := range []ackMode{acks1, durable} {
			topic := e.newTopic()
			e.createTopic(b, t, topic, 1, m)
			if _, err := perfProduce(e.tools, t.addrFor(m), topic, n, 100, m); err != nil {
				b.Fatal(err)
			}
			if _, err := kgoProduce(t.addrFor(m), topic, n, 100, m); err != nil {
				b.Fatal(err)
			}
			if _, err := perfConsume(e.tools, t.addrFor(m), topic, 2*n); err != nil {
				b.Fatal(err)
			}
			if _, err := kgoConsume(t.addrFor(m), topic, nil, 2*n); err != nil {
				b.Fatal(err)
			}
			e.deleteTopic(b, t, topic, m)
		}
	}
}

// sample is one measurement of one broker.
type sample struct {
	records   int64
	bytes     int64   // record values
	seconds   float64 // the client's time for the records
	brokerCPU float64 // seconds
	clientCPU float64 // seconds
	peakRSS   int64   // the broker's, bytes
	lat       latencies
}

// latencies are a measurement's latency percentiles in milliseconds
// (zero: the load measures none).
type latencies struct{ p50, p99, p999 float64 }

func (s sample) recPerSec() float64 { return float64(s.records) / s.seconds }
func (s sample) mbPerSec() float64  { return float64(s.bytes) / s.seconds / 1e6 }
func (s sample) cpuPerGB() float64  { return s.brokerCPU / (float64(s.bytes) / 1e9) }
func (s sample) clientCPUPerGB() float64 {
	return s.clientCPU / (float64(s.bytes) / 1e9)
}

// recPerCPU is records per second of the broker's CPU.
func (s sample) recPerCPU() float64 { return float64(s.records) / max(s.brokerCPU, 0.01) }

// cellResult is a cell's samples: per broker (targets' order), one per
// round.
type cellResult struct {
	cell    brokerCell
	brokers []string
	samples [][]sample
}

// runCell measures c rounds times on every broker, alternating which
// goes first from round to round and, for runs of one round, from cell
// to cell (index is c's place in the matrix).
func (e *brokersEnv) runCell(b *testing.B, c brokerCell, index, rounds int) *cellResult {
	res := &cellResult{cell: c, samples: make([][]sample, len(e.targets))}
	topics := make([]string, len(e.targets))
	for i, t := range e.targets {
		res.brokers = append(res.brokers, t.name)
		if e.shared != nil {
			topics[i] = e.shared[sharedKey{target: i, durable: c.mode.durable}]
			if c.kind != produceCell {
				continue
			}
			// A size's first produce cell: its records start here.
			k := sharedKey{target: i, durable: c.mode.durable, size: c.size}
			if e.consumeFrom[k] == nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				ends, err := listEnds(ctx, t.addrFor(c.mode), topics[i], c.parts)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				e.consumeFrom[k] = ends
			}
			continue
		}
		topics[i] = e.newTopic()
		e.createTopic(b, t, topics[i], c.parts, c.mode)
		var err error
		if c.kind == consumeCell {
			// The records to read, written once: each round reads them
			// all again from the start (from the page cache on both).
			_, err = kgoProduce(t.addrFor(c.mode), topics[i], c.records, c.size, c.mode)
		} else {
			err = primePartitions(t.addrFor(c.mode), topics[i], c.parts)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	for r := 0; r < rounds; r++ {
		for k := range e.targets {
			i := k
			if (r+index)%2 == 1 {
				i = len(e.targets) - 1 - k
			}
			s, err := e.measure(c, i, topics[i], r)
			if err != nil {
				b.Fatalf("%s on %s: %v", c.name(), e.targets[i].name, err)
			}
			res.samples[i] = append(res.samples[i], s)
		}
	}
	if e.shared == nil {
		for i, t := range e.targets {
			e.deleteTopic(b, t, topics[i], c.mode)
		}
	}
	return res
}

// measure runs one cell's load once on one broker, with the page cache
// warmed first and the broker's CPU and peak RSS taken around it.
func (e *brokersEnv) measure(c brokerCell, target int, topic string, round int) (sample, error) {
	t := e.targets[target]
	if err := warmPageCache(e.scratch, int64(c.records)*int64(c.size)); err != nil {
		return sample{}, err
	}
	addr, pid := t.addrFor(c.mode), t.pidFor(c.mode)
	client := 0 // kgo: this process
	if c.client == "perf" {
		client = e.tools.Pid()
	}
	if err := kafka.ResetPeakRSS(pid); err != nil {
		return sample{}, err
	}
	window := t.window[0]
	if c.mode.durable {
		window = t.window[1]
	}
	if window != "" {
		if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
			return sample{}, err
		}
	}
	b0, err := kafka.ReadUsage(pid)
	if err != nil {
		return sample{}, err
	}
	c0, err := kafka.ReadUsage(client)
	if err != nil {
		return sample{}, err
	}
	var s sample
	switch {
	case c.kind == produceCell && c.client == "perf":
		s, err = perfProduce(e.tools, addr, topic, c.records, c.size, c.mode)
	case c.kind == produceCell:
		s, err = kgoProduce(addr, topic, c.records, c.size, c.mode)
	case c.kind == consumeCell:
		// From the start, or in a shared topic from the start of the
		// records of c's size.
		from := e.consumeFrom[sharedKey{target: target, durable: c.mode.durable, size: c.size}]
		s, err = consumePasses(e.tools, c, addr, topic, from)
	case c.kind == e2eCell && c.client == "perf":
		s, err = perfE2E(e.tools, addr, topic, c.records, c.size, c.mode)
	default:
		s, err = kgoE2E(addr, topic, c.parts, c.records, c.size, c.mode)
	}
	if err != nil {
		return sample{}, err
	}
	b1, err := kafka.ReadUsage(pid)
	if err != nil {
		return sample{}, err
	}
	c1, err := kafka.ReadUsage(client)
	if err != nil {
		return sample{}, err
	}
	if window != "" {
		name := strings.ReplaceAll(c.name(), "/", "_") + fmt.Sprintf("_r%d.cpu.pprof", round)
		if err := keepWindow(pid, window, filepath.Join(filepath.Dir(window), name)); err != nil {
			return sample{}, err
		}
	}
	s.brokerCPU = (b1.CPU - b0.CPU).Seconds()
	s.clientCPU = (c1.CPU - c0.CPU).Seconds()
	s.peakRSS = b1.PeakRSS
	return s, nil
}

// keepWindow ends serve's profile window (SIGUSR2) and moves the
// profile, once written, to dst.
func keepWindow(pid int, window, dst string) error {
	if err := syscall.Kill(pid, syscall.SIGUSR2); err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := os.Rename(window, dst); err == nil || !os.IsNotExist(err) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("serve wrote no profile %s", window)
		}
	}
}

// warmPageCache writes and deletes a file of n bytes and syncs: this
// VM hands memory it has not used for a while back to its host, and a
// measurement that writes new pages after that runs several times
// slower; the warming makes both brokers start from pages in hand.
func warmPageCache(dir string, n int64) error {
	f, err := os.CreateTemp(dir, "warm-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for n > 0 {
		k := min(int64(len(buf)), n)
		if _, err := f.Write(buf[:k]); err != nil {
			f.Close()
			return err
		}
		n -= k
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Remove(f.Name()); err != nil {
		return err
	}
	syscall.Sync()
	return nil
}

// createTopic creates topic on t with parts partitions (durable topics
// get t's durable configs) and waits until every partition has a leader.
func (e *brokersEnv) createTopic(b *testing.B, t *brokerTarget, topic string, parts int, m ackMode) {
	b.Helper()
	var configs map[string]string
	if m.durable {
		configs = t.durableConfigs
	}
	c, err := kgo.NewClient(kgo.SeedBrokers(t.addrFor(m)))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	createTopicOn(b, c, topic, int32(parts), configs)
}

func (e *brokersEnv) deleteTopic(b *testing.B, t *brokerTarget, topic string, m ackMode) {
	b.Helper()
	c, err := kgo.NewClient(kgo.SeedBrokers(t.addrFor(m)))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = []string{topic}
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 60000
	resp, err := req.RequestWith(ctx, c)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range resp.Topics {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			b.Fatalf("deleting %s on %s: %v", topic, t.name, err)
		}
	}
}

// primePartitions writes three 4 KiB records to each of topic's parts
// partitions, unmeasured: a partition's first appends do once what the
// next ones do not (partlog: the leader-epoch checkpoint at the first,
// the index files at the first index entry, past index.interval.bytes;
// Kafka makes both when it creates the topic), and the measurements are
// of the steady state.
func primePartitions(addr, topic string, parts int) error {
	c, err := benchClient(addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	value := benchValue(4 << 10)
	for range 3 { // one batch per partition each time
		rs := make([]*kgo.Record, parts)
		for p := range rs {
			rs[p] = &kgo.Record{Partition: int32(p), Value: value}
		}
		if err := c.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return err
		}
	}
	return nil
}

// perfTotal is ProducerPerformance's summary line.
var perfTotal = regexp.MustCompile(`(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th`)

// perfProduce runs Kafka's ProducerPerformance: n records of size bytes
// as fast as it can (--throughput -1), its default producer settings
// otherwise (linger.ms 5, batch.size 16 KiB, no compression).
func perfProduce(tl *kafka.Tools, addr, topic string, n, size int, m ackMode) (sample, error) {
	res, err := tl.Run(30*time.Minute, kafka.ProducerPerformance, "--topic", topic,
		"--num-records", strconv.Itoa(n), "--record-size", strconv.Itoa(size), "--throughput", "-1",
		"--producer-props", "bootstrap.servers="+addr, "acks="+m.acks)
	if err != nil {
		return sample{}, err
	}
	g := perfTotal.FindStringSubmatch(res.Stdout)
	if res.Code != 0 || g == nil {
		return sample{}, fmt.Errorf("ProducerPerformance exited %d:\n%s\n%s", res.Code, tail(res.Stdout, 5), tail(res.Stderr, 20))
	}
	sent, _ := strconv.ParseInt(g[1], 10, 64)
	if sent != int64(n) {
		return sample{}, fmt.Errorf("ProducerPerformance sent %d of %d records:\n%s", sent, n, tail(res.Stderr, 20))
	}
	rate, _ := strconv.ParseFloat(g[2], 64)
	p50, _ := strconv.ParseFloat(g[6], 64)
	p99, _ := strconv.ParseFloat(g[8], 64)
	p999, _ := strconv.ParseFloat(g[9], 64)
	return sample{records: sent, bytes: sent * int64(size), seconds: float64(sent) / rate,
		lat: latencies{p50, p99, p999}}, nil
}

// consumePasses is a consume measurement: consumePassCount reads of the
// cell's records from the start, each by a new consumer (perf: a new
// group), so the broker's CPU is counted over enough work for /proc's
// 10 ms ticks; the time is the sum of the reads' times.
func consumePasses(tl *kafka.Tools, c brokerCell, addr, topic string, from map[int32]kgo.Offset) (sample, error) {
	var sum sample
	for range consumePassCount {
		var s sample
		var err error
		if c.client == "perf" {
			s, err = perfConsume(tl, addr, topic, c.records)
		} else {
			s, err = kgoConsume(addr, topic, from, c.records)
		}
		if err != nil {
			return sample{}, err
		}
		sum.records += s.records
		sum.bytes += s.bytes
		sum.seconds += s.seconds
	}
	return sum, nil
}

// consumePassCount is how many times a consume measurement reads its
// records.
const consumePassCount = 4

// perfConsume runs Kafka's ConsumerPerformance (a consumer group of its
// own, from the earliest offset) until it has read n records; the time
// is its fetch time, without the group's join.
func perfConsume(tl *kafka.Tools, addr, topic string, n int) (sample, error) {
	group := fmt.Sprintf("perf-%s-%d", topic, time.Now().UnixNano())
	res, err := tl.Run(30*time.Minute, kafka.ConsumerPerformance, "--bootstrap-server", addr, "--topic", topic,
		"--messages", strconv.Itoa(n), "--group", group, "--timeout", "60000", "--hide-header")
	if err != nil {
		return sample{}, err
	}
	// start, end, MB, MB/s, records, records/s, rebalance ms, fetch ms,
	// fetch MB/s, fetch records/s
	var f []string
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		if parts := strings.Split(line, ", "); len(parts) == 10 {
			f = parts
		}
	}
	if res.Code != 0 || f == nil {
		return sample{}, fmt.Errorf("ConsumerPerformance exited %d:\n%s\n%s", res.Code, tail(res.Stdout, 5), tail(res.Stderr, 20))
	}
	mb, _ := strconv.ParseFloat(f[2], 64)
	got, _ := strconv.ParseInt(f[4], 10, 64)
	fetchMs, _ := strconv.ParseFloat(f[7], 64)
	if got < int64(n) || fetchMs <= 0 {
		return sample{}, fmt.Errorf("ConsumerPerformance read %d of %d records in %v ms:\n%s", got, n, fetchMs, res.Stdout)
	}
	return sample{records: got, bytes: int64(mb * (1 << 20)), seconds: fetchMs / 1000}, nil
}

var (
	e2eAvg  = regexp.MustCompile(`Avg latency: ([\d.]+) ms`)
	e2ePerc = regexp.MustCompile(`Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)`)
)

// perfE2E runs Kafka's EndToEndLatency: n records one at a time, each
// sent (waiting for its acknowledgement) and then polled back.
func perfE2E(tl *kafka.Tools, addr, topic string, n, size int, m ackMode) (sample, error) {
	res, err := tl.Run(30*time.Minute, kafka.EndToEndLatency, addr, topic, strconv.Itoa(n), m.acks, strconv.Itoa(size))
	if err != nil {
		return sample{}, err
	}
	avg, perc := e2eAvg.FindStringSubmatch(res.Stdout), e2ePerc.FindStringSubmatch(res.Stdout)
	if res.Code != 0 || avg == nil || perc == nil {
		return sample{}, fmt.Errorf("EndToEndLatency exited %d:\n%s\n%s", res.Code, tail(res.Stdout, 5), tail(res.Stderr, 20))
	}
	mean, _ := strconv.ParseFloat(avg[1], 64)
	p50, _ := strconv.ParseFloat(perc[1], 64)
	p99, _ := strconv.ParseFloat(perc[2], 64)
	p999, _ := strconv.ParseFloat(perc[3], 64)
	// The tool's percentiles are whole milliseconds (truncated); its
	// mean is exact, and is the time per record of the sequential loop.
	return sample{records: int64(n), bytes: int64(n) * int64(size), seconds: mean * float64(n) / 1000,
		lat: latencies{p50, p99, p999}}, nil
}

// benchClient returns a kgo client of addr with opts.
func benchClient(addr string, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
}

// kgoProduce produces n records of size bytes to topic as fast as kgo
// takes them (no key: its sticky partitioner fills a batch of one
// partition, then moves on), no compression, a 32 MiB buffer like the
// Java producer's buffer.memory; idempotent unless acks=1. The latency
// of a record is from its Produce call to its promise.
func kgoProduce(addr, topic string, n, size int, m ackMode) (sample, error) {
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(m.kgoAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedBytes(32 << 20), kgo.MaxBufferedRecords(1 << 30)}
	if m.acks == "1" {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	c, err := benchClient(addr, opts...)
	if err != nil {
		return sample{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	value := benchValue(size)
	lat := make([]time.Duration, n)
	var done atomic.Int64
	var failed atomic.Pointer[error]
	start := time.Now()
	for i := 0; i < n; i++ {
		sent := time.Now()
		c.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
			lat[done.Add(1)-1] = time.Since(sent)
		})
	}
	if err := c.Flush(ctx); err != nil {
		return sample{}, err
	}
	elapsed := time.Since(start)
	if p := failed.Load(); p != nil {
		return sample{}, *p
	}
	return sample{records: int64(n), bytes: int64(n) * int64(size), seconds: elapsed.Seconds(), lat: percentiles(lat)}, nil
}

// kgoConsume reads n records of topic from the start of every
// partition, or from the offsets from when not nil, without a group
// (kgo's defaults: 50 MB per fetch, 1 MiB per partition).
func kgoConsume(addr, topic string, from map[int32]kgo.Offset, n int) (sample, error) {
	read := kgo.ConsumeTopics(topic)
	if from != nil {
		read = kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from})
	}
	c, err := benchClient(addr, read, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return sample{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var got, bytes int64
	start := time.Now()
	for got < int64(n) {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return sample{}, fmt.Errorf("read %d of %d records: %w", got, n, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return sample{}, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			bytes += int64(len(r.Value))
		})
	}
	return sample{records: got, bytes: bytes, seconds: time.Since(start).Seconds()}, nil
}

// kgoE2E produces n records at e2eRate records/s (spread over the
// topic's partitions by kgo's sticky partitioner, no linger: kgo's
// default of 10 ms made half of it every record's latency on both
// brokers) while a second client reads them from the partitions' ends;
// a record's latency is from its Produce call to the consumer's
// PollFetches returning it (the send time travels in the first 8 bytes
// of the value).
func kgoE2E(addr, topic string, parts, n, size int, m ackMode) (sample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ends, err := listEnds(ctx, addr, topic, parts)
	if err != nil {
		return sample{}, err
	}
	cons, err := benchClient(addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: ends}))
	if err != nil {
		return sample{}, err
	}
	defer cons.Close()
	opts := []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(m.kgoAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0)}
	if m.acks == "1" {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	prod, err := benchClient(addr, opts...)
	if err != nil {
		return sample{}, err
	}
	defer prod.Close()
	base := time.Now()
	lat := make([]time.Duration, 0, n)
	received := make(chan error, 1)
	go func() {
		for len(lat) < n {
			fs := cons.PollFetches(ctx)
			now := time.Since(base)
			if err := ctx.Err(); err != nil {
				received <- fmt.Errorf("received %d of %d records: %w", len(lat), n, err)
				return
			}
			var ferr error
			fs.EachError(func(_ string, _ int32, err error) { ferr = err })
			if ferr != nil {
				received <- ferr
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				sent := time.Duration(binary.BigEndian.Uint64(r.Value))
				lat = append(lat, now-sent)
			})
		}
		received <- nil
	}()
	var failed atomic.Pointer[error]
	start := time.Now()
	for i := 0; i < n; i++ {
		if wait := time.Until(start.Add(time.Duration(i) * time.Second / e2eRate)); wait > 0 {
			time.Sleep(wait)
		}
		v := make([]byte, max(size, 8))
		copy(v[8:], benchValue(size)[8:])
		binary.BigEndian.PutUint64(v, uint64(time.Since(base)))
		prod.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		return sample{}, err
	}
	if p := failed.Load(); p != nil {
		return sample{}, *p
	}
	if err := <-received; err != nil {
		return sample{}, err
	}
	return sample{records: int64(n), bytes: int64(n) * int64(size), seconds: time.Since(start).Seconds(), lat: percentiles(lat)}, nil
}

// listEnds returns the end offset of each of topic's parts partitions.
func listEnds(ctx context.Context, addr, topic string, parts int) (map[int32]kgo.Offset, error) {
	c, err := benchClient(addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range parts {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = int32(p), -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c)
	if err != nil {
		return nil, err
	}
	ends := map[int32]kgo.Offset{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("end of %s-%d: %w", topic, p.Partition, err)
			}
			ends[p.Partition] = kgo.NewOffset().At(p.Offset)
		}
	}
	if len(ends) != parts {
		return nil, fmt.Errorf("ends of %d of %s's %d partitions", len(ends), topic, parts)
	}
	return ends, nil
}

// percentiles returns the 50th, 99th and 99.9th percentiles of lat in
// milliseconds, nearest rank below (as Kafka's tools count them).
func percentiles(lat []time.Duration) latencies {
	if len(lat) == 0 {
		return latencies{}
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(int(q*float64(len(lat))), len(lat)-1)]) / 1e6
	}
	return latencies{at(0.5), at(0.99), at(0.999)}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
