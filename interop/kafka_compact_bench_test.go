package interop

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/interop/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkCleanVsKafka cleans one input, written by Kafka 4.4's broker
// (keyed 100-byte records, uncompressed, one key per ten records, 1 MiB
// segments), with Kafka's cleaner and with partlog's, alternately, b.N
// times each, and reports both throughputs over the input's bytes (Kafka's
// timed from its log: "Beginning cleaning" to the stats it logs at the
// end), their ratio, partlog's peak anonymous resident memory during the
// cleaning (sampled every millisecond), and the buffers Kafka's cleaner
// holds (its dedupe buffer and I/O buffers, allocated when the broker
// starts and zero-filled every round). Both cleaners get the same 32 MiB
// offset map.
//
// Kafka's broker is started once, with b.N topics each holding a copy of
// the input, and cleans them one by one: its first cleaning runs on a JVM
// that has just started (interpreted code: the speed of the first
// cleaning after a broker's start), the later ones on a warmer one.
// kafka-MB/s counts them all; kafka-warm-MB/s and warm-speedup leave the
// first out (with b.N ≥ 2). The machine may be shared: compare the ratios
// of one run, not figures across runs.
func BenchmarkCleanVsKafka(b *testing.B) {
	records := 400_000
	if testing.Short() {
		records = 20_000
	}
	const mapBytes = 32 << 20
	in := kafka.Need(b)
	br := in.StartBroker(b, kafka.BrokerConfig{Props: map[string]string{"log.cleaner.backoff.ms": "100",
		"log.cleaner.dedupe.buffer.size": strconv.Itoa(mapBytes)}})
	topicConfig := map[string]string{"cleanup.policy": "compact", "segment.bytes": "1048576",
		"min.cleanable.dirty.ratio": "1"}
	createKafkaTopic(b, br, "bench", 1, topicConfig)
	// The topics Kafka cleans, one an iteration; the input is put into
	// them while the broker is stopped.
	cleaned := make([]string, b.N)
	for i := range cleaned {
		cleaned[i] = fmt.Sprint("bench-clean-", i)
		createKafkaTopic(b, br, cleaned[i], 1, topicConfig)
	}
	c := br.Client(b, kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(64<<10),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	rng := rand.New(rand.NewPCG(1, 1))
	value := func() []byte {
		v := make([]byte, 100)
		for i := range v {
			v[i] = byte('a' + rng.IntN(26))
		}
		return v
	}
	for sent := 0; sent < records; {
		var rs []*kgo.Record
		for i := 0; i < 5000 && sent < records; i, sent = i+1, sent+1 {
			rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "key-%08d", sent%(records/10)), Value: value()})
		}
		produceSync(b, c, rs...)
	}
	produceSync(b, c, &kgo.Record{Key: []byte("roll"), Value: value()})
	if err := br.Stop(); err != nil {
		b.Fatal(err)
	}
	input := copyDir(b, br.PartitionDir("bench", 0), filepath.Join(b.TempDir(), "input", "bench-0"))
	hws, err := checkpoint.ReadOffsets(filepath.Join(br.LogDir, checkpoint.ReplicationOffsetFile))
	if err != nil {
		b.Fatal(err)
	}
	hw := hws[partlog.TopicPartition{Topic: "bench", Partition: 0}]
	var inputBytes int64
	logs, _ := filepath.Glob(filepath.Join(input, "*.log"))
	active := int64(0)
	for _, p := range logs {
		st, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		inputBytes += st.Size()
		active = st.Size() // the last .log: never cleaned
	}
	inputBytes -= active
	for _, topic := range cleaned {
		restorePartition(b, input, br.PartitionDir(topic, 0))
	}
	if err := br.Start(); err != nil {
		b.Fatal(err)
	}

	var kafkaTime, kafkaWarm, partlogTime, partlogWarm time.Duration
	var peak int64
	b.ResetTimer()
	b.StopTimer()
	for i, topic := range cleaned {
		// Kafka: one of its copies of the input.
		logMark := logSize(b, br)
		waitKafkaCleaned(b, br, topic, -1)
		k := kafkaCleaningTime(b, br, logMark, topic+"-0")
		kafkaTime += k

		// partlog: the same input, in-process.
		dir := copyDir(b, input, filepath.Join(b.TempDir(), fmt.Sprint("p", i), "bench-0"))
		cleaner := partlog.NewCleaner(partlog.CleanerOptions{MapBytes: mapBytes})
		l, err := partlog.Open(dir, &partlog.Options{CleanShutdown: true, RecoveryPoint: hw, HighWatermark: hw,
			PrefaultBytes: -1, Cleaner: cleaner})
		if err != nil {
			b.Fatal(err)
		}
		base := procStatus(b, "RssAnon:")
		done := make(chan int64)
		stop := make(chan struct{})
		go func() { done <- samplePeak(b, "RssAnon:", stop) }()
		start := time.Now()
		b.StartTimer()
		res, err := l.Compact(time.Now())
		b.StopTimer()
		p := time.Since(start)
		partlogTime += p
		close(stop)
		peak = max(peak, <-done-base)
		if err != nil || res.BytesRead < inputBytes {
			b.Fatalf("partlog cleaned %d of %d bytes: %v", res.BytesRead, inputBytes, err)
		}
		_ = l.Close()
		_ = cleaner.Close()
		if i > 0 {
			kafkaWarm += k
			partlogWarm += p
		}
		b.Logf("iteration %d: Kafka %v, partlog %v", i, k, p)
	}
	mb := float64(inputBytes) / (1 << 20)
	b.ReportMetric(mb*float64(b.N)/kafkaTime.Seconds(), "kafka-MB/s")
	b.ReportMetric(mb*float64(b.N)/partlogTime.Seconds(), "partlog-MB/s")
	b.ReportMetric(kafkaTime.Seconds()/partlogTime.Seconds(), "speedup")
	if b.N > 1 {
		b.ReportMetric(mb*float64(b.N-1)/kafkaWarm.Seconds(), "kafka-warm-MB/s")
		b.ReportMetric(kafkaWarm.Seconds()/partlogWarm.Seconds(), "warm-speedup")
	}
	b.ReportMetric(float64(peak)/(1<<20), "partlog-peak-anon-MiB")
	b.ReportMetric(float64(mapBytes+512<<10)/(1<<20), "kafka-buffers-MiB")
	b.ReportMetric(float64(inputBytes)/(1<<20), "input-MiB")
}

// restorePartition replaces the partition directory's files with the
// input's, all but partition.metadata (its topic id is the topic's own).
func restorePartition(b *testing.B, input, dst string) {
	b.Helper()
	ents, err := os.ReadDir(dst)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "partition.metadata" {
			if err := os.Remove(filepath.Join(dst, e.Name())); err != nil {
				b.Fatal(err)
			}
		}
	}
	ents, err = os.ReadDir(input)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == "partition.metadata" || !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(input, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func logSize(b *testing.B, br *kafka.Broker) int64 {
	st, err := os.Stat(filepath.Join(br.Dir, "logs", "server.log"))
	if err != nil {
		return 0
	}
	return st.Size()
}

// kafkaCleaningTime reads server.log from offset from: the time from
// "Beginning cleaning of log <name>" to the entry of its cleaning stats,
// by the entries' millisecond timestamps.
func kafkaCleaningTime(b *testing.B, br *kafka.Broker, from int64, name string) time.Duration {
	b.Helper()
	f, err := os.Open(filepath.Join(br.Dir, "logs", "server.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(from, 0); err != nil {
		b.Fatal(err)
	}
	var last, begin time.Time
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "[") && len(line) > 24 {
			if ts, err := time.Parse("2006-01-02 15:04:05,000", line[1:24]); err == nil {
				last = ts
			}
		}
		switch {
		case strings.Contains(line, "Beginning cleaning of log "+name):
			begin = last
		case strings.Contains(line, "cleaned log "+name) && !begin.IsZero():
			return last.Sub(begin)
		}
	}
	b.Fatalf("no cleaning of %s in Kafka's log since byte %d", name, from)
	return 0
}

// samplePeak reads a /proc/self/status field every millisecond until stop
// and returns the largest value: the peak of the process's anonymous
// resident memory (RssAnon: heap and anonymous mappings such as the
// offset map; the segments' page-cache pages mapped for reading are not
// counted, they are the file system's).
func samplePeak(b *testing.B, field string, stop <-chan struct{}) int64 {
	peak := procStatus(b, field)
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return max(peak, procStatus(b, field))
		case <-t.C:
			peak = max(peak, procStatus(b, field))
		}
	}
}

func procStatus(b *testing.B, field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}
