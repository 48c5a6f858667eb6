package interop

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCrashTransactionsAllOrNothing: a kgo transactional producer
// commits and aborts transactions of four records over two partitions,
// beside an idempotent producer, while the server (--fsync) is SIGKILLed
// and restarted, often while EndTxn is under way. Afterwards a
// read_committed consumer reads every committed transaction whole and
// once, no aborted one, and every transaction whose outcome the producer
// could not learn (the server died in its EndTxn) whole or not at all;
// every acknowledged idempotent record once. The issue 34 review ran 144
// kills around EndTxn this way; PARTLOG_CRASH_KILLS sets how many (3 by
// default).
func TestCrashTransactionsAllOrNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: several restarts of the server")
	}
	kills := 3
	if s := os.Getenv("PARTLOG_CRASH_KILLS"); s != "" {
		var err error
		if kills, err = strconv.Atoi(s); err != nil {
			t.Fatalf("PARTLOG_CRASH_KILLS: %v", err)
		}
	}
	dir := t.TempDir()
	s := startServer(t, dir, "--fsync", "--partitions", "2")
	ctx := testContext(t, time.Duration(60+20*kills)*time.Second)
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "ktx", 2, 1
	ct.Topics = append(ct.Topics, rt)
	if resp, err := ct.RequestWith(ctx, s.client(t)); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %v %+v", err, resp)
	}

	const perTxn = 4
	var mu sync.Mutex
	committed, aborted, inDoubt := map[int]bool{}, map[int]bool{}, map[int]bool{}
	acked := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// The transactional producer: a new client (the same transactional
	// id: InitProducerId fences the old one and aborts its open
	// transaction) whenever the old one cannot go on.
	wg.Add(1)
	go func() {
		defer wg.Done()
		newTx := func() *kgo.Client {
			for {
				c, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.TransactionalID("kill-tx"), kgo.DefaultProduceTopic("ktx"),
					kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(10*time.Second),
					kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }), kgo.RequestRetries(100))
				if err == nil {
					return c
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		c := newTx()
		defer func() { c.Close() }()
		for id := 0; ; id++ {
			select {
			case <-stop:
				return
			default:
			}
			commit := id%5 != 4
			if err := c.BeginTransaction(); err != nil {
				c.Close()
				c = newTx()
				continue
			}
			var produceErr error
			for r := 0; r < perTxn; r++ {
				rec := &kgo.Record{Partition: int32(r % 2), Value: fmt.Appendf(nil, "tx%06d-r%d", id, r)}
				if err := c.ProduceSync(ctx, rec).FirstErr(); err != nil {
					produceErr = err
					break
				}
			}
			if produceErr != nil {
				// Nothing was asked to commit: the transaction is aborted
				// (by this client or by the next one's fencing).
				_ = c.AbortBufferedRecords(ctx)
				_ = c.EndTransaction(ctx, kgo.TryAbort)
				mu.Lock()
				aborted[id] = true
				mu.Unlock()
				c.Close()
				c = newTx()
				continue
			}
			err := c.EndTransaction(ctx, kgo.TransactionEndTry(commit))
			mu.Lock()
			switch {
			case err != nil && commit:
				inDoubt[id] = true
			case err != nil:
				aborted[id] = true // asked to abort: never visible
			case commit:
				committed[id] = true
			default:
				aborted[id] = true
			}
			mu.Unlock()
			if err != nil {
				c.Close()
				c = newTx()
			}
		}
	}()
	// The idempotent producer beside it.
	p := s.client(t, kgo.DefaultProduceTopic("ktx"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(40*time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }), kgo.MaxBufferedRecords(1000))
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("id%07d", i)
			p.Produce(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(v)}, func(_ *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[v] = true
					mu.Unlock()
				}
			})
			time.Sleep(time.Millisecond)
		}
	}()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 34))
	for k := 0; k < kills; k++ {
		time.Sleep(time.Duration(600+rng.IntN(900)) * time.Millisecond)
		s.kill()
		time.Sleep(100 * time.Millisecond)
		s.restart()
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	fctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	if err := p.Flush(fctx); err != nil {
		t.Fatalf("flush: %v", err)
	}

	// A sentinel per partition, produced last: every transaction is over
	// (the loop stops between transactions; a failed one was aborted by
	// the next client's InitProducerId), so read_committed reaches it, and
	// reading it means everything before it was read. (The last stable
	// offset cannot mark the end: the record below it is often a
	// transaction marker, which a consumer never sees.)
	for part := int32(0); part < 2; part++ {
		if err := p.ProduceSync(fctx, &kgo.Record{Partition: part, Value: fmt.Appendf(nil, "end-%d", part)}).FirstErr(); err != nil {
			t.Fatalf("sentinel of partition %d: %v", part, err)
		}
	}
	c := s.client(t, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeTopics("ktx"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]int{}
	txRecords := map[int]int{}
	for seen["end-0"] == 0 || seen["end-1"] == 0 {
		fs := c.PollFetches(fctx)
		if fctx.Err() != nil {
			t.Fatalf("read_committed did not reach the sentinels (%d records read)", len(seen))
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if seen[v]++; seen[v] > 1 {
				t.Fatalf("%s read twice", v)
			}
			if strings.HasPrefix(v, "tx") {
				id, _ := strconv.Atoi(v[2:8])
				txRecords[id]++
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	for id := range committed {
		if txRecords[id] != perTxn {
			t.Errorf("committed transaction %d: %d of %d records read", id, txRecords[id], perTxn)
		}
	}
	for id, n := range txRecords {
		switch {
		case aborted[id]:
			t.Errorf("aborted transaction %d: %d records read", id, n)
		case n != perTxn:
			t.Errorf("transaction %d: %d of %d records read (not all or nothing)", id, n, perTxn)
		}
	}
	for v := range acked {
		if seen[v] != 1 {
			t.Errorf("acknowledged record %s read %d times", v, seen[v])
		}
	}
	visibleInDoubt := 0
	for id := range inDoubt {
		if txRecords[id] == perTxn {
			visibleInDoubt++
		}
	}
	if len(committed) == 0 || len(acked) == 0 {
		t.Fatalf("nothing committed or acknowledged over %d kills; server log:\n%s", kills, s.log())
	}
	t.Logf("%d kills: %d transactions committed, %d aborted, %d in doubt (%d of them committed), %d idempotent records acknowledged",
		kills, len(committed), len(aborted), len(inDoubt), visibleInDoubt, len(acked))
	s.stop()
	if out, code := runPartlog(t, "verify", dir+"/ktx-0", dir+"/ktx-1"); code != 0 {
		t.Fatalf("partlog verify exited %d:\n%s", code, out)
	}
}
