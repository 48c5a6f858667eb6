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

// TestKgoConsumerGroup: three members of a group share six partitions,
// one leaves and the other two take its partitions over; offsets
// committed by the members are fetched back, and a new member of the
// group resumes after them.
func TestKgoConsumerGroup(t *testing.T) {
	s := startServer(t, t.TempDir(), "--partitions", "6")
	requireGroups(t, s)
	ctx := testContext(t, 60*time.Second)
	p := s.client(t, kgo.DefaultProduceTopic("grp"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 60 {
		produceSync(t, p, &kgo.Record{Partition: int32(i % 6), Value: []byte(fmt.Sprint(i))})
	}
	var mu sync.Mutex
	assigned := map[int]map[int32]bool{}
	member := func(id int) *kgo.Client {
		return s.client(t, kgo.ConsumerGroup("g3"), kgo.ConsumeTopics("grp"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				// Incremental under kgo's default cooperative-sticky
				// balancer: m holds only what is added.
				if assigned[id] == nil {
					assigned[id] = map[int32]bool{}
				}
				for _, ps := range m {
					for _, q := range ps {
						assigned[id][q] = true
					}
				}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, ps := range m {
					for _, q := range ps {
						delete(assigned[id], q)
					}
				}
			}))
	}
	members := []*kgo.Client{member(0), member(1), member(2)}
	polls := make(chan int, 1000)
	var wg sync.WaitGroup
	stopPolling := make([]chan struct{}, 3)
	for i, m := range members {
		stopPolling[i] = make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stopPolling[i]:
					return
				default:
				}
				pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				fs := m.PollFetches(pctx)
				cancel()
				polls <- len(fs.Records())
				if err := m.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("member %d commit: %v", i, err)
				}
			}
		}()
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for ctx.Err() == nil {
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s (assignments %v)", what, assigned)
	}
	total := func(ids ...int) int {
		n := 0
		for _, id := range ids {
			n += len(assigned[id])
		}
		return n
	}
	waitFor("three members with two partitions each", func() bool {
		return len(assigned[0]) == 2 && len(assigned[1]) == 2 && len(assigned[2]) == 2
	})
	close(stopPolling[2])
	members[2].LeaveGroup()
	waitFor("two members sharing six partitions", func() bool { return len(assigned[0]) == 3 && len(assigned[1]) == 3 && total(0, 1) == 6 })
	close(stopPolling[0])
	close(stopPolling[1])
	wg.Wait()
	for _, m := range members[:2] {
		if err := m.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = "g3"
	resp, err := of.RequestWith(ctx, members[0])
	if err != nil {
		t.Fatal(err)
	}
	committed := int64(0)
	for _, tp := range resp.Topics {
		for _, pp := range tp.Partitions {
			if pp.ErrorCode != 0 {
				t.Fatalf("OffsetFetch %s-%d: %d", tp.Topic, pp.Partition, pp.ErrorCode)
			}
			committed += max(pp.Offset, 0)
		}
	}
	if committed != 60 {
		t.Fatalf("committed offsets sum to %d, want 60 (everything consumed)", committed)
	}
}
