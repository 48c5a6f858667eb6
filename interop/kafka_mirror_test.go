package interop

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/interop/kafka"
)

// TestMirrorFromKafka mirrors a topic of a running Apache Kafka 4.4
// broker (which knows nothing of KIP-1279) into `partlog serve`: the
// destination must hold the source's batches byte for byte (offsets,
// CRCs, leader epochs, transactions and aborts, every codec), across a
// SIGKILL of the destination, serve the same read_committed view, and a
// stop must write one barrier at the mirrored log end, after which the
// partitions take their own producers.
func TestMirrorFromKafka(t *testing.T) {
	in := kafka.Need(t)
	src := in.StartBroker(t, kafka.BrokerConfig{})
	const topic = "orders"
	const partitions = 2
	createKafkaTopic(t, src, topic, partitions, nil)

	// Before the mirror starts: every codec, idempotent, keys and
	// headers, a committed and an aborted transaction on each partition.
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		c := src.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(5*time.Millisecond))
		produceToKafka(t, c, partitions, 40, fmt.Sprintf("%v", codec))
	}
	txn := src.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("mirror-from-kafka"), kgo.TransactionTimeout(30*time.Second))
	kafkaTransaction(t, txn, partitions, "committed-1", true)
	kafkaTransaction(t, txn, partitions, "aborted-1", false)

	dst := startServer(t, t.TempDir())
	a, code := mirrorCLI(t, "start", "--server", dst.admin, "--dir", dst.dir, "--source", src.Addr, "--topics", topic)
	if code != 0 || len(a.Partitions) != partitions {
		t.Fatalf("mirror start from Kafka: exit %d, %+v\n%s", code, a, dst.log())
	}
	waitMirroredFromKafka(t, dst, src, topic, partitions)

	// The destination crashes while mirroring; Kafka has no admin
	// endpoint to ask for the position, so the restart must resume from
	// the local checkpoint and log, not start over.
	dst.kill()
	produceToKafka(t, src.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner())), partitions, 10, "while-down")
	dst.restart()
	waitMirroredFromKafka(t, dst, src, topic, partitions)

	// While mirroring: more transactions and plain records arrive.
	kafkaTransaction(t, txn, partitions, "committed-2", true)
	kafkaTransaction(t, txn, partitions, "aborted-2", false)
	produceToKafka(t, src.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner())), partitions, 10, "late")
	waitMirroredFromKafka(t, dst, src, topic, partitions)

	srcClient, dstClient := src.Client(t), dst.client(t)
	ends := make([]int64, partitions)
	for p := int32(0); p < partitions; p++ {
		want := fetchRaw(t, srcClient, topic, p)
		got := fetchRaw(t, dstClient, topic, p)
		if !bytes.Equal(want, got) {
			t.Fatalf("partition %d: the mirror's batches differ from Kafka's:\n%s", p, describeBatchDiff(want, got))
		}
		requireCoverage(t, p, want)
		ends[p] = lastOffset(t, want) + 1
		srcView := readCommitted(t, src.Addr, topic, p, 1)
		dstView := readCommitted(t, dst.addr, topic, p, len(srcView))
		if !slices.Equal(srcView, dstView) || len(srcView) == 0 {
			t.Fatalf("partition %d read_committed: Kafka %d records, partlog %d\nKafka: %v\npartlog: %v", p, len(srcView), len(dstView), srcView, dstView)
		}
		for _, v := range srcView {
			if bytes.HasPrefix([]byte(v), []byte("aborted")) {
				t.Fatalf("partition %d: read_committed shows aborted record %q", p, v)
			}
		}
	}

	// Stop: one barrier per partition, at the mirrored log end.
	a, code = mirrorCLI(t, "stop", "--server", dst.admin, "--dir", dst.dir, "--topics", topic)
	if code != 0 || len(a.Partitions) != partitions {
		t.Fatalf("mirror stop: exit %d, %+v", code, a)
	}
	clusterID := kafkaClusterID(t, srcClient)
	for _, st := range a.Partitions {
		if st.SourceClusterID != clusterID {
			t.Fatalf("partition %d: source cluster %q, want Kafka's %q", st.Partition, st.SourceClusterID, clusterID)
		}
		if st.State != "STOPPED" || st.BarrierOffset != ends[st.Partition] {
			t.Fatalf("partition %d after stop: %+v, want STOPPED with the barrier at %d", st.Partition, st, ends[st.Partition])
		}
		raw := fetchRaw(t, dstClient, topic, st.Partition)
		h, err := lastBatch(raw)
		if err != nil {
			t.Fatal(err)
		}
		if h.BaseOffset != ends[st.Partition] || !h.IsControl() {
			t.Fatalf("partition %d: last batch %+v, want the barrier at %d", st.Partition, h, ends[st.Partition])
		}
	}
	// The destination now takes its own producers; Kafka's producer ids
	// (0, 1, ...) are handed out by partlog too and must not collide.
	own := dst.client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceToKafka(t, own, partitions, 5, "after-stop")
	for p := int32(0); p < partitions; p++ {
		got := readCommitted(t, dst.addr, topic, p, 1)
		if len(got) == 0 || got[len(got)-1] != fmt.Sprintf("after-stop-%d-4", p) {
			t.Fatalf("partition %d after stop: read_committed ends %v", p, got[max(0, len(got)-3):])
		}
	}
}

// createKafkaTopic creates a topic on a Kafka broker and waits until it
// has leaders.
func createKafkaTopic(t testing.TB, b *kafka.Broker, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	createTopicOn(t, b.Client(t), topic, partitions, configs)
}

// createTopicOn creates a topic through c (Kafka or partlog serve) and
// waits until every partition has a leader.
func createTopicOn(t testing.TB, c *kgo.Client, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 60000
	resp, err := req.RequestWith(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	for {
		m := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		m.Topics = append(m.Topics, mt)
		mr, err := m.RequestWith(ctx, c)
		if err == nil && len(mr.Topics) == 1 && mr.Topics[0].ErrorCode == 0 && len(mr.Topics[0].Partitions) == int(partitions) {
			ready := true
			for _, p := range mr.Topics[0].Partitions {
				ready = ready && p.ErrorCode == 0 && p.Leader >= 0
			}
			if ready {
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("topic %s has no leaders: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// produceToKafka produces n keyed records with a header to each
// partition, named prefix-partition-i.
func produceToKafka(t *testing.T, c *kgo.Client, partitions int32, n int, prefix string) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	var rs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < n; i++ {
			rs = append(rs, &kgo.Record{Partition: p, Key: fmt.Appendf(nil, "k%d", i%7),
				Value:   fmt.Appendf(nil, "%s-%d-%d", prefix, p, i),
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(prefix)}}})
		}
	}
	if err := c.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce %s: %v", prefix, err)
	}
}

// kafkaTransaction writes three records to every partition in one
// transaction and commits or aborts it.
func kafkaTransaction(t *testing.T, c *kgo.Client, partitions int32, prefix string, commit bool) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	if err := c.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < 3; i++ {
			rs = append(rs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d", prefix, p, i)})
		}
	}
	if err := c.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("transactional produce %s: %v", prefix, err)
	}
	end := kgo.TryCommit
	if !commit {
		end = kgo.TryAbort
	}
	if err := c.EndTransaction(ctx, end); err != nil {
		t.Fatalf("end transaction %s: %v", prefix, err)
	}
}

// waitMirroredFromKafka waits until every partition's mirror reached the
// source's high watermark.
func waitMirroredFromKafka(t *testing.T, dst *server, src *kafka.Broker, topic string, partitions int32) {
	t.Helper()
	c := src.Client(t)
	deadline := time.Now().Add(60 * time.Second)
	for p := int32(0); p < partitions; p++ {
		want := highWatermark(t, c, topic, p)
		for {
			st := statusOf(t, dst, topic, p)
			if st.State == "MIRRORING" && st.LogEndOffset == want {
				break
			}
			if time.Now().After(deadline) || st.State == "FAILED" {
				t.Fatalf("partition %d did not mirror up to Kafka's %d: %+v\n%s", p, want, st, dst.log())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// statusOf is one partition of `partlog mirror status`.
func statusOf(t *testing.T, s *server, topic string, partition int32) mirrorStatus {
	t.Helper()
	a, code := mirrorCLI(t, "status", "--server", s.admin)
	if code != 0 {
		t.Fatalf("mirror status: exit %d, %+v", code, a)
	}
	for _, p := range a.Partitions {
		if p.Topic == topic && p.Partition == partition {
			return p
		}
	}
	t.Fatalf("mirror status has no %s-%d: %+v", topic, partition, a)
	return mirrorStatus{}
}

// highWatermark is ListOffsets latest (read_uncommitted) of a partition.
func highWatermark(t *testing.T, c *kgo.Client, topic string, partition int32) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t, 10*time.Second), c)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		t.Fatalf("list offsets %s-%d: %v", topic, partition, err)
	}
	return r.Offset
}

// fetchRaw returns a partition's record batches from offset 0 as the
// broker sends them (read_uncommitted), fetching until the high
// watermark.
func fetchRaw(t *testing.T, c *kgo.Client, topic string, partition int32) []byte {
	t.Helper()
	var out []byte
	offset := int64(0)
	id := topicID(t, c, topic)
	for {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = -1, 100, 64<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id // kgo picks the version: by name or by id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = partition, offset, 64<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testContext(t, 10*time.Second), c)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatalf("fetch %s-%d at %d: %v", topic, partition, offset, err)
		}
		whole := wholeBatches(p.RecordBatches)
		out = append(out, whole...)
		if len(whole) > 0 {
			offset = lastOffset(t, whole) + 1
		}
		if offset >= p.HighWatermark || len(whole) == 0 {
			return out
		}
	}
}

// requireCoverage fails unless a partition's batches hold what the
// comparison claims to cover: every codec, transactional batches and
// both kinds of marker, from more than one producer.
func requireCoverage(t *testing.T, p int32, b []byte) {
	t.Helper()
	codecs := map[batch.Compression]bool{}
	producers := map[int64]bool{}
	var txnBatches, markers int
	it := batch.NewIterator(b, 0)
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		h := it.Header()
		codecs[v.Compression()] = true
		producers[h.ProducerID] = true
		switch {
		case h.IsControl():
			markers++
		case h.IsTransactional():
			txnBatches++
		}
	}
	if len(codecs) != 5 || txnBatches < 4 || markers < 4 || len(producers) < 3 {
		t.Fatalf("partition %d covers too little: codecs %v, %d transactional batches, %d markers, producers %v", p, codecs, txnBatches, markers, producers)
	}
	t.Logf("partition %d: %d bytes identical: codecs %v, %d transactional batches, %d markers, %d producers", p, len(b), codecs, txnBatches, markers, len(producers))
}

// kafkaClusterID is the cluster id a broker's Metadata answers.
func kafkaClusterID(t *testing.T, c *kgo.Client) string {
	t.Helper()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(testContext(t, 10*time.Second), c)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ClusterID == nil || *resp.ClusterID == "" {
		t.Fatal("Kafka's Metadata has no cluster id")
	}
	return *resp.ClusterID
}

// topicID is the topic's id from Metadata.
func topicID(t *testing.T, c *kgo.Client, topic string) [16]byte {
	t.Helper()
	m := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	m.Topics = append(m.Topics, mt)
	resp, err := m.RequestWith(testContext(t, 10*time.Second), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata of %s: %+v", topic, resp.Topics)
	}
	return resp.Topics[0].TopicID
}

// wholeBatches drops a batch cut by the response's size limit (and
// stops at a batch that fails its CRC, which the comparison then shows).
func wholeBatches(b []byte) []byte {
	it := batch.NewIterator(b, 0)
	for _, ok := it.Next(); ok; _, ok = it.Next() {
	}
	return b[:it.Offset()]
}

// lastBatch decodes the header of the last whole batch of b.
func lastBatch(b []byte) (batch.BatchHeader, error) {
	it := batch.NewIterator(b, 0)
	var last batch.BatchHeader
	found := false
	for _, ok := it.Next(); ok; _, ok = it.Next() {
		last, found = *it.Header(), true
	}
	if !found {
		return last, fmt.Errorf("no whole batch in %d bytes: %v", len(b), it.Err())
	}
	return last, nil
}

func lastOffset(t *testing.T, b []byte) int64 {
	t.Helper()
	h, err := lastBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	return h.LastOffset()
}

// describeBatchDiff names the first batch that differs.
func describeBatchDiff(want, got []byte) string {
	iw, ig := batch.NewIterator(want, 0), batch.NewIterator(got, 0)
	for {
		vw, okw := iw.Next()
		vg, okg := ig.Next()
		if !okw || !okg {
			return fmt.Sprintf("Kafka has %d bytes (%v), partlog %d (%v); equal up to byte %d", len(want), iw.Err(), len(got), ig.Err(), iw.Offset())
		}
		if !bytes.Equal(vw, vg) {
			return fmt.Sprintf("batch at byte %d: Kafka %+v\npartlog %+v", iw.Offset()-len(vw), *iw.Header(), *ig.Header())
		}
	}
}

// readCommitted reads a partition read_committed from the start, with a
// new client of addr, until no record came for a second after at least
// want records, and returns the values.
func readCommitted(t *testing.T, addr, topic string, partition int32, want int) []string {
	t.Helper()
	c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	var vals []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := c.PollFetches(ctx)
		cancel()
		fs.EachError(func(_ string, _ int32, err error) {
			if err != context.DeadlineExceeded {
				t.Fatalf("read_committed %s-%d: %v", topic, partition, err)
			}
		})
		n := 0
		fs.EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)); n++ })
		if n == 0 && len(vals) >= want {
			return vals
		}
		if time.Now().After(deadline) {
			t.Fatalf("read_committed %s-%d: %d records, want at least %d", topic, partition, len(vals), want)
		}
	}
}
