package interop

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCrashAcknowledgedRecordsSurvive: with --fsync, an idempotent
// acks=all kgo producer writes to two partitions while the server is
// SIGKILLed and restarted several times. Afterwards a consumer reads
// every acknowledged record exactly once, and every partition in the
// order produced (an unacknowledged record may be there, but only once).
func TestCrashAcknowledgedRecordsSurvive(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: several restarts of the server")
	}
	dir := t.TempDir()
	s := startServer(t, dir, "--fsync", "--partitions", "2")
	// Create the topic before producing, so that every restart serves it.
	admin := s.client(t)
	ctx := testContext(t, 60*time.Second)
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "crash", 2, 1
	ct.Topics = append(ct.Topics, rt)
	if resp, err := ct.RequestWith(ctx, admin); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %v %+v", err, resp)
	}
	p := s.client(t, kgo.DefaultProduceTopic("crash"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(40*time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.MaxBufferedRecords(2000))

	var mu sync.Mutex
	acked := map[string]bool{}
	failed := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("p%d-%07d", i%2, i/2)
			p.Produce(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(v)}, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed++
					return
				}
				acked[v] = true
			})
			if i%200 == 199 {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	const kills = 4
	for k := 0; k < kills; k++ {
		time.Sleep(1200 * time.Millisecond)
		s.kill()
		time.Sleep(150 * time.Millisecond)
		s.restart()
	}
	time.Sleep(800 * time.Millisecond)
	close(stop)
	wg.Wait()
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.Flush(fctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	mu.Lock()
	nAcked := len(acked)
	mu.Unlock()
	if nAcked == 0 {
		t.Fatalf("no record acknowledged; server log:\n%s", s.log())
	}
	t.Logf("%d records acknowledged, %d failed, over %d SIGKILLs", nAcked, failed, kills)

	// Read each partition up to its end offset.
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "crash"
	for part := int32(0); part < 2; part++ {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = part, -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	lo.Topics = append(lo.Topics, lt)
	c := s.client(t)
	resp, err := lo.RequestWith(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, lp := range resp.Topics[0].Partitions {
		total += int(lp.Offset)
	}
	got := consumeAll(t, s, "crash", total)
	seen := map[string]int{}
	last := map[int32]string{}
	for _, r := range got {
		v := string(r.Value)
		seen[v]++
		if seen[v] > 1 {
			t.Fatalf("record %s read twice", v)
		}
		if v <= last[r.Partition] {
			t.Fatalf("partition %d: %s after %s (out of order)", r.Partition, v, last[r.Partition])
		}
		last[r.Partition] = v
	}
	mu.Lock()
	defer mu.Unlock()
	for v := range acked {
		if seen[v] != 1 {
			t.Fatalf("acknowledged record %s read %d times", v, seen[v])
		}
	}
	t.Logf("read %d records (%d acknowledged), each once, in order", len(got), nAcked)
	s.stop()
	if out, code := runPartlog(t, "verify", dir+"/crash-0", dir+"/crash-1"); code != 0 {
		t.Fatalf("partlog verify exited %d:\n%s", code, out)
	}
}
