package interop

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/index"
	"github.com/partlog/partlog/internal/checkpoint"
	"github.com/partlog/partlog/interop/kafka"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Kafka cleaner judge: one input directory, written by Kafka's broker
// for a compacted topic, cleaned by Kafka's cleaner and by partlog's; the
// two must keep the same batches and records (partlog's differences are
// listed in package cleaner's documentation and allowed here by name).

// alterTopicConfig sets one config of a Kafka topic
// (IncrementalAlterConfigs).
func alterTopicConfig(t testing.TB, b *kafka.Broker, topic, name, value string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value, c.Op = name, kmsg.StringPtr(value), kmsg.IncrementalAlterConfigOpSet
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(testContext(t, 20*time.Second), b.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("alter %s %s=%s: %v", topic, name, value, err)
	}
}

// cleanerCheckpoint reads the broker's cleaner-offset-checkpoint entry of
// a partition (-1: none).
func cleanerCheckpoint(t testing.TB, logDir, topic string, p int32) int64 {
	t.Helper()
	m, err := checkpoint.ReadOffsets(filepath.Join(logDir, checkpoint.CleanerOffsetFile))
	if err != nil {
		return -1
	}
	if o, ok := m[partlog.TopicPartition{Topic: topic, Partition: p}]; ok {
		return o
	}
	return -1
}

// waitKafkaCleaned lets Kafka's cleaner clean a partition once (the
// topic's dirty ratio lowered to 0, then raised back so that it cleans no
// more) and returns the cleaner checkpoint it wrote.
func waitKafkaCleaned(t testing.TB, b *kafka.Broker, topic string, after int64) int64 {
	t.Helper()
	alterTopicConfig(t, b, topic, "min.cleanable.dirty.ratio", "0")
	deadline := time.Now().Add(60 * time.Second)
	for {
		if o := cleanerCheckpoint(t, b.LogDir, topic, 0); o > after {
			alterTopicConfig(t, b, topic, "min.cleanable.dirty.ratio", "1")
			return o
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(b.Dir, "logs", "server.log"))
			var lines []string
			for _, l := range strings.Split(string(log), "\n") {
				if strings.Contains(l, "leaner") || strings.Contains(l, topic) {
					lines = append(lines, l)
				}
			}
			t.Fatalf("Kafka's cleaner did not clean %s-0 past %d; its log about it:\n%s", topic, after, strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// copyDir copies the regular files of a directory into a new one.
func copyDir(t testing.TB, src, dst string) string {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// cleanWithPartlog cleans a copy of a Kafka partition directory with
// partlog (the topic's settings, the high watermark Kafka checkpointed)
// at now and returns what the round did.
func cleanWithPartlog(t *testing.T, dir string, hw int64, now time.Time) partlog.CleanResult {
	t.Helper()
	opts := &partlog.Options{CleanShutdown: true, RecoveryPoint: hw, HighWatermark: hw,
		PrefaultBytes: -1, DeleteRetentionMs: judgeDeleteRetentionMs, Now: func() time.Time { return now }}
	l, err := partlog.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Compact(now)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := partlog.Check(dir, opts); err != nil {
		t.Errorf("consistency check of %s after cleaning: %v", dir, err)
	}
	return res
}

const (
	judgeTopic             = "judge"
	judgeDeleteRetentionMs = 1000
)

// judgeRound produces a round of the workload to Kafka: plain keyed
// records from an idempotent producer (uncompressed and lz4), tombstones,
// committed and aborted transactions; waves separated by more than
// segment.ms, so each lands in a segment of its own.
func judgeRound(t *testing.T, b *kafka.Broker, round int) {
	t.Helper()
	plain := b.Client(t, kgo.DefaultProduceTopic(judgeTopic), kgo.ProducerLinger(0))
	lz4 := b.Client(t, kgo.DefaultProduceTopic(judgeTopic), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	txn := b.Client(t, kgo.DefaultProduceTopic(judgeTopic), kgo.TransactionalID(fmt.Sprintf("judge-txn-%d", round)))
	rec := func(k string, v string) *kgo.Record {
		r := &kgo.Record{Key: []byte(k), Headers: []kgo.RecordHeader{{Key: "round", Value: []byte(fmt.Sprint(round))}}}
		if v != "" {
			r.Value = []byte(v)
		}
		return r
	}
	wave := func(c *kgo.Client, rs ...*kgo.Record) {
		produceSync(t, c, rs...)
		time.Sleep(120 * time.Millisecond) // segment.ms is 100
	}
	for w := 0; w < 3; w++ {
		var rs []*kgo.Record
		for i := 0; i < 30; i++ {
			rs = append(rs, rec(fmt.Sprintf("k%02d", (i*7+w)%25), fmt.Sprintf("r%d-w%d-%d", round, w, i)))
		}
		wave(plain, rs...)
	}
	var rs []*kgo.Record
	for i := 0; i < 20; i++ {
		rs = append(rs, rec(fmt.Sprintf("k%02d", i%12), fmt.Sprintf("lz4-r%d-%d", round, i)))
	}
	wave(lz4, rs...)
	wave(plain, rec("k00", ""), rec("k01", ""), rec(fmt.Sprintf("only-r%d", round), ""))
	for i, commit := range []bool{true, false, true} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var rs []*kgo.Record
		for j := 0; j < 4; j++ {
			rs = append(rs, rec(fmt.Sprintf("k%02d", 5+j+i), fmt.Sprintf("txn-r%d-%d-%d", round, i, j)))
		}
		rs = append(rs, rec(fmt.Sprintf("txn-only-r%d-%d", round, i), "x"))
		produceSync(t, txn, rs...)
		end := kgo.TryCommit
		if !commit {
			end = kgo.TryAbort
		}
		if err := txn.EndTransaction(testContext(t, 20*time.Second), end); err != nil {
			t.Fatal(err)
		}
		time.Sleep(120 * time.Millisecond)
	}
	// The active segment: left out of every cleaning.
	wave(plain, rec("tail", fmt.Sprint(round)))
	produceSync(t, plain, rec("tail", fmt.Sprint(round)))
}

// judgeHighWatermark is the judge partition's high watermark in the
// stopped broker's replication-offset-checkpoint.
func judgeHighWatermark(t *testing.T, b *kafka.Broker) int64 {
	t.Helper()
	hws, err := checkpoint.ReadOffsets(filepath.Join(b.LogDir, checkpoint.ReplicationOffsetFile))
	if err != nil {
		t.Fatal(err)
	}
	return hws[partlog.TopicPartition{Topic: judgeTopic, Partition: 0}]
}

// judgeBatch is what the comparison reads of a batch.
type judgeBatch struct {
	v       batch.View
	records []string
}

func readJudgeBatches(t *testing.T, dir string, below int64) []judgeBatch {
	t.Helper()
	var out []judgeBatch
	for _, v := range segmentBatches(t, dir) {
		if v.BaseOffset() >= below {
			break
		}
		jb := judgeBatch{v: v}
		data, err := v.RecordData(nil, 1<<24)
		if err != nil {
			t.Fatal(err)
		}
		it := v.Records(data)
		for r, ok := it.Next(); ok; r, ok = it.Next() {
			var hs []string
			h := r.Headers()
			for hd, ok := h.Next(); ok; hd, ok = h.Next() {
				hs = append(hs, fmt.Sprintf("%s=%q", hd.Key, hd.Value))
			}
			jb.records = append(jb.records, fmt.Sprintf("%d@%d %q=%q (null value %v) %v", r.Offset, r.Timestamp, r.Key, r.Value, r.Value == nil, hs))
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		out = append(out, jb)
	}
	return out
}

// compareCleaned compares the partition directories Kafka's cleaner and
// partlog's left: the same segments, batches (offsets, producer fields,
// flags, leader epochs, codecs, which batches carry a delete horizon),
// records (offsets, timestamps, keys, values, headers) and .txnindex
// entries. Allowed: delete horizons' values (each cleaner's clock) and,
// for a batch rewritten with fewer records, the max timestamp (partlog
// keeps the original's). Only segments and batches starting below
// below are compared. It returns how many batches differ only so.
func compareCleaned(t *testing.T, what, kafkaDir, partlogDir string, below int64) (maxTimestamps int) {
	t.Helper()
	segs := func(dir string) []string {
		ls, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		var out []string
		for _, l := range ls {
			base, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(l), ".log"), 10, 64)
			if err == nil && base < below {
				out = append(out, filepath.Base(l))
			}
		}
		sort.Strings(out)
		return out
	}
	if k, p := segs(kafkaDir), segs(partlogDir); strings.Join(k, " ") != strings.Join(p, " ") {
		t.Errorf("%s: segments: Kafka %v, partlog %v", what, k, p)
	}
	kb, pb := readJudgeBatches(t, kafkaDir, below), readJudgeBatches(t, partlogDir, below)
	if len(kb) != len(pb) {
		t.Errorf("%s: %d batches after Kafka's cleaner, %d after partlog's", what, len(kb), len(pb))
	}
	for i := 0; i < min(len(kb), len(pb)); i++ {
		k, p := kb[i].v, pb[i].v
		kh, ph := header(k), header(p)
		if kh.MaxTimestamp != ph.MaxTimestamp && len(kb[i].records) < maxRecords(k) {
			maxTimestamps++
			kh.MaxTimestamp = ph.MaxTimestamp
		}
		if k.HasDeleteHorizon() && p.HasDeleteHorizon() {
			kh.BaseTimestamp, kh.CRC = ph.BaseTimestamp, ph.CRC
		}
		if kh.MaxTimestamp == ph.MaxTimestamp && kh.BaseTimestamp == ph.BaseTimestamp {
			kh.CRC = ph.CRC // recompressed bytes may differ
		}
		if kh != ph || strings.Join(kb[i].records, "\n") != strings.Join(pb[i].records, "\n") {
			t.Errorf("%s: batch %d differs:\nKafka   %+v\n  %s\npartlog %+v\n  %s", what, i, header(k),
				strings.Join(kb[i].records, "\n  "), header(p), strings.Join(pb[i].records, "\n  "))
			if t.Failed() && i > 3 {
				return
			}
		}
	}
	for _, s := range segs(kafkaDir) {
		name := strings.TrimSuffix(s, ".log") + ".txnindex"
		kt, _ := os.ReadFile(filepath.Join(kafkaDir, name))
		pt, _ := os.ReadFile(filepath.Join(partlogDir, name))
		ke, _ := index.DecodeTxnIndex(kt)
		pe, _ := index.DecodeTxnIndex(pt)
		if fmt.Sprint(ke) != fmt.Sprint(pe) {
			t.Errorf("%s: %s: Kafka %v, partlog %v", what, name, ke, pe)
		}
	}
	return maxTimestamps
}

func header(v batch.View) batch.BatchHeader {
	var h batch.BatchHeader
	v.DecodeHeader(&h)
	h.BatchLength = 0 // recompression changes it
	return h
}

// maxRecords is the number of offsets a batch spans (its records before
// any cleaning).
func maxRecords(v batch.View) int { return int(v.LastOffsetDelta()) + 1 }

// TestKafkaCleanerJudge: the same input, written by Kafka's broker,
// cleaned by Kafka's cleaner and by partlog's (twice: the second round
// past the delete horizons of the first) keeps the same segments, batches,
// records, markers and transaction indexes. Then Kafka's broker loads
// the directory partlog cleaned and serves it byte for byte as partlog
// serve does, and Kafka's DumpLogSegments prints what partlog dump prints
// on it.
func TestKafkaCleanerJudge(t *testing.T) {
	in := kafka.Need(t)
	b := in.StartBroker(t, kafka.BrokerConfig{Props: map[string]string{"log.cleaner.backoff.ms": "100",
		"log.cleaner.dedupe.buffer.size": "8388608", "log.roll.ms": "100"}})
	createKafkaTopic(t, b, judgeTopic, 1, map[string]string{"cleanup.policy": "compact", "segment.ms": "100",
		"min.cleanable.dirty.ratio": "1", "delete.retention.ms": fmt.Sprint(judgeDeleteRetentionMs)})
	work := t.TempDir()
	checkpointAt := int64(-1)
	var partlogOut string
	judgeRound(t, b, 1)
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	input := copyDir(t, b.PartitionDir(judgeTopic, 0), filepath.Join(work, "input1", judgeTopic+"-0"))
	hw := judgeHighWatermark(t, b)
	for round := 1; round <= 2; round++ {
		if err := b.Start(); err != nil {
			t.Fatal(err)
		}
		if round == 2 {
			time.Sleep(judgeDeleteRetentionMs * time.Millisecond) // the first round's horizons pass
		}
		checkpointAt = waitKafkaCleaned(t, b, judgeTopic, checkpointAt)
		// The second round's records are produced now, while the cleaner
		// is off again, so that one stop gives both the first round's
		// result (compared below the offsets they take) and the second
		// round's input: a broker restart fewer.
		compareBelow := int64(math.MaxInt64)
		if round == 1 {
			compareBelow = hw
			// The broker applies the ratio set back to 1 a moment after
			// answering; the check after the stop catches a cleaning that
			// ran anyway.
			time.Sleep(500 * time.Millisecond)
			judgeRound(t, b, 2)
		}
		if err := b.Stop(); err != nil {
			t.Fatal(err)
		}
		if o := cleanerCheckpoint(t, b.LogDir, judgeTopic, 0); o != checkpointAt {
			t.Fatalf("round %d: Kafka's cleaner cleaned again (checkpoint %d, %d after the round's cleaning)", round, o, checkpointAt)
		}
		kafkaOut := copyDir(t, b.PartitionDir(judgeTopic, 0), filepath.Join(work, fmt.Sprint("kafka", round), judgeTopic+"-0"))
		partlogOut = copyDir(t, input, filepath.Join(work, fmt.Sprint("partlog", round), judgeTopic+"-0"))
		res := cleanWithPartlog(t, partlogOut, hw, time.Now())
		if res.EndOffset != checkpointAt {
			t.Errorf("round %d: partlog cleaned up to %d, Kafka to %d", round, res.EndOffset, checkpointAt)
		}
		n := compareCleaned(t, fmt.Sprint("round ", round), kafkaOut, partlogOut, compareBelow)
		t.Logf("round %d: %d records kept of %d, %d batches rewritten with a lower max timestamp by Kafka", round,
			res.RecordsKept, res.RecordsRead, n)
		if t.Failed() {
			return
		}
		input, hw = kafkaOut, judgeHighWatermark(t, b)
	}

	// Kafka loads the directory partlog cleaned (placed over its own,
	// with its own partition.metadata) and serves it as partlog serve
	// does: the same bytes.
	dst := b.PartitionDir(judgeTopic, 0)
	ents, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "partition.metadata" {
			if err := os.Remove(filepath.Join(dst, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	copyDir(t, partlogOut, dst)
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	fromKafka := fetchRaw(t, b.Client(t), judgeTopic, 0)
	served := copyDir(t, partlogOut, filepath.Join(t.TempDir(), "serve", judgeTopic+"-0"))
	s := startServer(t, filepath.Dir(served), "--auto-create=false")
	fromPartlog := fetchRaw(t, s.client(t), judgeTopic, 0)
	if !bytes.Equal(fromKafka, fromPartlog) {
		t.Fatalf("Kafka serves %d bytes of the partlog-cleaned partition, partlog serve %d; first difference: %s",
			len(fromKafka), len(fromPartlog), describeBatchDiff(fromKafka, fromPartlog))
	}
	if len(fromKafka) == 0 {
		t.Fatal("nothing served")
	}

	// Kafka's tool prints what partlog's prints on partlog's files.
	tools := in.StartTools(t)
	files, _ := filepath.Glob(filepath.Join(partlogOut, "*.log"))
	idx, _ := filepath.Glob(filepath.Join(partlogOut, "*index"))
	for _, f := range append(files, idx...) {
		args := []string{"--files", f, "--deep-iteration", "--print-data-log"}
		want, err := tools.Run(0, kafka.DumpLogSegments, args...)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(partlogBin, append([]string{"dump"}, args...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err = cmd.Run()
		// stderr too: the report of the offsets the cleaner removed.
		if err != nil || out.String() != want.Stdout || errOut.String() != want.Stderr {
			t.Errorf("dump %s: %v\npartlog:\n%s%s\nKafka:\n%s%s", filepath.Base(f), err, out.String(), errOut.String(), want.Stdout, want.Stderr)
		}
	}
}

// TestKafkaCleanedConsumerOffsets: __consumer_offsets of a Kafka 4.4
// broker whose cleaner cleaned it (offset commits, deletions that leave
// tombstones, segments rolled by time) verifies without a problem in
// partlog, and partlog dump prints what DumpLogSegments prints for each
// of its files, stdout and stderr (the report of non-consecutive offsets
// a cleaning leaves), plain, with --print-data-log and with
// --offsets-decoder (Kafka 4.4's OffsetCommit values v4, with their
// tagged topicId).
func TestKafkaCleanedConsumerOffsets(t *testing.T) {
	in := kafka.Need(t)
	b := in.StartBroker(t, kafka.BrokerConfig{Props: map[string]string{"log.cleaner.backoff.ms": "100",
		"log.cleaner.min.cleanable.ratio": "0.01", "log.roll.ms": "150", "log.cleaner.delete.retention.ms": "500"}})
	createKafkaTopic(t, b, "src", 8, nil)
	c := b.Client(t)
	srcID := topicID(t, c, "src")
	commit := func(group string, round int) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = "src", srcID
		for p := int32(0); p < 8; p++ {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, int64(round*10)+int64(p)
			rp.Metadata = kmsg.StringPtr(fmt.Sprint("round ", round))
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testContext(t, 10*time.Second), c)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range resp.Topics[0].Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("commit %s round %d: %v", group, round, err)
			}
		}
	}
	deleteOffsets := func(group string) {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = group
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = "src"
		for p := int32(0); p < 4; p++ {
			rp := kmsg.NewOffsetDeleteRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		if _, err := req.RequestWith(testContext(t, 10*time.Second), c); err != nil {
			t.Fatal(err)
		}
	}
	cleaned := int64(-1)
	for phase := 0; phase < 3; phase++ {
		for round := 0; round < 40; round++ {
			for g := 0; g < 3; g++ {
				commit(fmt.Sprintf("group-%d", g), phase*100+round)
			}
			time.Sleep(10 * time.Millisecond)
		}
		deleteOffsets(fmt.Sprint("group-", phase))
		time.Sleep(300 * time.Millisecond) // roll past the deletions
		commit("group-roll", phase)
		deadline := time.Now().Add(60 * time.Second)
		for {
			if o := cleanerCheckpoint(t, b.LogDir, "__consumer_offsets", 0); o > cleaned {
				cleaned = o
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Kafka's cleaner did not clean __consumer_offsets-0 (phase %d):\n%s", phase, b.LogTail(30))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	dir := b.PartitionDir("__consumer_offsets", 0)
	batches := segmentBatches(t, dir)
	horizons, gaps := 0, 0
	for i, v := range batches {
		if v.HasDeleteHorizon() {
			horizons++
		}
		if i > 0 && v.BaseOffset() > batches[i-1].NextOffset() {
			gaps++
		}
	}
	if horizons == 0 || gaps == 0 {
		t.Fatalf("__consumer_offsets-0 was not cleaned as the test needs: %d delete horizons, %d gaps", horizons, gaps)
	}
	if out, code := runPartlog(t, "verify", "--full", dir); code != 0 {
		t.Fatalf("partlog verify on Kafka's cleaned __consumer_offsets: exit %d\n%s", code, out)
	}
	tools := in.StartTools(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	n := 0
	for _, f := range files {
		base := filepath.Base(f)
		if !strings.HasSuffix(base, ".log") && !strings.HasSuffix(base, "index") {
			continue
		}
		for _, flags := range [][]string{{"--deep-iteration"}, {"--deep-iteration", "--print-data-log"}, {"--deep-iteration", "--offsets-decoder"}} {
			args := append([]string{"--files", f}, flags...)
			want, err := tools.Run(0, kafka.DumpLogSegments, args...)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(partlogBin, append([]string{"dump"}, args...)...)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if err := cmd.Run(); err != nil || out.String() != want.Stdout || errOut.String() != want.Stderr {
				t.Errorf("dump %s %v: %v\npartlog:\n%s%s\nKafka:\n%s%s", base, flags, err, out.String(), errOut.String(), want.Stdout, want.Stderr)
			}
			n++
		}
	}
	t.Logf("%d batches, %d with a delete horizon, %d offset gaps; %d dumps compared", len(batches), horizons, gaps, n)
}
