package group

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumer is a minimal classic-protocol client: join (with the
// MEMBER_ID_REQUIRED round), sync (assigning as leader), then heartbeat
// and commit until told to rejoin; now and then it leaves.
func consumer(ctx context.Context, t *testing.T, c *Coordinator, grp string, n int, commits *sync.Map) {
	memberID := ""
	for round := 0; ctx.Err() == nil; round++ {
		jr := joinReq(9, grp, memberID)
		jr.SessionTimeoutMillis = 2000
		jr.RebalanceTimeoutMillis = 3000
		resp, _ := c.Handle(ctx, jr)
		j := resp.(*kmsg.JoinGroupResponse)
		switch j.ErrorCode {
		case errNone:
		case errMemberIDRequired:
			memberID = j.MemberID
			continue
		case errUnknownMemberID:
			memberID = ""
			continue
		default:
			continue
		}
		memberID = j.MemberID
		sr := syncReq(5, grp, memberID, j.Generation, nil)
		for _, m := range j.Members {
			a := kmsg.NewSyncGroupRequestGroupAssignment()
			a.MemberID = m.MemberID
			a.MemberAssignment = []byte(m.MemberID)
			sr.GroupAssignment = append(sr.GroupAssignment, a)
		}
		resp, _ = c.Handle(ctx, sr)
		if s := resp.(*kmsg.SyncGroupResponse); s.ErrorCode != 0 {
			continue
		} else if string(s.MemberAssignment) != memberID {
			t.Errorf("member %s got assignment %q", memberID, s.MemberAssignment)
			return
		}
	stable:
		for i := 0; ctx.Err() == nil; i++ {
			resp, _ := c.Handle(ctx, hbReq(4, grp, memberID, j.Generation))
			if resp.(*kmsg.HeartbeatResponse).ErrorCode != 0 {
				break stable
			}
			off := int64(round*1000 + i)
			codes := errorCode(t, mustHandle(ctx, c, commitReq(9, grp, memberID, j.Generation,
				map[string]map[int32]int64{"t": {int32(n): off}})))
			if codes == 0 {
				commits.Store(n, off)
			}
			if i == 20 && round%3 == n%3 {
				mustHandle(ctx, c, leaveReq(4, grp, memberID))
				memberID = ""
				break stable
			}
			time.Sleep(time.Millisecond)
		}
	}
}

func mustHandle(ctx context.Context, c *Coordinator, req kmsg.Request) kmsg.Response {
	resp, _ := c.Handle(ctx, req)
	return resp
}

// TestConcurrentGroup runs five consumers in one group with readers
// beside them for a bounded time (real clock), then checks that every
// goroutine returns and the last acknowledged commit of each is what
// OffsetFetch answers. Meant for -race.
func TestConcurrentGroup(t *testing.T) {
	h := newHarness(t, Config{Now: time.Now, MinSessionTimeout: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	var commits sync.Map
	for n := range 5 {
		wg.Go(func() { consumer(ctx, t, h.c, "race", n, &commits) })
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			for _, req := range []kmsg.Request{
				kmsg.NewPtrListGroupsRequest(),
				&kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"race"}},
				&kmsg.OffsetFetchRequest{Version: 7, Group: "race"},
			} {
				mustHandle(ctx, h.c, req)
			}
			time.Sleep(time.Millisecond)
		}
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("consumers did not return")
	}
	got, _ := h.fetch(7, "race", nil, false)
	commits.Range(func(k, v any) bool {
		if key := tpKey("t", int32(k.(int))); got[key] != v.(int64) {
			t.Errorf("%s: fetched %d, last acknowledged commit %d", key, got[key], v)
		}
		return true
	})
	n := 0
	commits.Range(func(any, any) bool { n++; return true })
	if n == 0 {
		t.Fatal("no commit was acknowledged")
	}
	h.c.mu.Lock()
	gen := h.c.groups["race"].generation
	h.c.mu.Unlock()
	t.Logf("%d consumers committed; %d generations; offsets %v", n, gen, got)
}
