package kafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Corpus is a log directory written by Apache Kafka's broker under
// real clients, stopped cleanly: the files partlog must read as Kafka
// does. WriteCorpus makes one; its topics (CorpusTopics) cover every
// codec, plain, idempotent and transactional producers (kgo's and
// Kafka's Java client) with commits and aborts, a transaction left open,
// LogAppendTime, segments rolled by size and by time and deleted by
// retention, a log start moved by DeleteRecords, two leader epochs
// (the broker is restarted halfway), and the internal topics
// __consumer_offsets and __transaction_state. The metadata log
// (MetaDir/__cluster_metadata-0) holds KRaft snapshots (.checkpoint).
//
// The files change from run to run (timestamps, producer ids); their
// shapes do not. Tests copy what they damage: a Corpus is read-only.
type Corpus struct {
	// Dir holds the broker's files (BrokerConfig.Dir).
	Dir string
	// LogDir is log.dirs: the partition directories and the log-dir
	// checkpoints, .kafka_cleanshutdown included.
	LogDir string
	// MetaDir is metadata.log.dir; its __cluster_metadata-0 holds the
	// metadata log and its snapshots.
	MetaDir string
	// ClusterID is the cluster the directories were formatted for.
	ClusterID string
	// Topics are the topics written, by name, with what each holds.
	Topics []CorpusTopic
}

// CorpusTopic is one topic of a Corpus.
type CorpusTopic struct {
	Name       string
	Partitions int32
	// Configs are the topic's configuration overrides.
	Configs map[string]string
	// Holds says what the topic's partitions hold, for test messages.
	Holds string
	// Internal marks the broker's own topics (written by its
	// coordinators, not by a producer of the corpus).
	Internal bool
}

// The topics of a corpus, by name.
const (
	CorpusNone      = "codec-none"   // plain (no producer id) and idempotent batches, uncompressed
	CorpusGzip      = "codec-gzip"   // idempotent, gzip
	CorpusSnappy    = "codec-snappy" // idempotent, snappy
	CorpusLZ4       = "codec-lz4"    // idempotent, lz4
	CorpusZstd      = "codec-zstd"   // idempotent, zstd
	CorpusTxn       = "txn"          // two transactional producers, commits, aborts, one left open
	CorpusJava      = "java"         // Kafka's Java client: idempotent and transactional, lz4
	CorpusAppend    = "logappend"    // message.timestamp.type=LogAppendTime
	CorpusRetention = "retention"    // rolled by size and time, deleted by retention, DeleteRecords
	CorpusOffsets   = "__consumer_offsets"
	CorpusTxnState  = "__transaction_state"
)

// corpusSegmentBytes is the segment size of the corpus topics, small so
// every partition rolls several times. segment.bytes cannot go below
// 1 MiB; Kafka's testing-only internal.segment.bytes can.
const corpusSegmentBytes = "2500"

// corpusTopics are the topics WriteCorpus creates (the internal ones
// are created by the broker when first used).
func corpusTopics() []CorpusTopic {
	small := func(extra ...string) map[string]string {
		m := map[string]string{
			"internal.segment.bytes": corpusSegmentBytes,
			"index.interval.bytes":   "300",
			"file.delete.delay.ms":   "0",
		}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	return []CorpusTopic{
		{Name: CorpusNone, Partitions: 1, Configs: small(), Holds: "uncompressed batches of a plain producer (no producer id) and of an idempotent one; keys, null keys, null and empty values, invalid UTF-8, headers, timestamps out of order"},
		{Name: CorpusGzip, Partitions: 1, Configs: small(), Holds: "idempotent gzip batches"},
		{Name: CorpusSnappy, Partitions: 1, Configs: small(), Holds: "idempotent snappy batches"},
		{Name: CorpusLZ4, Partitions: 1, Configs: small(), Holds: "idempotent lz4 batches"},
		{Name: CorpusZstd, Partitions: 1, Configs: small(), Holds: "idempotent zstd batches"},
		{Name: CorpusTxn, Partitions: 2, Configs: small(), Holds: "two transactional kgo producers (one zstd), committed and aborted transactions across both partitions, one transaction left open at the stop"},
		{Name: CorpusJava, Partitions: 1, Configs: small(), Holds: "Kafka's Java producer: idempotent and transactional lz4 batches with headers, a commit and an abort"},
		{Name: CorpusAppend, Partitions: 1, Configs: small("message.timestamp.type", "LogAppendTime"), Holds: "LogAppendTime batches, uncompressed and snappy"},
		{Name: CorpusRetention, Partitions: 1, Configs: small("internal.segment.bytes", "2000", "retention.bytes", "5000", "segment.ms", "400"), Holds: "segments rolled by size and by time, the oldest deleted by retention.bytes, the log start moved into a segment by DeleteRecords"},
		{Name: CorpusOffsets, Partitions: 1, Internal: true, Holds: "a consumer group's joins, syncs and offset commits"},
		{Name: CorpusTxnState, Partitions: 1, Internal: true, Holds: "the transactions of txn and java"},
	}
}

// corpusBrokerProps are the broker settings of a corpus: retention
// checked often, KRaft snapshots after a few records of metadata.
func corpusBrokerProps() map[string]string {
	return map[string]string{
		"log.retention.check.interval.ms":                             "200",
		"log.initial.task.delay.ms":                                   "0",
		"log.segment.delete.delay.ms":                                 "0",
		"metadata.log.max.record.bytes.between.snapshots":             "8000",
		"metadata.log.max.snapshot.interval.ms":                       "5000",
		"transaction.state.log.segment.bytes":                         "1048576",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "3600000",
		"auto.create.topics.enable":                                   "false",
	}
}

// PartitionDir is the directory of topic's partition p in the corpus.
func (c *Corpus) PartitionDir(topic string, p int32) string {
	return filepath.Join(c.LogDir, topic+"-"+strconv.Itoa(int(p)))
}

// MetadataDir is the metadata log's partition directory
// (__cluster_metadata-0).
func (c *Corpus) MetadataDir() string { return filepath.Join(c.MetaDir, "__cluster_metadata-0") }

// PartitionDirs lists every partition directory of the corpus's log
// directory (internal topics included), sorted.
func (c *Corpus) PartitionDirs() []string {
	var out []string
	for _, tp := range c.Topics {
		for p := int32(0); p < tp.Partitions; p++ {
			out = append(out, c.PartitionDir(tp.Name, p))
		}
	}
	sort.Strings(out)
	return out
}

// Files lists the files of dir whose name ends in one of exts (".log",
// ".index", ...; none: every regular file), sorted by name.
func Files(dir string, exts ...string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		keep := len(exts) == 0
		for _, x := range exts {
			if strings.HasSuffix(e.Name(), x) {
				keep = true
			}
		}
		if keep {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// WriteCorpus writes a corpus into dir (created; it must not exist yet
// or be empty): it formats and starts a broker there, creates the
// topics, produces in two rounds with a clean restart between them (so
// every partition has two leader epochs), lets retention and the
// metadata snapshots happen, and stops the broker cleanly. It takes
// about half a minute. Kafka's failures end the test through
// Unavailable; the corpus's own, through t.Fatal.
func (in *Install) WriteCorpus(t testing.TB, dir string) *Corpus {
	t.Helper()
	b, err := in.NewBroker(t, BrokerConfig{Dir: dir, Props: corpusBrokerProps()})
	if err != nil {
		Unavailable(t, err)
	}
	if err := b.Start(); err != nil {
		Unavailable(t, err)
	}
	c := &Corpus{Dir: b.Dir, LogDir: b.LogDir, MetaDir: b.MetaDir, ClusterID: b.ClusterID, Topics: corpusTopics()}
	w := &corpusWriter{t: t, b: b, in: in}
	w.createTopics(c.Topics)
	w.round(0)
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	w.round(1)
	w.finish()
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	return c
}

// corpusWriter produces a corpus's records.
type corpusWriter struct {
	t  testing.TB
	b  *Broker
	in *Install
	// open is the transactional client whose transaction stays open at
	// the final stop.
	open *kgo.Client
}

func (w *corpusWriter) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 60*time.Second)
}

func (w *corpusWriter) createTopics(topics []CorpusTopic) {
	w.t.Helper()
	cl := w.b.Client(w.t)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	for _, tp := range topics {
		if tp.Internal {
			continue
		}
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = tp.Name
		rt.NumPartitions = tp.Partitions
		rt.ReplicationFactor = 1
		keys := make([]string, 0, len(tp.Configs))
		for k := range tp.Configs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name = k
			v := tp.Configs[k]
			cfg.Value = &v
			rt.Configs = append(rt.Configs, cfg)
		}
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := w.ctx()
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		w.t.Fatalf("creating the corpus topics: %v", err)
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 {
			msg := ""
			if rt.ErrorMessage != nil {
				msg = *rt.ErrorMessage
			}
			w.t.Fatalf("creating topic %s: error %d %s", rt.Topic, rt.ErrorCode, msg)
		}
	}
}

// corpusInvalidUTF8 are values that are not UTF-8: truncated sequences,
// surrogates, overlong forms, code points above U+10FFFF.
var corpusInvalidUTF8 = [][]byte{
	{0xc3, 0x28, 'b', 0xe2, 0x82},
	{0xed, 0xa0, 0x80, 'x', 0xed, 0xa7, 0x41},
	{0xe0, 0x80, 0x80, 0xf4, 0x90, 0x80, 0x80},
	{'y', 0xf0, 0x9f, 0x41, 0xc0, 0xaf, 0xf0, 0x9f},
	{0xf5, 0x80, 0x80, 0x80, 0xe0, 0xa0},
}

// corpusRecords are the records of one producer's round: their keys,
// values and headers cover what a dump prints differently.
func corpusRecords(topic string, round, n int, now time.Time) []*kgo.Record {
	var rs []*kgo.Record
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Timestamp: now.Add(time.Duration(i) * time.Millisecond)}
		switch i % 9 {
		case 0:
			r.Key, r.Value = []byte(fmt.Sprintf("k%d-%d", round, i)), []byte(fmt.Sprintf("value %d of round %d", i, round))
		case 1:
			r.Value = []byte(strings.Repeat("x", 40+i))
		case 2:
			r.Key = []byte("tombstone") // null value
		case 3:
			r.Key, r.Value = []byte{}, []byte{} // empty, not null
		case 4:
			// Invalid UTF-8, where Java's decoder groups replacement
			// characters its own way.
			r.Key, r.Value = []byte{0xff, 0xfe, 'a'}, corpusInvalidUTF8[(round*n+i)%len(corpusInvalidUTF8)]
		case 5:
			r.Key, r.Value = []byte("héllo"), []byte("wörld ✓ 日本")
			r.Headers = []kgo.RecordHeader{{Key: "h1", Value: []byte("a")}, {Key: "", Value: nil}, {Key: "trace-id", Value: []byte{1, 2}}}
		case 6:
			// A timestamp older than the previous records: the batch's
			// max timestamp is not its last record's.
			r.Timestamp = now.Add(-time.Hour)
			r.Value = []byte("late")
		case 7:
			r.Key, r.Value = []byte{0, 0, 0, 42}, []byte{0, 0, 0, 0, 0, 0, 0, 7} // int and long decoders
		default:
			r.Value = []byte(fmt.Sprintf("%d", i))
			r.Headers = []kgo.RecordHeader{{Key: "only", Value: []byte("h")}}
		}
		rs = append(rs, r)
	}
	return rs
}

// client is a kgo client of the corpus broker with opts, closed at the
// end of the test.
func (w *corpusWriter) client(opts ...kgo.Opt) *kgo.Client {
	base := []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0)}
	return w.b.Client(w.t, append(base, opts...)...)
}

// produce sends rs in batches of batchSize records (each batch one
// ProduceSync, so batch boundaries do not depend on timing).
func (w *corpusWriter) produce(cl *kgo.Client, rs []*kgo.Record, batchSize int) {
	w.t.Helper()
	ctx, cancel := w.ctx()
	defer cancel()
	for len(rs) > 0 {
		n := min(batchSize, len(rs))
		if err := cl.ProduceSync(ctx, rs[:n]...).FirstErr(); err != nil {
			w.t.Fatalf("producing to %s: %v", rs[0].Topic, err)
		}
		rs = rs[n:]
	}
}

// round is one round of production to every topic.
func (w *corpusWriter) round(round int) {
	w.t.Helper()
	now := time.Now()
	plain := w.client(kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	idem := w.client(kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := 0; i < 3; i++ {
		w.produce(plain, corpusRecords(CorpusNone, round, 7, now), 3)
		w.produce(idem, corpusRecords(CorpusNone, round, 11, now), 4)
	}
	for topic, codec := range map[string]kgo.CompressionCodec{
		CorpusGzip: kgo.GzipCompression(), CorpusSnappy: kgo.SnappyCompression(),
		CorpusLZ4: kgo.Lz4Compression(), CorpusZstd: kgo.ZstdCompression(),
	} {
		cl := w.client(kgo.ProducerBatchCompression(codec))
		for i := 0; i < 4; i++ {
			w.produce(cl, corpusRecords(topic, round, 25, now), 9)
		}
	}
	w.transactions(round, now)
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.SnappyCompression()} {
		cl := w.client(kgo.ProducerBatchCompression(codec))
		w.produce(cl, corpusRecords(CorpusAppend, round, 30, now), 6)
	}
	w.retention(round)
	w.javaProducer(round)
	w.consumerGroup()
}

// transactions runs two transactional producers over both partitions of
// CorpusTxn: commits and aborts interleaved, so the .txnindex entries
// have distinct last stable offsets.
func (w *corpusWriter) transactions(round int, now time.Time) {
	w.t.Helper()
	a := w.client(kgo.TransactionalID("corpus-a"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	b := w.client(kgo.TransactionalID("corpus-b"), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	ctx, cancel := w.ctx()
	defer cancel()
	for i, commit := range []bool{true, false, true, false, false, true} {
		cl := a
		if i%2 == 1 {
			cl = b
		}
		if err := cl.BeginTransaction(); err != nil {
			w.t.Fatal(err)
		}
		for p := int32(0); p < 2; p++ {
			rs := corpusRecords(CorpusTxn, round, 5+i, now)
			for _, r := range rs {
				r.Partition = p
			}
			w.produce(cl, rs, 3)
		}
		if err := cl.Flush(ctx); err != nil {
			w.t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			w.t.Fatalf("ending transaction %d (commit %v): %v", i, commit, err)
		}
	}
}

// retention writes CorpusRetention in steps, so segments roll by size
// and by time and retention deletes the oldest, then moves the log
// start into the first remaining segment with DeleteRecords.
func (w *corpusWriter) retention(round int) {
	w.t.Helper()
	cl := w.client(kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := 0; i < 6; i++ {
		w.produce(cl, corpusRecords(CorpusRetention, round, 20, time.Now()), 5)
		time.Sleep(450 * time.Millisecond) // past segment.ms: the next append rolls
	}
	if round == 0 {
		return
	}
	// Wait for retention to delete a segment, then move the log start
	// past it.
	start := w.waitLogStart(CorpusRetention, 1, 20*time.Second)
	ctx, cancel := w.ctx()
	defer cancel()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = CorpusRetention
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Offset = start + 3
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		w.t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		w.t.Fatalf("DeleteRecords: error %d", code)
	}
}

// waitLogStart waits until the log start of topic-0 is at least min and
// returns it.
func (w *corpusWriter) waitLogStart(topic string, min int64, timeout time.Duration) int64 {
	w.t.Helper()
	cl := w.b.Client(w.t)
	deadline := time.Now().Add(timeout)
	for {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -2
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		if err == nil && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
			if off := resp.Topics[0].Partitions[0].Offset; off >= min {
				return off
			}
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("retention deleted nothing of %s within %v (ListOffsets: %v)", topic, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// javaProducer runs the CorpusProducer helper: Kafka's own producer.
func (w *corpusWriter) javaProducer(round int) {
	w.t.Helper()
	if _, err := w.in.Helpers(); err != nil {
		Unavailable(w.t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := w.in.Run(ctx, "CorpusProducer", w.b.Addr, CorpusJava, strconv.Itoa(round))
	if err != nil {
		w.t.Fatal(err)
	}
	if res.Code != 0 {
		w.t.Fatalf("CorpusProducer exited %d:\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
}

// consumerGroup consumes CorpusNone in a group and commits offsets
// twice, which writes __consumer_offsets.
func (w *corpusWriter) consumerGroup() {
	w.t.Helper()
	cl := w.b.Client(w.t, kgo.ConsumerGroup("corpus-group"), kgo.ConsumeTopics(CorpusNone),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	ctx, cancel := w.ctx()
	defer cancel()
	for commits := 0; commits < 2; {
		fs := cl.PollRecords(ctx, 20)
		if err := ctx.Err(); err != nil {
			w.t.Fatalf("consumer group: %v", err)
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			w.t.Fatal(err)
		}
		commits++
	}
	cl.Close()
}

// finish leaves a transaction open at the stop (its producer's state
// then has a first offset in the snapshot Kafka writes) and waits for a
// KRaft snapshot.
func (w *corpusWriter) finish() {
	w.t.Helper()
	cl := w.client(kgo.TransactionalID("corpus-open"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := cl.BeginTransaction(); err != nil {
		w.t.Fatal(err)
	}
	w.produce(cl, corpusRecords(CorpusTxn, 2, 4, time.Now()), 2)
	w.open = cl
	deadline := time.Now().Add(30 * time.Second)
	for {
		snaps, _ := filepath.Glob(filepath.Join(w.b.MetaDir, "__cluster_metadata-0", "*.checkpoint"))
		if len(snaps) > 0 {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatal(errors.New("no KRaft snapshot was written within 30 s"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// OpenCorpus describes a corpus WriteCorpus wrote into dir earlier (to
// reuse one between runs while developing a test).
func OpenCorpus(dir string) (*Corpus, error) {
	c := &Corpus{Dir: dir, LogDir: filepath.Join(dir, "data"), MetaDir: filepath.Join(dir, "meta"), Topics: corpusTopics()}
	for _, p := range c.PartitionDirs() {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s is not a corpus: %w", dir, err)
		}
	}
	props, err := os.ReadFile(filepath.Join(c.LogDir, "meta.properties"))
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(props), "\n") {
		if v, ok := strings.CutPrefix(line, "cluster.id="); ok {
			c.ClusterID = strings.TrimSpace(v)
		}
	}
	return c, nil
}

// Check reports what the corpus lacks of what its topics promise: several
// segments per partition, producer snapshots, transaction indexes where
// transactions aborted, a log start moved past the first segment by
// retention, two leader epochs, KRaft snapshots, the log directory's
// checkpoints and clean-shutdown marker. Tests call it so that a Kafka
// that stopped writing one of them fails loudly instead of testing less.
func (c *Corpus) Check() error {
	var missing []string
	need := func(ok bool, format string, args ...any) {
		if !ok {
			missing = append(missing, fmt.Sprintf(format, args...))
		}
	}
	for _, name := range []string{".kafka_cleanshutdown", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint", "meta.properties"} {
		_, err := os.Stat(filepath.Join(c.LogDir, name))
		need(err == nil, "%s in the log directory", name)
	}
	for _, tp := range c.Topics {
		for p := int32(0); p < tp.Partitions; p++ {
			dir := c.PartitionDir(tp.Name, p)
			logs, _ := Files(dir, ".log")
			snaps, _ := Files(dir, ".snapshot")
			txns, _ := Files(dir, ".txnindex")
			epochs, _ := os.ReadFile(filepath.Join(dir, "leader-epoch-checkpoint"))
			need(len(snaps) > 0, "a producer snapshot in %s", filepath.Base(dir))
			need(len(strings.Fields(string(epochs))) >= 6, "two leader epochs in %s/leader-epoch-checkpoint", filepath.Base(dir))
			if !tp.Internal {
				need(len(logs) >= 2, "several segments in %s (%d)", filepath.Base(dir), len(logs))
			}
			if tp.Name == CorpusTxn || tp.Name == CorpusJava {
				need(len(txns) > 0, "a .txnindex in %s", filepath.Base(dir))
			}
			if tp.Name == CorpusRetention && len(logs) > 0 {
				need(filepath.Base(logs[0]) != "00000000000000000000.log", "segments deleted by retention in %s", filepath.Base(dir))
			}
		}
	}
	ckpts, _ := filepath.Glob(filepath.Join(c.MetadataDir(), "*-*.checkpoint"))
	need(len(ckpts) > 0, "a KRaft snapshot (.checkpoint) in __cluster_metadata-0")
	if len(missing) > 0 {
		return fmt.Errorf("the corpus in %s lacks: %s", c.Dir, strings.Join(missing, "; "))
	}
	return nil
}
