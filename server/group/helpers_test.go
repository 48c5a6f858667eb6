package group

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeClock is a Config.Now that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

type harness struct {
	t     *testing.T
	c     *Coordinator
	clock *fakeClock
	dir   string
}

// newHarness opens a coordinator on a fresh directory with a fake clock
// (cfg.Now, when set, wins) and closes it at the end of the test.
func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, clock: newFakeClock()}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Now == nil {
		cfg.Now = h.clock.Now
	}
	h.dir = cfg.Dir
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	t.Cleanup(func() { h.c.Close() })
	return h
}

// reopen closes the coordinator and opens a new one on the same
// directory and clock.
func (h *harness) reopen(cfg Config) {
	h.t.Helper()
	if err := h.c.Close(); err != nil {
		h.t.Fatal(err)
	}
	cfg.Dir = h.dir
	if cfg.Now == nil {
		cfg.Now = h.clock.Now
	}
	c, err := Open(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.c = c
}

// tick runs the expirations due at the clock's time, as the timer does.
func (h *harness) tick() {
	if h.c.lock() {
		h.c.unlock()
	}
}

func (h *harness) advance(d time.Duration) {
	h.clock.Advance(d)
	h.tick()
}

func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	h.t.Cleanup(cancel)
	return ctx
}

func (h *harness) handle(req kmsg.Request) kmsg.Response {
	h.t.Helper()
	resp, ok := h.c.Handle(h.ctx(), req)
	if !ok {
		h.t.Fatalf("Handle(%T) not handled", req)
	}
	if resp.GetVersion() != req.GetVersion() {
		h.t.Fatalf("%T: response version %d, request %d", req, resp.GetVersion(), req.GetVersion())
	}
	// Every response must encode and decode at its version.
	b := resp.AppendTo(nil)
	back := resp.Key()
	r2 := kmsg.ResponseForKey(back)
	r2.SetVersion(resp.GetVersion())
	if err := r2.ReadFrom(b); err != nil {
		h.t.Fatalf("%T v%d does not decode back: %v", resp, resp.GetVersion(), err)
	}
	return resp
}

func protos(names ...string) []kmsg.JoinGroupRequestProtocol {
	var out []kmsg.JoinGroupRequestProtocol
	for _, n := range names {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = n
		p.Metadata = []byte("meta-" + n)
		out = append(out, p)
	}
	return out
}

func joinReq(v int16, group, memberID string, names ...string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = v
	r.Group = group
	r.MemberID = memberID
	r.SessionTimeoutMillis = 10_000
	r.RebalanceTimeoutMillis = 30_000
	r.ProtocolType = "consumer"
	if len(names) == 0 {
		names = []string{"range"}
	}
	r.Protocols = protos(names...)
	return r
}

func (h *harness) join(req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	h.t.Helper()
	return h.handle(req).(*kmsg.JoinGroupResponse)
}

// joinAsync sends a JoinGroup that may wait, and returns where its answer
// will come.
func (h *harness) joinAsync(req *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() {
		resp, _ := h.c.Handle(h.ctx(), req)
		ch <- resp.(*kmsg.JoinGroupResponse)
	}()
	return ch
}

// memberID gets a member id for a new dynamic member: from v4 on the
// first join answers MEMBER_ID_REQUIRED with it; before, "" is joined.
func (h *harness) memberID(v int16, group string) string {
	h.t.Helper()
	if v < 4 {
		return ""
	}
	r := h.join(joinReq(v, group, ""))
	if r.ErrorCode != errMemberIDRequired || r.MemberID == "" {
		h.t.Fatalf("first join v%d: error %d member %q, want MEMBER_ID_REQUIRED with an id", v, r.ErrorCode, r.MemberID)
	}
	return r.MemberID
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatal("no answer within 20s")
	}
	var zero T
	return zero
}

// waitJoining waits until n members of the group wait in JoinGroup.
func (h *harness) waitJoining(group string, n int) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		h.c.mu.Lock()
		k := 0
		if g := h.c.groups[group]; g != nil {
			for _, m := range g.members {
				if m.awaitingJoin() {
					k++
				}
			}
		}
		h.c.mu.Unlock()
		if k >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	h.t.Fatalf("group %s: %d members never waited in JoinGroup", group, n)
}

// waitSyncing waits until n members of the group wait in SyncGroup.
func (h *harness) waitSyncing(group string, n int) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		h.c.mu.Lock()
		k := 0
		if g := h.c.groups[group]; g != nil {
			for _, m := range g.members {
				if m.awaitingSync() {
					k++
				}
			}
		}
		h.c.mu.Unlock()
		if k >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	h.t.Fatalf("group %s: %d members never waited in SyncGroup", group, n)
}

func (h *harness) state(group string) string {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	if g := h.c.groups[group]; g != nil {
		return g.state.String()
	}
	return "none"
}

func syncReq(v int16, group, memberID string, gen int32, assign map[string]string) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = v
	r.Group = group
	r.MemberID = memberID
	r.Generation = gen
	for id, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID = id
		ga.MemberAssignment = []byte(a)
		r.GroupAssignment = append(r.GroupAssignment, ga)
	}
	return r
}

func (h *harness) syncAsync(req *kmsg.SyncGroupRequest) <-chan *kmsg.SyncGroupResponse {
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() {
		resp, _ := h.c.Handle(h.ctx(), req)
		ch <- resp.(*kmsg.SyncGroupResponse)
	}()
	return ch
}

func (h *harness) heartbeat(v int16, group, memberID string, gen int32) int16 {
	h.t.Helper()
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = v
	r.Group = group
	r.MemberID = memberID
	r.Generation = gen
	return h.handle(r).(*kmsg.HeartbeatResponse).ErrorCode
}

func (h *harness) describe(v int16, group string) kmsg.DescribeGroupsResponseGroup {
	h.t.Helper()
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version = v
	r.Groups = []string{group}
	resp := h.handle(r).(*kmsg.DescribeGroupsResponse)
	if len(resp.Groups) != 1 {
		h.t.Fatalf("describe: %d groups", len(resp.Groups))
	}
	return resp.Groups[0]
}

func commitReq(v int16, group, memberID string, gen int32, offsets map[string]map[int32]int64) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = v
	r.Group = group
	r.MemberID = memberID
	r.Generation = gen
	for _, topic := range sortedKeys(offsets) {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		for _, p := range sortedKeys(offsets[topic]) {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition = p
			rp.Offset = offsets[topic][p]
			rp.LeaderEpoch = 7
			md := "md"
			rp.Metadata = &md
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r
}

// commit commits and returns the error codes, topic/partition -> code.
func (h *harness) commit(req *kmsg.OffsetCommitRequest) map[string]int16 {
	h.t.Helper()
	resp := h.handle(req).(*kmsg.OffsetCommitResponse)
	out := map[string]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[tpKey(t.Topic, p.Partition)] = p.ErrorCode
		}
	}
	return out
}

// fetch fetches the offsets of group (nil topics: all) at version v and
// returns topic/partition -> offset, or the error code as "E<code>".
func (h *harness) fetch(v int16, group string, topics map[string][]int32, requireStable bool) (map[string]int64, int16) {
	h.t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = v
	r.RequireStable = requireStable
	out := map[string]int64{}
	if v >= 8 {
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = group
		for _, topic := range sortedKeys(topics) {
			t := kmsg.NewOffsetFetchRequestGroupTopic()
			t.Topic = topic
			t.Partitions = topics[topic]
			g.Topics = append(g.Topics, t)
		}
		r.Groups = []kmsg.OffsetFetchRequestGroup{g}
		resp := h.handle(r).(*kmsg.OffsetFetchResponse)
		if len(resp.Groups) != 1 {
			h.t.Fatalf("fetch v%d: %d groups", v, len(resp.Groups))
		}
		for _, t := range resp.Groups[0].Topics {
			for _, p := range t.Partitions {
				out[tpKey(t.Topic, p.Partition)] = p.Offset
				if p.ErrorCode != 0 {
					out[tpKey(t.Topic, p.Partition)] = -1000 - int64(p.ErrorCode)
				}
			}
		}
		return out, resp.Groups[0].ErrorCode
	}
	r.Group = group
	for _, topic := range sortedKeys(topics) {
		t := kmsg.NewOffsetFetchRequestTopic()
		t.Topic = topic
		t.Partitions = topics[topic]
		r.Topics = append(r.Topics, t)
	}
	resp := h.handle(r).(*kmsg.OffsetFetchResponse)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[tpKey(t.Topic, p.Partition)] = p.Offset
			if p.ErrorCode != 0 {
				out[tpKey(t.Topic, p.Partition)] = -1000 - int64(p.ErrorCode)
			}
		}
	}
	return out, resp.ErrorCode
}

func tpKey(topic string, p int32) string {
	return topic + "/" + strconv.Itoa(int(p))
}

func sortedKeys[K string | int32, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}
