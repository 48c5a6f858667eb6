package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/partlog/partlog"
	"github.com/partlog/partlog/batch"
	"github.com/partlog/partlog/internal/crashfs"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// pcAck is a record `partlog serve --fsync` acknowledged (acks=all): at
// offset of partition, once the file system had applied ops ops.
type pcAck struct {
	partition int32
	offset    int64
	value     string
	ops       int64
}

// TestPowerCutServeFsync: `partlog serve --fsync` on crashfs under three
// idempotent acks=all kgo producers, until the power is cut at a random
// sync (every later write and sync of the server fails, as on a dead
// disk) and the server is killed. The image of that cut, with several
// seeds, and of earlier cuts of the same run hold every record
// acknowledged before the cut at its offset; the image of the live cut is
// also served again and read back through kgo.
func TestPowerCutServeFsync(t *testing.T) {
	cuts := 8
	if testing.Short() {
		cuts = 4
	}
	sweep := crashfs.NewSweep(t, cuts)
	sweep.Loop(1, func(run int) { powerCutServeRun(t, sweep, run) })
	t.Logf("%d images checked", sweep.Done)
}

func powerCutServeRun(t *testing.T, sweep *crashfs.Sweep, run int) {
	m := crashfs.New(t)
	rng := sweep.Rand(uint64(run))
	dir := filepath.Join(m.Dir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	from, err := m.Settle()
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, dir, "--fsync", "--partitions", "2")
	ctx := testContext(t, 60*time.Second)
	admin := s.client(t)
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "pc", 2, 1
	// Small segments (Kafka's least segment.bytes, which partlog serve
	// enforces too, and a short segment.ms): rolls under load, and images
	// that recover fast (an active segment is preallocated to
	// segment.bytes).
	for name, value := range map[string]string{"segment.bytes": "1048576", "segment.ms": "200"} {
		rc := kmsg.NewCreateTopicsRequestTopicConfig()
		rc.Name, rc.Value = name, kmsg.StringPtr(value)
		rt.Configs = append(rt.Configs, rc)
	}
	ct.Topics = append(ct.Topics, rt)
	if resp, err := ct.RequestWith(ctx, admin); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %v %+v", err, resp)
	}
	_, _, syncs, err := m.Counts()
	if err != nil {
		t.Fatal(err)
	}
	cutAt := syncs + 30 + rng.Int64N(90)
	if err := m.CutAt("sync", cutAt); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var acks []pcAck
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 3 {
		p := s.client(t, kgo.DefaultProduceTopic("pc"), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(2*time.Second),
			kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; pctx.Err() == nil; i++ {
				v := fmt.Sprintf("w%d-%06d", w, i)
				part := int32((w + i) % 2)
				p.Produce(pctx, &kgo.Record{Partition: part, Value: []byte(v)}, func(r *kgo.Record, err error) {
					if err != nil {
						return
					}
					ops, err := m.Ops()
					if err != nil {
						return // the test is ending
					}
					mu.Lock()
					acks = append(acks, pcAck{partition: r.Partition, offset: r.Offset, value: v, ops: ops})
					mu.Unlock()
				})
				if i%20 == 19 {
					time.Sleep(time.Millisecond)
				}
			}
			p.AbortBufferedRecords(context.Background())
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cut, err := m.Cut()
		if err != nil {
			t.Fatal(err)
		}
		if cut {
			break
		}
		if time.Now().After(deadline) {
			if _, err := m.CutNow(); err != nil {
				t.Fatal(err)
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Past the cut the server can make nothing durable: nothing more may
	// be acknowledged (its acks would be checked against the cut's image).
	time.Sleep(300 * time.Millisecond)
	cancel()
	wg.Wait()
	s.kill()
	mu.Lock()
	defer mu.Unlock()
	if len(acks) == 0 {
		t.Fatalf("nothing acknowledged before the cut; server log:\n%s", s.log())
	}
	r, err := m.History()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	end := r.Len() + 1
	t.Logf("%d records acknowledged, cut before op %d (sync %d)", len(acks), end, cutAt)
	sweep.Run(t, run, r, from, func(img string, im *crashfs.Image) {
		want := map[int32]map[int64]string{0: {}, 1: {}}
		n := 0
		for _, a := range acks {
			if a.ops < im.Cut || im.Cut == end {
				// At the live cut, whatever was acknowledged came before
				// it: the server could sync nothing after.
				want[a.partition][a.offset] = a.value
				n++
			}
		}
		d, err := partlog.OpenDir(filepath.Join(img, "data"), nil)
		if err != nil {
			t.Fatalf("open the image: %v", err)
		}
		for part, offs := range want {
			l, ok := d.Log(partlog.TopicPartition{Topic: "pc", Partition: part})
			if !ok {
				if len(offs) > 0 {
					t.Errorf("partition %d with %d acknowledged records missing", part, len(offs))
				}
				continue
			}
			got := recordValues(t, l)
			lost := 0
			for off, v := range offs {
				if got[off] != v {
					if lost++; lost <= 5 {
						t.Errorf("partition %d: acknowledged record %s at offset %d, the image has %q (log end %d)", part, v, off, got[off], l.LogEndOffset())
					}
				}
			}
			if lost > 5 {
				t.Errorf("partition %d: %d acknowledged records lost in all", part, lost)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if im.Cut != end || t.Failed() {
			return
		}
		// The live cut's image, served again: a consumer reads every
		// acknowledged record.
		s2 := startServer(t, filepath.Join(img, "data"))
		defer s2.stop()
		seen := map[string]bool{}
		for _, rec := range consumeAll(t, s2, "pc", n) {
			seen[string(rec.Value)] = true
		}
		for _, offs := range want {
			for _, v := range offs {
				if !seen[v] {
					t.Errorf("acknowledged record %s not read back from the restarted server", v)
				}
			}
		}
	})
}

// recordValues returns every record of l by offset.
func recordValues(t *testing.T, l *partlog.Log) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		rv, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		b := rv.Records
		if len(b) == 0 {
			rv.Release()
			break
		}
		for len(b) > 0 {
			v, err := batch.Check(b)
			if err != nil {
				rv.Release()
				t.Fatalf("batch at %d: %v", off, err)
			}
			data, err := v.RecordData(nil, 1<<24)
			if err != nil {
				rv.Release()
				t.Fatal(err)
			}
			it := v.Records(data)
			for rec, ok := it.Next(); ok; rec, ok = it.Next() {
				out[rec.Offset] = string(rec.Value)
			}
			if err := it.Err(); err != nil {
				rv.Release()
				t.Fatalf("records of the batch at %d: %v", off, err)
			}
			off = v.NextOffset()
			b = b[len(v):]
		}
		rv.Release()
	}
	return out
}
