package interop

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/partlog/partlog/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createPartlogTopic creates a topic on partlog serve with configs.
func createPartlogTopic(t *testing.T, c *kgo.Client, topic string, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t, 20*time.Second), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// lastValues reads a topic's single partition from the start,
// read_committed, until three polls in a row bring nothing, and returns
// the last value of each key ("" for a tombstone) and the number of
// records read.
func lastValues(t *testing.T, s *server, topic string) (map[string]string, int) {
	t.Helper()
	c := s.client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	defer c.Close()
	got, n := map[string]string{}, 0
	for empty := 0; empty < 3; {
		ctx := testContext(t, 2*time.Second)
		fs := c.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				t.Fatalf("fetch %s-%d: %v", topic, p, err)
			}
		})
		rs := fs.Records()
		if len(rs) == 0 {
			empty++
			continue
		}
		empty = 0
		for _, r := range rs {
			got[string(r.Key)] = string(r.Value)
			n++
		}
	}
	return got, n
}

// listEnd is the topic's last stable offset (committed) or high watermark.
func listEnd(t *testing.T, c *kgo.Client, topic string, committed bool) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	if committed {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testContext(t, 10*time.Second), c)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("list offsets %s: %v", topic, err)
	}
	return p.Offset
}

// TestKgoChangelogCompaction: a changelog topic (cleanup.policy=compact,
// segments rolled every 100 ms) on partlog serve takes keyed updates and tombstones
// from a transactional kgo producer (some transactions aborted), with the
// server restarted in the middle; its cleaner compacts the topic on its
// own, and a read_committed consumer from the start reads the last value
// of every key, from fewer records than were written. The directory then
// verifies clean.
func TestKgoChangelogCompaction(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "--log-cleaner-backoff-ms", "100")
	admin := s.client(t)
	createPartlogTopic(t, admin, "changelog", map[string]string{"cleanup.policy": "compact", "segment.ms": "100",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})
	rng := rand.New(rand.NewPCG(7, 7))
	want := map[string]string{}
	written := 0
	round := func(p *kgo.Client, n int) {
		for i := 0; i < n; i++ {
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			staged := map[string]string{}
			var rs []*kgo.Record
			for j := 0; j < 1+rng.IntN(10); j++ {
				k := fmt.Sprintf("key-%02d", rng.IntN(30))
				r := &kgo.Record{Topic: "changelog", Key: []byte(k), Value: fmt.Appendf(nil, "v%d.%d.%d", written, i, j)}
				if rng.IntN(6) == 0 {
					r.Value = nil // a tombstone
				}
				staged[k] = string(r.Value)
				rs = append(rs, r)
			}
			produceSync(t, p, rs...)
			written += len(rs)
			commit := rng.IntN(5) > 0
			end := kgo.TryCommit
			if !commit {
				end = kgo.TryAbort
			}
			if err := p.EndTransaction(testContext(t, 20*time.Second), end); err != nil {
				t.Fatal(err)
			}
			if commit {
				for k, v := range staged {
					want[k] = v
				}
			}
		}
	}
	p := s.client(t, kgo.TransactionalID("changelog-writer"), kgo.DefaultProduceTopic("changelog"))
	round(p, 60)
	p.Close()
	s.stop()
	s.restart()
	p = s.client(t, kgo.TransactionalID("changelog-writer"), kgo.DefaultProduceTopic("changelog"))
	round(p, 60)
	p.Close()

	deadline := time.Now().Add(60 * time.Second)
	var got map[string]string
	var n int
	for {
		got, n = lastValues(t, s, "changelog")
		if n < written/2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n >= written/2 {
		t.Fatalf("read %d of %d records written: the topic was not compacted\n%s", n, written, s.log())
	}
	for k, v := range want {
		if g, ok := got[k]; (ok || v != "") && g != v {
			t.Errorf("key %s: %q, want %q", k, g, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("key %s only ever written by aborted transactions is read", k)
		}
	}
	s.stop()
	if out, code := runPartlog(t, "verify", "--full", filepath.Join(dir, "changelog-0")); code != 0 {
		t.Fatalf("verify after compaction: exit %d\n%s", code, out)
	}
	t.Logf("%d records written, %d read after compaction", written, n)
}

// segmentBatches reads every batch of a partition directory's segments,
// in offset order (copies).
func segmentBatches(t *testing.T, dir string) []batch.View {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(logs)
	var out []batch.View
	for _, p := range logs {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		it := batch.NewIterator(data, 0)
		for v, ok := it.Next(); ok; v, ok = it.Next() {
			out = append(out, batch.View(bytes.Clone(v)))
		}
		if err := it.Err(); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	return out
}
